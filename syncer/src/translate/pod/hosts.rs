//! `/etc/hosts` of a host pod with a `subdomain`, as the virtual cluster would write it
//! (`sync.toHost.pods.rewriteHosts`). The host kubelet names such a pod
//! `<hostname>.<subdomain>.<host namespace>.svc.<host domain>` there; an init container
//! (`vnest-syncer rewrite-hosts`) writes the file again with the virtual name into an
//! emptyDir, and every container mounts that copy over `/etc/hosts` (the kubelet then leaves
//! its own out).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{
        Capabilities, Container, EmptyDirVolumeSource, PodSpec, ResourceRequirements,
        SeccompProfile, SecurityContext, Volume, VolumeMount,
    },
    apimachinery::pkg::api::resource::Quantity,
};

use super::references::containers_mut;

/// The init container, and the emptyDir it writes the copy to.
pub const REWRITE_HOSTS: &str = "vnest-rewrite-hosts";
const ETC_HOSTS: &str = "/etc/hosts";
const COPY_DIR: &str = "/vnest-hosts";
const COPY_FILE: &str = "hosts";
/// Where the syncer's image has its binary.
const SYNCER_BINARY: &str = "/usr/local/bin/vnest-syncer";
/// The image's own non-root user.
const NON_ROOT: i64 = 65532;

/// The name the virtual cluster gives a pod with `hostname` and `subdomain` in `namespace`.
pub fn pod_fqdn(hostname: &str, subdomain: &str, namespace: &str, domain: &str) -> String {
    format!("{hostname}.{subdomain}.{namespace}.svc.{domain}")
}

/// Host pod `spec` made to see `/etc/hosts` name it `fqdn`: the init container first (so the
/// tenant's init containers see the copy too), its emptyDir, and a mount of the copy in every
/// container that does not mount `/etc/hosts` itself.
pub fn rewrite_hosts(spec: &mut PodSpec, image: &str, hostname: &str, fqdn: &str) {
    let copy = VolumeMount {
        name: REWRITE_HOSTS.into(),
        mount_path: ETC_HOSTS.into(),
        sub_path: Some(COPY_FILE.into()),
        read_only: Some(true),
        ..Default::default()
    };
    for container in containers_mut(spec) {
        let mounts = container.volume_mounts.get_or_insert_default();
        if !mounts.iter().any(|m| m.mount_path == ETC_HOSTS) {
            mounts.push(copy.clone());
        }
    }
    spec.volumes.get_or_insert_default().push(Volume {
        name: REWRITE_HOSTS.into(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    });
    let to = format!("{COPY_DIR}/{COPY_FILE}");
    let init = Container {
        name: REWRITE_HOSTS.into(),
        image: Some(image.into()),
        command: Some(vec![SYNCER_BINARY.into(), "rewrite-hosts".into()]),
        args: Some(
            ["--hostname", hostname, "--fqdn", fqdn, "--to", &to]
                .map(String::from)
                .into(),
        ),
        volume_mounts: Some(vec![VolumeMount {
            name: REWRITE_HOSTS.into(),
            mount_path: COPY_DIR.into(),
            ..Default::default()
        }]),
        resources: Some(small()),
        security_context: Some(restricted()),
        ..Default::default()
    };
    spec.init_containers.get_or_insert_default().insert(0, init);
}

/// vCluster's requests and limits for its rewrite-hosts init container.
fn small() -> ResourceRequirements {
    let amounts: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), Quantity("30m".into())),
        ("memory".to_string(), Quantity("64Mi".into())),
    ]
    .into();
    ResourceRequirements {
        requests: Some(amounts.clone()),
        limits: Some(amounts),
        ..Default::default()
    }
}

