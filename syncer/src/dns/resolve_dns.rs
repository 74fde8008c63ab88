//! `networking.resolveDNS` in the virtual cluster's DNS: which entries are served and how
//! ([`plan`], pure), from what the syncer reads ([`read`]: the virtual Services, the host
//! Services entries map to) and the host's DNS server the operator named. An entry that
//! cannot be served is left out with a [`Problem`]; the others are served regardless.

use std::{collections::BTreeMap, fmt, net::IpAddr};

use futures::stream;
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api,
    api::{ListParams, PartialObjectMeta},
    runtime::watcher,
};
use vnest_crds::{DnsMapping, DnsSource, DnsTarget, HostDns, ResolveDns};

use super::corefile::{Answer, Block};
use crate::change;
use crate::engine::Ctx;

/// The reason of a problem that may go away by itself (a host Service not readable yet).
pub const UNREADABLE: &str = "HostServiceUnreadable";

/// A host Service an entry maps to, `(namespace, name)`.
pub type HostServiceRef = (String, String);

/// What the syncer found of a host Service an entry maps to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostService {
    ClusterIp(IpAddr),
    Missing,
    /// Headless, or of a type without a ClusterIP (`ExternalName`).
    NoClusterIp,
    /// The read failed (RBAC not there yet, API unreachable): why.
    Unreadable(String),
}

/// What [`plan`] decides from, besides the entries.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    /// `(namespace, name)` of every virtual Service.
    pub virtual_services: Vec<(String, String)>,
    pub host_services: BTreeMap<HostServiceRef, HostService>,
    /// The host's DNS server; `None` from an operator that sets none.
    pub host_dns: Option<HostDns>,
}

/// Why entry `index` is not served: a Warning event's reason and note.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    pub index: usize,
    pub reason: &'static str,
    /// Starts with the entry's path (`spec.networking.resolveDNS[i]...`) and says the fix.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// The zone an entry answers: its name, or its namespace's Service names.
fn zone(source: &DnsSource, domain: &str) -> String {
    match source {
        DnsSource::Name(name) => name.clone(),
        DnsSource::Namespace(ns) => format!("{ns}.svc.{domain}"),
    }
}

/// Whether `name` is `zone` or a name under it.
fn covers(zone: &str, name: &str) -> bool {
    name == zone
        || name
            .strip_suffix(zone)
            .is_some_and(|prefix| prefix.ends_with('.'))
}

/// How entry `index` is answered, or why it is not.
fn answer(
    index: usize,
    mapping: &DnsMapping,
    facts: &Facts,
) -> Result<Answer, (&'static str, String)> {
    let path = format!("spec.networking.resolveDNS[{index}]");
    let host_dns = || {
        facts.host_dns.as_ref().ok_or_else(|| {
            (
                "HostDNSUnknown",
                format!("{path}.target: needs the host's DNS server, which the operator did not name; start it with --host-dns <address>"),
            )
        })
    };
    Ok(match &mapping.target {
        DnsTarget::Ip(ip) => Answer::Address(*ip),
        DnsTarget::HostService(ns, name) => {
            let found = facts.host_services.get(&(ns.clone(), name.clone()));
            let field = format!("{path}.target.hostService");
            match found {
                Some(HostService::ClusterIp(ip)) => Answer::Address(*ip),
                Some(HostService::Missing) => {
                    return Err((
                        "HostServiceNotFound",
                        format!(
                            "{field}: host Service {ns}/{name} does not exist; the entry is served once it does (create it, or name an existing Service)"
                        ),
                    ));
                }
                Some(HostService::NoClusterIp) => {
                    return Err((
                        "HostServiceWithoutClusterIP",
                        format!(
                            "{field}: host Service {ns}/{name} has no ClusterIP (headless or ExternalName); map a Service with one, or its namespace with namespace and target.hostNamespace"
                        ),
                    ));
                }
                Some(HostService::Unreadable(why)) => {
                    return Err((
                        UNREADABLE,
                        format!(
                            "{field}: host Service {ns}/{name} could not be read ({why}); retried"
                        ),
                    ));
                }
                None => {
                    return Err((
                        UNREADABLE,
                        format!("{field}: host Service {ns}/{name} not read yet; retried"),
                    ));
                }
            }
        }
        DnsTarget::HostDns => Answer::Forward {
            to: None,
            server: host_dns()?.server,
        },
        DnsTarget::Hostname(to) => Answer::Forward {
            to: Some(to.clone()),
            server: host_dns()?.server,
        },
        DnsTarget::HostNamespace(ns) => {
            let host_dns = host_dns()?;
            Answer::Forward {
                to: Some(format!("{ns}.svc.{}", host_dns.cluster_domain)),
                server: host_dns.server,
            }
        }
    })
}

