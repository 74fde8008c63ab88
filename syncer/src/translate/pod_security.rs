//! `policies.podSecurityStandard`: whether a virtual pod may run on the host at the chosen
//! Pod Security Standard level, and if not, which field breaks it and why. The checks follow
//! the upstream baseline and restricted profiles for the fields a tenant could use to reach
//! the host: host namespaces, hostPath, privileged, host ports, added capabilities; restricted
//! adds volume types, privilege escalation, non-root and seccomp.

use k8s_openapi::api::core::v1::{PodSpec, SecurityContext};
use vnest_crds::{FieldError, PodSecurityStandard};

/// Why a pod may not be synced: the offending field path and the rule it breaks.
pub type Violation = FieldError;

/// Capabilities the baseline profile lets a container add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn violation(field: String, reason: &str) -> Result<(), Violation> {
    Err(Violation {
        field,
        message: reason.to_string(),
    })
}

/// A container as the checks see it: field path, security context, host ports.
type ContainerView<'a> = (String, Option<&'a SecurityContext>, Vec<Option<i32>>);

/// Every container of the pod (init, regular, ephemeral).
fn containers(spec: &PodSpec) -> Vec<ContainerView<'_>> {
    let ports = |p: &Option<Vec<k8s_openapi::api::core::v1::ContainerPort>>| {
        p.iter().flatten().map(|p| p.host_port).collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        out.push((
            format!("spec.initContainers[{i}]"),
            c.security_context.as_ref(),
            ports(&c.ports),
        ));
    }
    for (i, c) in spec.containers.iter().enumerate() {
        out.push((
            format!("spec.containers[{i}]"),
            c.security_context.as_ref(),
            ports(&c.ports),
        ));
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        out.push((
            format!("spec.ephemeralContainers[{i}]"),
            c.security_context.as_ref(),
            ports(&c.ports),
        ));
    }
    out
}

fn check_baseline(spec: &PodSpec) -> Result<(), Violation> {
    for (on, field) in [
        (spec.host_network, "spec.hostNetwork"),
        (spec.host_pid, "spec.hostPID"),
        (spec.host_ipc, "spec.hostIPC"),
    ] {
        if on == Some(true) {
            return violation(field.into(), "sharing the host's namespaces is forbidden");
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if v.host_path.is_some() {
            return violation(
                format!("spec.volumes[{i}].hostPath"),
                "hostPath volumes are forbidden",
            );
        }
    }
    for (path, sc, host_ports) in containers(spec) {
        if sc.and_then(|s| s.privileged) == Some(true) {
            return violation(
                format!("{path}.securityContext.privileged"),
                "privileged containers are forbidden",
            );
        }
        if let Some(j) = host_ports.iter().position(|p| p.is_some_and(|p| p != 0)) {
            return violation(
                format!("{path}.ports[{j}].hostPort"),
                "host ports are forbidden",
            );
        }
        let added = sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.as_ref());
        if let Some(cap) = added
            .into_iter()
            .flatten()
            .find(|c| !BASELINE_CAPABILITIES.contains(&c.as_str()))
        {
            return violation(
                format!("{path}.securityContext.capabilities.add"),
                &format!("adding capability {cap} is forbidden"),
            );
        }
    }
    Ok(())
}

fn check_restricted(spec: &PodSpec) -> Result<(), Violation> {
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let json = serde_json::to_value(v).unwrap_or_default();
        let kind = json
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .find(|k| {
                *k != "name" && !PodSecurityStandard::RESTRICTED_VOLUMES.contains(&k.as_str())
            });
        if let Some(kind) = kind {
            return violation(
                format!("spec.volumes[{i}].{kind}"),
                "this volume type is forbidden at restricted",
            );
        }
    }
    let pod_sc = spec.security_context.as_ref();
    for (path, sc, _) in containers(spec) {
        if sc.and_then(|s| s.allow_privilege_escalation) != Some(false) {
            return violation(
                format!("{path}.securityContext.allowPrivilegeEscalation"),
                "must be set to false at restricted",
            );
        }
        let non_root = sc
            .and_then(|s| s.run_as_non_root)
            .or(pod_sc.and_then(|s| s.run_as_non_root));
        if non_root != Some(true) {
            return violation(
                format!("{path}.securityContext.runAsNonRoot"),
                "must be true at restricted",
            );
        }
        let seccomp = sc
            .and_then(|s| s.seccomp_profile.as_ref())
            .or(pod_sc.and_then(|s| s.seccomp_profile.as_ref()))
            .map(|p| p.type_.as_str());
        if !matches!(seccomp, Some("RuntimeDefault" | "Localhost")) {
            return violation(
                format!("{path}.securityContext.seccompProfile.type"),
                "must be RuntimeDefault or Localhost at restricted",
            );
        }
        let caps = sc.and_then(|s| s.capabilities.as_ref());
        if !caps
            .and_then(|c| c.drop.as_ref())
            .is_some_and(|d| d.iter().any(|c| c == "ALL"))
        {
            return violation(
                format!("{path}.securityContext.capabilities.drop"),
                "must include ALL at restricted",
            );
        }
        if let Some(cap) = caps
            .and_then(|c| c.add.as_ref())
            .into_iter()
            .flatten()
            .find(|c| *c != "NET_BIND_SERVICE")
        {
            return violation(
                format!("{path}.securityContext.capabilities.add"),
                &format!("adding capability {cap} is forbidden at restricted"),
            );
        }
    }
    Ok(())
}

