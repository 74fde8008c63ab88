//! `networking.resolveDNS`: names the virtual cluster's DNS server answers from outside the
//! virtual cluster (vCluster's schema, plus the seed's `target: host`). The entry's shape is
//! checked by the schema; [`ResolveDns::mapping`] reads it into a [`DnsMapping`] for the
//! operator (which refuses an entry it cannot read, naming it) and the syncer (which builds the
//! Corefile from it).

use std::{fmt, net::IpAddr};

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::inline_schema;

/// One entry: what the virtual cluster asks for (exactly one of `hostname`, `service`,
/// `namespace`; an empty string counts as unset, as in the seed's `service: ""`) and where it
/// is answered from (`target`).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(ONE_SOURCE_RULE).message(ONE_SOURCE_MESSAGE))]
pub struct ResolveDns {
    /// A DNS name inside the virtual cluster (`api.example.com`); `*.example.com` means the
    /// names under `example.com`. The entry covers the name and every name under it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new(HOSTNAME_RULE).message(HOSTNAME_MESSAGE))]
    pub hostname: String,
    /// A virtual Service, `<namespace>/<name>`: its name `<name>.<namespace>.svc.<clusterDomain>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 127))]
    #[x_kube(validation = Rule::new(SERVICE_RULE).message(SERVICE_MESSAGE))]
    pub service: String,
    /// A virtual namespace: every Service name in it (`*.<namespace>.svc.<clusterDomain>`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 63))]
    #[x_kube(validation = Rule::new(NAMESPACE_RULE).message(NAMESPACE_MESSAGE))]
    pub namespace: String,
    #[serde(default)]
    pub target: DnsTargetSpec,
}

const ONE_SOURCE_RULE: &str = "[has(self.hostname) && self.hostname != '', has(self.service) && self.service != '', has(self.namespace) && self.namespace != ''].filter(x, x).size() == 1";
const ONE_SOURCE_MESSAGE: &str =
    "set exactly one of hostname, service and namespace (e.g. hostname: \"*.amazonaws.com\")";
const HOSTNAME_RULE: &str = "self == '' || self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')";
const HOSTNAME_MESSAGE: &str =
    "must be a lowercase DNS name, optionally starting with *. (e.g. *.amazonaws.com)";
const SERVICE_RULE: &str =
    "self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?$')";
const SERVICE_MESSAGE: &str = "must be <namespace>/<name> of a virtual Service (e.g. default/db)";
const NAMESPACE_RULE: &str = "self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')";
const NAMESPACE_MESSAGE: &str = "must be a namespace name (a lowercase DNS label)";

/// `target` as written: the seed's string `host`, or vCluster's object with one of
/// `hostname`, `ip`, `hostService`, `hostNamespace`, `vClusterService`. Kept as JSON because
/// the API server has no schema for "a string or an object": [`ResolveDns::mapping`] reads it,
/// and a bad one is reported by the operator with the entry's index instead of failing the
/// whole VirtualCluster's deserialisation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DnsTargetSpec(pub Value);

inline_schema!(DnsTargetSpec, {
    "description": "Where the name is answered from: `host` (the host cluster's DNS server), or one of {hostname: <name, or *.<domain> for a wildcard entry>}, {ip: <address>}, {hostService: <namespace>/<name>}, {hostNamespace: <namespace>} (for a namespace entry).",
    "x-kubernetes-preserve-unknown-fields": true,
});

/// What an entry answers for, in the virtual cluster's DNS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsSource {
    /// A DNS name without trailing dot; the entry covers it and every name under it.
    Name(String),
    /// Every Service name in this virtual namespace.
    Namespace(String),
}

/// Where an entry's answer comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsTarget {
    /// The host cluster's DNS server answers the name as asked.
    HostDns,
    /// This address.
    Ip(IpAddr),
    /// The name is answered as this other name, asked of the host's DNS server, with the
    /// asked name in the answer (names under the entry's map to names under this one).
    Hostname(String),
    /// The ClusterIP of this host Service (`namespace`, `name`), read by the syncer.
    HostService(String, String),
    /// The same Service name in this host namespace, asked of the host's DNS server.
    HostNamespace(String),
}

/// An entry as the DNS server acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsMapping {
    pub source: DnsSource,
    pub target: DnsTarget,
}

/// Why an entry cannot be acted on: the field under the entry (`target.ip`) and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsEntryError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for DnsEntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn fail<T>(field: &'static str, message: impl Into<String>) -> Result<T, DnsEntryError> {
    Err(DnsEntryError {
        field,
        message: message.into(),
    })
}

const TARGET_KEYS: [&str; 5] = [
    "hostname",
    "ip",
    "hostService",
    "hostNamespace",
    "vClusterService",
];

