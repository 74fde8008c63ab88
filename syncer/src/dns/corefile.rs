//! The Corefile: pure text from the cluster domain and the `resolveDNS` entries that can be
//! served ([`Block`]s, chosen by [`super::resolve_dns::plan`]). Each entry is a server block
//! of its own zone: CoreDNS sends a query to the block of the longest zone that contains it,
//! so an entry's names never reach the virtual cluster's `kubernetes` plugin, and every
//! other name never reaches an entry.

use std::{fmt::Write, net::IpAddr};

use super::{DNS_PORT, HEALTH_PORT, METRICS_PORT, READY_PORT};

/// TTL of the answers an entry makes itself, and of the cache before forwarded ones.
const TTL: u32 = 30;

/// One served entry: its zone (the entry's name, or `<ns>.svc.<domain>`; the block answers
/// the zone and every name under it) and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// `spec.networking.resolveDNS[index]`, written above the block.
    pub index: usize,
    pub zone: String,
    pub answer: Answer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Every name in the zone has this address (and no record of another type).
    Address(IpAddr),
    /// Asked of `server` (port 53), after renaming the zone to `to` when set; answers carry
    /// the asked name.
    Forward { to: Option<String>, server: IpAddr },
}

/// `server:53`, with brackets around an IPv6 address.
fn endpoint(server: IpAddr) -> String {
    match server {
        IpAddr::V4(v4) => format!("{v4}:53"),
        IpAddr::V6(v6) => format!("[{v6}]:53"),
    }
}

fn render_block(out: &mut String, block: &Block) {
    let zone = &block.zone;
    let _ = writeln!(out, "# spec.networking.resolveDNS[{}]", block.index);
    let _ = writeln!(out, "{zone}:{DNS_PORT} {{\n    errors");
    match &block.answer {
        Answer::Address(ip) => {
            let kind = if ip.is_ipv4() { "A" } else { "AAAA" };
            // Templates are tried in order: the address for its type, then an empty answer
            // (NOERROR, no data) for any other type, so no lookup fails half-way.
            let _ = writeln!(
                out,
                "    template IN {kind} {zone} {{\n        answer \"{{{{ .Name }}}} {TTL} IN {kind} {ip}\"\n    }}\n    template ANY ANY {zone}"
            );
        }
        Answer::Forward { to, server } => {
            if let Some(to) = to {
                // The zone itself, then the names under it; `answer auto` puts the asked
                // name back into the answer.
                let _ = writeln!(
                    out,
                    "    rewrite name exact {zone}. {to}. answer auto\n    rewrite name suffix .{zone}. .{to}. answer auto"
                );
            }
            let _ = writeln!(out, "    forward . {}\n    cache {TTL}", endpoint(*server));
        }
    }
    out.push_str("}\n");
}