/// Within the `restricted` Pod Security Standard whatever the pod asks, so a host namespace
/// enforcing it admits the pod.
fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Default::default()
        }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        run_as_user: Some(NON_ROOT),
        run_as_group: Some(NON_ROOT),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The kubelet's hosts file `hosts` with the pod's own line (an address, then names ending
/// in `hostname`) naming it `fqdn` and `hostname`; every other line as it was.
pub fn rewritten(hosts: &str, hostname: &str, fqdn: &str) -> String {
    let mut out = String::with_capacity(hosts.len() + fqdn.len());
    for line in hosts.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let own = !line.trim_start().starts_with('#')
            && fields.len() >= 2
            && fields.last() == Some(&hostname)
            && !matches!(fields[0], "127.0.0.1" | "::1");
        if own {
            out.push_str(&format!("{}\t{fqdn}\t{hostname}", fields[0]));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBELET_HOSTS: &str = "# Kubernetes-managed hosts file.
127.0.0.1\tlocalhost
::1\tlocalhost ip6-localhost ip6-loopback
fe00::0\tip6-localnet
10.1.0.7\tweb-0.db.team-a.svc.cluster.local\tweb-0

# Entries added by HostAliases.
10.9.9.9\tfoo
";

    /// Only the pod's own line changes, to the virtual name; aliases and loopback stay.
    #[test]
    fn the_pods_own_line_names_it_as_the_virtual_cluster_does() {
        let fqdn = pod_fqdn("web-0", "db", "shop", "tenant.local");
        assert_eq!(fqdn, "web-0.db.shop.svc.tenant.local");
        let out = rewritten(KUBELET_HOSTS, "web-0", &fqdn);
        assert!(
            out.contains("10.1.0.7\tweb-0.db.shop.svc.tenant.local\tweb-0\n"),
            "{out}"
        );
        assert!(!out.contains("team-a"), "{out}");
        let unchanged: Vec<&str> = KUBELET_HOSTS
            .lines()
            .filter(|l| !l.starts_with("10.1.0.7"))
            .collect();
        for line in unchanged {
            assert!(out.lines().any(|l| l == line), "lost {line:?}: {out}");
        }
    }

    /// Every container but one mounting its own `/etc/hosts` sees the copy; the init
    /// container runs first, within the restricted standard.
    #[test]
    fn containers_mount_the_copy_the_first_init_container_writes() {
        let mut spec: PodSpec = serde_json::from_value(serde_json::json!({
            "initContainers": [{ "name": "setup" }],
            "containers": [
                { "name": "app" },
                { "name": "own", "volumeMounts": [{ "name": "mine", "mountPath": "/etc/hosts" }] },
            ],
        }))
        .unwrap();
        rewrite_hosts(
            &mut spec,
            "syncer:1",
            "web-0",
            "web-0.db.shop.svc.cluster.local",
        );
        let mounts_copy = |c: &Container| {
            c.volume_mounts
                .iter()
                .flatten()
                .any(|m| m.name == REWRITE_HOSTS && m.mount_path == ETC_HOSTS)
        };
        let init = spec.init_containers.as_ref().unwrap();
        assert_eq!(init[0].name, REWRITE_HOSTS);
        assert_eq!(init[0].image.as_deref(), Some("syncer:1"));
        assert!(
            init[0]
                .args
                .iter()
                .flatten()
                .any(|a| a == "web-0.db.shop.svc.cluster.local")
        );
        let context = init[0].security_context.as_ref().unwrap();
        assert_eq!(context.run_as_non_root, Some(true));
        assert_eq!(context.allow_privilege_escalation, Some(false));
        assert!(
            !mounts_copy(&init[0]),
            "the writer reads the kubelet's file"
        );
        assert!(mounts_copy(&init[1]));
        assert!(mounts_copy(&spec.containers[0]));
        assert!(!mounts_copy(&spec.containers[1]));
        assert!(
            spec.volumes
                .iter()
                .flatten()
                .any(|v| v.name == REWRITE_HOSTS && v.empty_dir.is_some())
        );
    }
}