fn is_dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `name` without a leading `*.`, and whether it had one.
fn strip_wildcard(name: &str) -> (&str, bool) {
    match name.strip_prefix("*.") {
        Some(rest) => (rest, true),
        None => (name, false),
    }
}

impl ResolveDns {
    /// The entry read for a virtual cluster whose Services are in `cluster_domain`, or why it
    /// cannot be acted on.
    pub fn mapping(&self, cluster_domain: &str) -> Result<DnsMapping, DnsEntryError> {
        let sources = [&self.hostname, &self.service, &self.namespace];
        if sources.iter().filter(|s| !s.is_empty()).count() != 1 {
            return fail(
                "hostname",
                "set exactly one of hostname, service and namespace",
            );
        }
        let target = match &self.target.0 {
            Value::String(s) if s == "host" => DnsTarget::HostDns,
            Value::Object(map) => structured_target(map)?,
            Value::Null => {
                return fail(
                    "target",
                    "is required: write target: host, or e.g. target: {hostService: <namespace>/<name>}",
                );
            }
            other => {
                return fail(
                    "target",
                    format!(
                        "{other} is not a target: write host, or an object with one of hostname, ip, hostService, hostNamespace"
                    ),
                );
            }
        };
        let source = if !self.namespace.is_empty() {
            if !is_dns_name(&self.namespace) || self.namespace.contains('.') {
                return fail("namespace", "must be a namespace name");
            }
            DnsSource::Namespace(self.namespace.clone())
        } else if !self.service.is_empty() {
            match self.service.split_once('/') {
                Some((ns, name))
                    if is_dns_name(ns)
                        && is_dns_name(name)
                        && !ns.contains('.')
                        && !name.contains('.') =>
                {
                    DnsSource::Name(format!("{name}.{ns}.svc.{cluster_domain}"))
                }
                _ => return fail("service", "must be <namespace>/<name> (e.g. default/db)"),
            }
        } else {
            let (name, _) = strip_wildcard(&self.hostname);
            if !is_dns_name(name) {
                return fail(
                    "hostname",
                    "must be a lowercase DNS name, optionally starting with *.",
                );
            }
            DnsSource::Name(name.to_string())
        };
        match (&source, &target) {
            (DnsSource::Namespace(_), DnsTarget::HostNamespace(_)) => {}
            (DnsSource::Namespace(_), _) => {
                return fail(
                    "target",
                    "a namespace entry maps to target.hostNamespace only",
                );
            }
            (_, DnsTarget::HostNamespace(_)) => {
                return fail(
                    "target.hostNamespace",
                    "maps a namespace: set namespace instead of hostname or service",
                );
            }
            (DnsSource::Name(_), DnsTarget::HostDns) if !self.service.is_empty() => {
                return fail(
                    "target",
                    "host forwards a hostname to the host's DNS server; for a Service use target.hostService: <namespace>/<name>",
                );
            }
            (DnsSource::Name(from), DnsTarget::Hostname(to)) if from == to => {
                return fail("target.hostname", "maps the name onto itself");
            }
            _ => {}
        }
        Ok(DnsMapping { source, target })
    }
}