/// The blocks to serve, in entry order, and a problem for each entry left out: one the
/// operator would refuse, one answering the same zone as an earlier entry, one covering a
/// virtual Service's name (the tenant's own Services always win), and one whose target
/// cannot be had.
pub fn plan(entries: &[ResolveDns], domain: &str, facts: &Facts) -> (Vec<Block>, Vec<Problem>) {
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    let mut zones: BTreeMap<String, usize> = BTreeMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let path = format!("spec.networking.resolveDNS[{index}]");
        let mut problem = |reason, message| {
            problems.push(Problem {
                index,
                reason,
                message,
            })
        };
        let mapping = match entry.mapping(domain) {
            Ok(m) => m,
            Err(e) => {
                problem("InvalidEntry", format!("{path}.{e}"));
                continue;
            }
        };
        let zone = zone(&mapping.source, domain);
        if let Some(first) = zones.get(&zone) {
            problem(
                "DuplicateEntry",
                format!(
                    "{path}: answers {zone} like resolveDNS[{first}], which is served; remove one of them"
                ),
            );
            continue;
        }
        zones.insert(zone.clone(), index);
        let in_use = facts
            .virtual_services
            .iter()
            .find(|(ns, name)| covers(&zone, &format!("{name}.{ns}.svc.{domain}")));
        if let Some((ns, name)) = in_use {
            problem(
                "DNSNameInUse",
                format!(
                    "{path}: {zone} covers the name of virtual Service {ns}/{name}, which the virtual cluster answers itself; rename or delete the Service, or change the entry"
                ),
            );
            continue;
        }
        match answer(index, &mapping, facts) {
            Ok(answer) => blocks.push(Block {
                index,
                zone,
                answer,
            }),
            Err((reason, message)) => problem(reason, message),
        }
    }
    (blocks, problems)
}

/// The host Services the entries map to.
pub fn host_services(entries: &[ResolveDns], domain: &str) -> Vec<HostServiceRef> {
    let mut refs: Vec<HostServiceRef> = entries
        .iter()
        .filter_map(|e| match e.mapping(domain).ok()?.target {
            DnsTarget::HostService(ns, name) => Some((ns, name)),
            _ => None,
        })
        .collect();
    refs.sort();
    refs.dedup();
    refs
}

/// Reads what [`plan`] decides from. Fails only when the virtual Services cannot be listed
/// (no entry could be checked); a host Service that cannot be read is that entry's problem.
pub async fn read(ctx: &Ctx, entries: &[ResolveDns], domain: &str) -> anyhow::Result<Facts> {
    let mut facts = Facts {
        host_dns: ctx.config.host_dns.clone(),
        ..Facts::default()
    };
    if entries.is_empty() {
        return Ok(facts);
    }
    let services = Api::<Service>::all(ctx.virt.clone())
        .list_metadata(&ListParams::default())
        .await
        .map_err(|e| anyhow::anyhow!("failed to list virtual Services: {e}"))?;
    facts.virtual_services = services
        .items
        .into_iter()
        .filter_map(|s| Some((s.metadata.namespace?, s.metadata.name?)))
        .collect();
    for (ns, name) in host_services(entries, domain) {
        let api = Api::<Service>::namespaced(ctx.host.clone(), &ns);
        let found = match api.get_opt(&name).await {
            Ok(None) => HostService::Missing,
            Ok(Some(svc)) => match svc.spec.and_then(|s| s.cluster_ip) {
                Some(ip) => ip
                    .parse()
                    .map(HostService::ClusterIp)
                    .unwrap_or(HostService::NoClusterIp),
                None => HostService::NoClusterIp,
            },
            Err(e) => HostService::Unreadable(e.to_string()),
        };
        facts.host_services.insert((ns, name), found);
    }
    Ok(facts)
}