/// The whole Corefile: the virtual cluster's Services (and headless Services' pods) in
/// `domain` and reverse zones from the virtual API server, anything else through the resolver
/// of the node the pod runs on (its `dnsPolicy: Default`), and one block per served entry.
pub fn render(domain: &str, blocks: &[Block]) -> String {
    let mut out = format!(
        ".:{DNS_PORT} {{
    errors
    health :{HEALTH_PORT}
    ready :{READY_PORT}
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl {TTL}
    }}
    prometheus :{METRICS_PORT}
    forward . /etc/resolv.conf
    cache {TTL}
    loop
    reload
    loadbalance
}}
"
    );
    for block in blocks {
        render_block(&mut out, block);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(index: usize, zone: &str, answer: Answer) -> Block {
        Block {
            index,
            zone: zone.into(),
            answer,
        }
    }

    /// The block of a Corefile (domain `cluster.local`) with entry `index` alone.
    fn only_block(index: usize, zone: &str, answer: Answer) -> String {
        let corefile = render("cluster.local", &[block(index, zone, answer)]);
        block_text(&corefile, index)
    }

    /// The text of the block that follows `# spec.networking.resolveDNS[index]`.
    fn block_text(corefile: &str, index: usize) -> String {
        let marker = format!("# spec.networking.resolveDNS[{index}]\n");
        let start = corefile.find(&marker).expect("the entry's block") + marker.len();
        let rest = &corefile[start..];
        rest[..rest.find("\n}\n").unwrap() + 3].to_string()
    }

    /// Without entries the Corefile is the base server alone: the cluster domain from the
    /// virtual API server, everything else through the node's resolver.
    #[test]
    fn without_entries_only_the_base_server_is_rendered() {
        let corefile = render("tenant.example", &[]);
        assert!(corefile.starts_with(".:1053 {"), "{corefile}");
        assert!(
            corefile.contains("kubernetes tenant.example in-addr.arpa ip6.arpa"),
            "{corefile}"
        );
        assert!(
            corefile.contains("forward . /etc/resolv.conf"),
            "{corefile}"
        );
        assert_eq!(corefile.matches(":1053 {").count(), 1, "{corefile}");
    }

    /// A fixed IPv4 address answers A queries for every name in the zone, and any other type
    /// with an empty answer rather than a failure.
    #[test]
    fn an_address_answers_a_queries_and_nothing_else() {
        let ip = "10.1.2.3".parse().unwrap();
        let text = only_block(0, "legacy.example.com", Answer::Address(ip));
        assert!(text.starts_with("legacy.example.com:1053 {"), "{text}");
        assert!(
            text.contains("template IN A legacy.example.com {\n        answer \"{{ .Name }} 30 IN A 10.1.2.3\""),
            "{text}"
        );
        let a = text.find("template IN A ").unwrap();
        let any = text.find("template ANY ANY legacy.example.com").unwrap();
        assert!(a < any, "the address template comes first: {text}");
        assert!(!text.contains("forward"), "{text}");
    }

    /// An IPv6 address answers AAAA queries.
    #[test]
    fn an_ipv6_address_answers_aaaa_queries() {
        let ip = "fd00::5".parse().unwrap();
        let text = only_block(3, "v6.example.com", Answer::Address(ip));
        assert!(
            text.contains("template IN AAAA v6.example.com {\n        answer \"{{ .Name }} 30 IN AAAA fd00::5\""),
            "{text}"
        );
    }

    /// A zone forwarded as asked goes to the host's DNS server, cached, with no rewrite.
    #[test]
    fn a_host_zone_is_forwarded_to_the_host_dns_server() {
        let server = "10.96.0.10".parse().unwrap();
        let text = only_block(1, "amazonaws.com", Answer::Forward { to: None, server });
        assert!(text.starts_with("amazonaws.com:1053 {"), "{text}");
        assert!(text.contains("forward . 10.96.0.10:53"), "{text}");
        assert!(text.contains("cache 30"), "{text}");
        assert!(!text.contains("rewrite"), "{text}");
    }

    /// A renamed zone rewrites the name itself and every name under it, and puts the asked
    /// name back into the answer.
    #[test]
    fn a_renamed_zone_rewrites_the_name_and_the_names_under_it() {
        let server = "fd00::a".parse().unwrap();
        let text = only_block(
            2,
            "shared.svc.tenant.test",
            Answer::Forward {
                to: Some("platform.svc.cluster.local".into()),
                server,
            },
        );
        assert!(
            text.contains(
                "rewrite name exact shared.svc.tenant.test. platform.svc.cluster.local. answer auto"
            ),
            "{text}"
        );
        assert!(
            text.contains("rewrite name suffix .shared.svc.tenant.test. .platform.svc.cluster.local. answer auto"),
            "{text}"
        );
        assert!(text.contains("forward . [fd00::a]:53"), "{text}");
    }

    /// Entries render in the order given, each a server block of its own after the base one.
    #[test]
    fn every_block_follows_the_base_server_in_order() {
        let ip = "10.0.0.1".parse().unwrap();
        let corefile = render(
            "cluster.local",
            &[
                block(4, "b.example.com", Answer::Address(ip)),
                block(0, "a.example.com", Answer::Address(ip)),
            ],
        );
        let base = corefile.find(".:1053 {").unwrap();
        let b = corefile.find("# spec.networking.resolveDNS[4]").unwrap();
        let a = corefile.find("# spec.networking.resolveDNS[0]").unwrap();
        assert!(base < b && b < a, "{corefile}");
        assert_eq!(corefile.matches(":1053 {").count(), 3, "{corefile}");
    }
}