fn structured_target(map: &serde_json::Map<String, Value>) -> Result<DnsTarget, DnsEntryError> {
    if let Some(unknown) = map.keys().find(|k| !TARGET_KEYS.contains(&k.as_str())) {
        return fail(
            "target",
            format!(
                "has unknown key {unknown:?}; use one of hostname, ip, hostService, hostNamespace"
            ),
        );
    }
    let set: Vec<(&String, &Value)> = map
        .iter()
        .filter(|(_, v)| v.as_str().is_none_or(|s| !s.is_empty()))
        .collect();
    let [(key, value)] = set.as_slice() else {
        return fail(
            "target",
            "set exactly one of hostname, ip, hostService, hostNamespace",
        );
    };
    let Some(value) = value.as_str() else {
        return fail("target", format!("{key} must be a string"));
    };
    match key.as_str() {
        "hostname" => {
            let (name, wildcard) = strip_wildcard(value);
            if !is_dns_name(name) {
                return fail(
                    "target.hostname",
                    format!("{value:?} is not a lowercase DNS name"),
                );
            }
            if wildcard {
                return fail(
                    "target.hostname",
                    "names one name; drop the *. (the entry's names under it map to the names under this one)",
                );
            }
            Ok(DnsTarget::Hostname(name.to_string()))
        }
        "ip" => value.parse().map(DnsTarget::Ip).or_else(|_| {
            fail(
                "target.ip",
                format!("{value:?} is not an IP address (e.g. 10.0.0.5)"),
            )
        }),
        "hostService" => match value.split_once('/') {
            Some((ns, name)) if is_dns_name(ns) && is_dns_name(name) && !ns.contains('.') => {
                Ok(DnsTarget::HostService(ns.to_string(), name.to_string()))
            }
            _ => fail(
                "target.hostService",
                format!("{value:?} must be <namespace>/<name> of a host Service"),
            ),
        },
        "hostNamespace" if is_dns_name(value) && !value.contains('.') => {
            Ok(DnsTarget::HostNamespace(value.to_string()))
        }
        "hostNamespace" => fail(
            "target.hostNamespace",
            format!("{value:?} is not a namespace name"),
        ),
        _ => fail(
            "target.vClusterService",
            "is not supported by vnest: map the other virtual cluster's host copy of the Service with target.hostService",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(yaml: &str) -> ResolveDns {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn mapping(yaml: &str) -> Result<DnsMapping, DnsEntryError> {
        entry(yaml).mapping("cluster.local")
    }

    /// The seed's entry as it writes it: a wildcard hostname to the host's DNS, empty service.
    #[test]
    fn the_seeds_entry_forwards_a_zone_to_the_host() {
        let m = mapping("{hostname: '*.amazonaws.com', target: host, service: ''}").unwrap();
        assert_eq!(m.source, DnsSource::Name("amazonaws.com".into()));
        assert_eq!(m.target, DnsTarget::HostDns);
    }

    /// A Service entry is its name in the virtual cluster's domain.
    #[test]
    fn a_service_entry_is_named_in_the_cluster_domain() {
        let m = entry("{service: default/db, target: {hostService: data/postgres}}")
            .mapping("tenant.test")
            .unwrap();
        assert_eq!(
            m.source,
            DnsSource::Name("db.default.svc.tenant.test".into())
        );
        assert_eq!(
            m.target,
            DnsTarget::HostService("data".into(), "postgres".into())
        );
    }

    /// vCluster's structured targets each read as their kind.
    #[test]
    fn structured_targets_read_as_their_kind() {
        let ip = mapping("{hostname: legacy.example.com, target: {ip: 10.1.2.3}}").unwrap();
        assert_eq!(ip.target, DnsTarget::Ip("10.1.2.3".parse().unwrap()));
        let name = mapping("{hostname: a.example.com, target: {hostname: b.example.net}}").unwrap();
        assert_eq!(name.target, DnsTarget::Hostname("b.example.net".into()));
        let ns = mapping("{namespace: shared, target: {hostNamespace: platform}}").unwrap();
        assert_eq!(ns.source, DnsSource::Namespace("shared".into()));
        assert_eq!(ns.target, DnsTarget::HostNamespace("platform".into()));
    }

    /// Each unusable entry names the field to fix.
    #[test]
    fn bad_entries_name_the_field() {
        let field = |yaml: &str| mapping(yaml).unwrap_err().field;
        assert_eq!(field("{hostname: a.com}"), "target");
        assert_eq!(field("{hostname: a.com, target: elsewhere}"), "target");
        assert_eq!(
            field("{hostname: a.com, target: {ip: 10.0.0.300}}"),
            "target.ip"
        );
        assert_eq!(
            field("{hostname: a.com, target: {ip: 1.2.3.4, hostname: b.com}}"),
            "target"
        );
        assert_eq!(
            field("{hostname: a.com, target: {hostService: db}}"),
            "target.hostService"
        );
        assert_eq!(field("{hostname: a.com, target: {port: 53}}"), "target");
        assert_eq!(
            field("{hostname: a.com, target: {vClusterService: a/b/c/d}}"),
            "target.vClusterService"
        );
        assert_eq!(field("{service: default/db, target: host}"), "target");
        assert_eq!(
            field("{namespace: shared, target: {ip: 1.2.3.4}}"),
            "target"
        );
        assert_eq!(
            field("{hostname: a.com, target: {hostNamespace: x}}"),
            "target.hostNamespace"
        );
        assert_eq!(
            field("{hostname: a.com, service: default/db, target: host}"),
            "hostname"
        );
        assert_eq!(field("{service: db, target: {ip: 1.2.3.4}}"), "service");
        assert_eq!(
            field("{hostname: a.com, target: {hostname: a.com}}"),
            "target.hostname"
        );
    }

    /// The schema refuses an entry with no source or two, and a malformed name, with messages
    /// that say the fix; `target` takes a string or an object.
    #[test]
    fn the_schema_checks_the_entry_shape() {
        let schema = serde_json::to_value(schemars::schema_for!(ResolveDns)).unwrap();
        let rules = schema["x-kubernetes-validations"].to_string();
        assert!(
            rules.contains("exactly one of hostname, service and namespace"),
            "{rules}"
        );
        let target = &schema["properties"]["target"];
        assert_eq!(
            target["x-kubernetes-preserve-unknown-fields"], true,
            "{target}"
        );
        assert!(target.get("type").is_none(), "{target}");
        let hostname = schema["properties"]["hostname"]["x-kubernetes-validations"].to_string();
        assert!(hostname.contains("*.amazonaws.com"), "{hostname}");
    }
}