/// "Something changed" for the entries: any virtual Service (a name may come into or go out
/// of use), and each mapped host Service (its ClusterIP, or whether it exists). Empty
/// without entries.
pub fn changes(
    ctx: &Ctx,
    entries: &[ResolveDns],
    domain: &str,
) -> Vec<stream::BoxStream<'static, ()>> {
    if entries.is_empty() {
        return vec![];
    }
    let virtual_services = change::changes(
        Api::<PartialObjectMeta<Service>>::all(ctx.virt.clone()),
        watcher::Config::default(),
        "resolveDNS",
    );
    let host = host_services(entries, domain)
        .into_iter()
        .map(|(ns, name)| {
            // By name: the syncer may read only the Services entries name.
            let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
            change::changes(
                Api::<Service>::namespaced(ctx.host.clone(), &ns),
                config,
                "resolveDNS",
            )
        });
    std::iter::once(virtual_services).chain(host).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: &str = "tenant.test";

    fn entries(yaml: &str) -> Vec<ResolveDns> {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn facts() -> Facts {
        Facts {
            virtual_services: vec![
                ("default".into(), "kubernetes".into()),
                ("default".into(), "web".into()),
            ],
            host_services: BTreeMap::from([
                (
                    ("data".into(), "postgres".into()),
                    HostService::ClusterIp("10.96.4.5".parse().unwrap()),
                ),
                (("data".into(), "gone".into()), HostService::Missing),
                (("data".into(), "headless".into()), HostService::NoClusterIp),
            ]),
            host_dns: Some(HostDns {
                server: "10.96.0.10".parse().unwrap(),
                cluster_domain: "cluster.local".into(),
            }),
        }
    }

    fn plan_of(yaml: &str, facts: &Facts) -> (Vec<Block>, Vec<Problem>) {
        plan(&entries(yaml), DOMAIN, facts)
    }

    fn forward(to: Option<&str>) -> Answer {
        Answer::Forward {
            to: to.map(str::to_string),
            server: "10.96.0.10".parse().unwrap(),
        }
    }

    /// Each kind of target becomes its answer: an address for an IP or a host Service's
    /// ClusterIP, a forward to the host's DNS server (renamed for a hostname or a host
    /// namespace) for the rest; a Service entry's zone is its name in the cluster domain.
    #[test]
    fn each_target_kind_becomes_its_answer() {
        let (blocks, problems) = plan_of(
            "[{hostname: '*.amazonaws.com', target: host, service: ''},
              {hostname: legacy.example.com, target: {ip: 10.1.2.3}},
              {hostname: app.example.com, target: {hostname: api.corp.internal}},
              {service: default/db, target: {hostService: data/postgres}},
              {namespace: shared, target: {hostNamespace: platform}}]",
            &facts(),
        );
        assert_eq!(problems, vec![]);
        let got: Vec<(usize, &str, &Answer)> = blocks
            .iter()
            .map(|b| (b.index, b.zone.as_str(), &b.answer))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "amazonaws.com", &forward(None)),
                (
                    1,
                    "legacy.example.com",
                    &Answer::Address("10.1.2.3".parse().unwrap())
                ),
                (2, "app.example.com", &forward(Some("api.corp.internal"))),
                (
                    3,
                    "db.default.svc.tenant.test",
                    &Answer::Address("10.96.4.5".parse().unwrap())
                ),
                (
                    4,
                    "shared.svc.tenant.test",
                    &forward(Some("platform.svc.cluster.local"))
                ),
            ]
        );
    }

    /// An entry covering a virtual Service's name is left out with a problem naming the entry
    /// and the Service; the entries around it are still served.
    #[test]
    fn an_entry_over_a_virtual_service_is_left_out_and_the_others_served() {
        let (blocks, problems) = plan_of(
            "[{hostname: a.example.com, target: {ip: 10.0.0.1}},
              {service: default/web, target: {hostService: data/postgres}},
              {namespace: default, target: {hostNamespace: platform}},
              {hostname: svc.tenant.test, target: host},
              {hostname: b.example.com, target: {ip: 10.0.0.2}}]",
            &facts(),
        );
        let served: Vec<usize> = blocks.iter().map(|b| b.index).collect();
        assert_eq!(served, [0, 4]);
        let indexes: Vec<(usize, &str)> = problems.iter().map(|p| (p.index, p.reason)).collect();
        assert_eq!(
            indexes,
            [
                (1, "DNSNameInUse"),
                (2, "DNSNameInUse"),
                (3, "DNSNameInUse")
            ]
        );
        assert!(
            problems[0]
                .message
                .starts_with("spec.networking.resolveDNS[1]: web.default.svc.tenant.test covers"),
            "{}",
            problems[0].message
        );
        assert!(
            problems[0].message.contains("virtual Service default/web"),
            "{}",
            problems[0].message
        );
        assert!(
            problems[1].message.contains("default/"),
            "{}",
            problems[1].message
        );
    }

    /// A name that only shares a suffix string with a Service's name is not "under" it.
    #[test]
    fn a_zone_covers_names_under_it_by_label_only() {
        assert!(covers("a.com", "a.com"));
        assert!(covers("a.com", "x.a.com"));
        assert!(!covers("a.com", "ba.com"));
        assert!(!covers("x.a.com", "a.com"));
        let (blocks, problems) = plan_of(
            "[{hostname: eb.default.svc.tenant.test, target: {ip: 10.0.0.1}}]",
            &facts(),
        );
        assert_eq!(
            problems,
            vec![],
            "web.default... is not under eb.default..."
        );
        assert_eq!(blocks.len(), 1);
    }

    /// A host Service that does not exist, has no ClusterIP or cannot be read leaves its
    /// entry out with a problem on `target.hostService`; it is served once the ClusterIP is
    /// known.
    #[test]
    fn a_host_service_without_an_address_leaves_its_entry_out() {
        let yaml = "[{service: default/a, target: {hostService: data/gone}},
                     {service: default/b, target: {hostService: data/headless}},
                     {service: default/c, target: {hostService: data/unread}},
                     {service: default/d, target: {hostService: data/postgres}}]";
        let (blocks, problems) = plan_of(yaml, &facts());
        assert_eq!(blocks.iter().map(|b| b.index).collect::<Vec<_>>(), [3]);
        let reasons: Vec<&str> = problems.iter().map(|p| p.reason).collect();
        assert_eq!(
            reasons,
            [
                "HostServiceNotFound",
                "HostServiceWithoutClusterIP",
                "HostServiceUnreadable"
            ]
        );
        for (i, p) in problems.iter().enumerate() {
            let field = format!("spec.networking.resolveDNS[{i}].target.hostService: ");
            assert!(p.message.starts_with(&field), "{}", p.message);
        }
        assert!(problems[0].message.contains("data/gone does not exist"));
        let mut found = facts();
        found.host_services.insert(
            ("data".into(), "gone".into()),
            HostService::ClusterIp("10.96.9.9".parse().unwrap()),
        );
        let (blocks, _) = plan_of(yaml, &found);
        assert_eq!(
            blocks[0].answer,
            Answer::Address("10.96.9.9".parse().unwrap())
        );
    }

    /// Two entries answering the same zone: the first is served, the second reported (one
    /// Corefile with a zone twice would not load at all).
    #[test]
    fn a_second_entry_for_the_same_zone_is_reported() {
        let (blocks, problems) = plan_of(
            "[{hostname: '*.example.com', target: host},
              {hostname: example.com, target: {ip: 10.0.0.1}},
              {namespace: shared, target: {hostNamespace: a}},
              {hostname: shared.svc.tenant.test, target: {ip: 10.0.0.2}}]",
            &facts(),
        );
        assert_eq!(blocks.iter().map(|b| b.index).collect::<Vec<_>>(), [0, 2]);
        assert_eq!(problems.len(), 2);
        assert_eq!(
            (problems[0].index, problems[0].reason),
            (1, "DuplicateEntry")
        );
        assert!(
            problems[0].message.contains("like resolveDNS[0]"),
            "{}",
            problems[0].message
        );
        assert_eq!(problems[1].index, 3);
    }

    /// Without a host DNS server only the targets that need none are served, and the others
    /// say how to name one.
    #[test]
    fn without_a_host_dns_server_forwarding_entries_are_reported() {
        let mut facts = facts();
        facts.host_dns = None;
        let (blocks, problems) = plan_of(
            "[{hostname: a.example.com, target: host},
              {hostname: b.example.com, target: {ip: 10.0.0.1}},
              {namespace: shared, target: {hostNamespace: platform}}]",
            &facts,
        );
        assert_eq!(blocks.iter().map(|b| b.index).collect::<Vec<_>>(), [1]);
        assert_eq!(problems.len(), 2);
        assert!(
            problems
                .iter()
                .all(|p| p.reason == "HostDNSUnknown" && p.message.contains("--host-dns")),
            "{problems:?}"
        );
    }

    /// An entry the operator would refuse is reported with its field, and the rest served.
    #[test]
    fn an_unreadable_entry_is_reported_with_its_field() {
        let (blocks, problems) = plan_of(
            "[{hostname: a.example.com, target: {ip: nope}}, {hostname: b.example.com, target: host}]",
            &facts(),
        );
        assert_eq!(blocks.len(), 1);
        assert_eq!(problems[0].reason, "InvalidEntry");
        assert!(
            problems[0]
                .message
                .starts_with("spec.networking.resolveDNS[0].target.ip: "),
            "{}",
            problems[0].message
        );
    }

    /// The host Services read are exactly those hostService targets name, once each.
    #[test]
    fn host_services_are_the_mapped_ones_once_each() {
        let refs = host_services(
            &entries(
                "[{service: default/a, target: {hostService: data/pg}},
                  {service: default/b, target: {hostService: data/pg}},
                  {hostname: c.example.com, target: host},
                  {service: x/y, target: {hostService: other/cache}}]",
            ),
            DOMAIN,
        );
        assert_eq!(
            refs,
            [
                ("data".to_string(), "pg".to_string()),
                ("other".to_string(), "cache".to_string())
            ]
        );
    }
}