/// Whether `spec` meets `level`; the first violation found otherwise.
pub fn check(spec: &PodSpec, level: PodSecurityStandard) -> Result<(), Violation> {
    match level {
        PodSecurityStandard::Privileged => Ok(()),
        PodSecurityStandard::Baseline => check_baseline(spec),
        PodSecurityStandard::Restricted => {
            check_baseline(spec).and_then(|()| check_restricted(spec))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::from_yaml;
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        from_yaml(yaml)
    }

    fn field(yaml: &str, level: PodSecurityStandard) -> String {
        check(&spec(yaml), level).unwrap_err().field
    }

    const PLAIN: &str = "containers: [{name: app, image: nginx}]";
    const HARDENED: &str = r#"
securityContext: { runAsNonRoot: true, seccompProfile: { type: RuntimeDefault } }
containers:
- name: app
  image: nginx
  securityContext:
    allowPrivilegeEscalation: false
    capabilities: { drop: [ALL], add: [NET_BIND_SERVICE] }
volumes: [{ name: tmp, emptyDir: {} }]
"#;

    /// A plain pod runs under baseline; privileged allows anything.
    #[test]
    fn plain_pods_pass_baseline() {
        assert_eq!(check(&spec(PLAIN), PodSecurityStandard::Baseline), Ok(()));
        let host_net = "hostNetwork: true\ncontainers: [{name: app, image: x}]";
        assert_eq!(
            check(&spec(host_net), PodSecurityStandard::Privileged),
            Ok(())
        );
    }

    /// Each host-reaching field is named in the refusal.
    #[test]
    fn baseline_refuses_host_access_and_names_the_field() {
        use PodSecurityStandard::Baseline as B;
        assert_eq!(
            field("hostNetwork: true\ncontainers: [{name: a, image: x}]", B),
            "spec.hostNetwork"
        );
        assert_eq!(
            field("hostPID: true\ncontainers: [{name: a, image: x}]", B),
            "spec.hostPID"
        );
        assert_eq!(
            field("hostIPC: true\ncontainers: [{name: a, image: x}]", B),
            "spec.hostIPC"
        );
        assert_eq!(
            field(
                "containers: [{name: a, image: x}]\nvolumes: [{name: v, hostPath: {path: /}}]",
                B
            ),
            "spec.volumes[0].hostPath"
        );
        assert_eq!(
            field(
                "containers: [{name: a, image: x, securityContext: {privileged: true}}]",
                B
            ),
            "spec.containers[0].securityContext.privileged"
        );
        assert_eq!(
            field(
                "containers: [{name: a, image: x, ports: [{containerPort: 80, hostPort: 8080}]}]",
                B
            ),
            "spec.containers[0].ports[0].hostPort"
        );
        let err = check(
            &spec("initContainers: [{name: i, image: x, securityContext: {capabilities: {add: [SYS_ADMIN]}}}]\ncontainers: [{name: a, image: x}]"),
            B,
        )
        .unwrap_err();
        assert_eq!(
            err.field,
            "spec.initContainers[0].securityContext.capabilities.add"
        );
        assert!(err.message.contains("SYS_ADMIN"), "{err}");
    }

    /// Baseline's own capability allowlist is accepted.
    #[test]
    fn baseline_allows_its_default_capabilities() {
        let yaml = "containers: [{name: a, image: x, securityContext: {capabilities: {add: [CHOWN, NET_BIND_SERVICE]}}}]";
        assert_eq!(check(&spec(yaml), PodSecurityStandard::Baseline), Ok(()));
    }

    /// Restricted wants the hardened settings spelled out.
    #[test]
    fn restricted_requires_hardening() {
        use PodSecurityStandard::Restricted as R;
        assert_eq!(check(&spec(HARDENED), R), Ok(()));
        assert_eq!(
            field(PLAIN, R),
            "spec.containers[0].securityContext.allowPrivilegeEscalation"
        );
        // Each change breaks one rule of the hardened pod; the refusal names its field.
        for (from, to, breaks) in [
            (
                "emptyDir: {}",
                "nfs: {server: s, path: /}",
                "spec.volumes[0].nfs",
            ),
            (
                "runAsNonRoot: true",
                "runAsNonRoot: false",
                "spec.containers[0].securityContext.runAsNonRoot",
            ),
            (
                "RuntimeDefault",
                "Unconfined",
                "spec.containers[0].securityContext.seccompProfile.type",
            ),
            (
                "drop: [ALL], ",
                "",
                "spec.containers[0].securityContext.capabilities.drop",
            ),
            (
                "NET_BIND_SERVICE",
                "CHOWN",
                "spec.containers[0].securityContext.capabilities.add",
            ),
        ] {
            assert!(HARDENED.contains(from), "{from}");
            assert_eq!(
                field(&HARDENED.replace(from, to), R),
                breaks,
                "{from} -> {to}"
            );
        }
    }
}
