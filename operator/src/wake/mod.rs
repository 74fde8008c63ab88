//! Auto-wakeup: while a VirtualCluster with `sleepMode.autoWakeup` has no ready control
//! plane (asleep, or waking), its `<name>` Service loses its selector and an EndpointSlice
//! points it at this operator's wake listener ([`listener`]). A tenant connecting there is
//! told by TLS SNI which cluster it wants (`<name>.<namespace>.svc`, the kubeconfig's server
//! name), is served that cluster's own certificate (so its kubeconfig trusts the answer), has
//! its request recorded as activity on the `<name>-activity` Lease (which the lifecycle
//! decision takes as a wake request) and gets `503 ServiceUnavailable` with `Retry-After`,
//! which client-go retries. Once the control plane is Ready the Service selects the pod again.
//!
//! This module is the pure part: when to route to the listener, which cluster a server name
//! names, when a connection must write the Lease, and the answer.

pub mod listener;

use chrono::{DateTime, Utc};
use serde_json::json;

/// Seconds a client is told to wait before retrying.
pub const RETRY_AFTER_SECONDS: u32 = 5;

/// Whether the `<name>` Service should route to the wake listener: auto-wakeup is on and the
/// cluster is asleep or has no ready control-plane replica yet (waking, or starting).
pub fn routes_to_wake(auto_wakeup: bool, asleep: bool, ready_replicas: i32) -> bool {
    auto_wakeup && (asleep || ready_replicas < 1)
}

/// The `(namespace, name)` a TLS server name addresses: `<name>.<namespace>`,
/// `<name>.<namespace>.svc` or `<name>.<namespace>.svc.<cluster_domain>` (the Service's DNS
/// names, which the serving certificate covers), in a namespace this operator watches
/// (`watched` empty: all).
pub fn target(
    server_name: &str,
    cluster_domain: &str,
    watched: &[String],
) -> Option<(String, String)> {
    let host = server_name.trim_end_matches('.').to_ascii_lowercase();
    let suffix = format!(".svc.{cluster_domain}");
    let rest = host
        .strip_suffix(&suffix)
        .or_else(|| host.strip_suffix(".svc"))
        .unwrap_or(&host);
    let (name, namespace) = rest.split_once('.')?;
    let label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !label(name) || !label(namespace) {
        return None;
    }
    if !watched.is_empty() && !watched.iter().any(|w| w == namespace) {
        return None;
    }
    Some((namespace.to_string(), name.to_string()))
}

/// Whether a connection at `now` must renew the activity Lease, given its last `renewTime`
/// and, while asleep, when the sleep was enacted: always when the Lease says nothing newer
/// than the sleep (that renewal is the wake request; compared to the second, as the decision
/// does), otherwise at most every `RENEW_INTERVAL` like the syncer.
pub fn should_renew(
    last: Option<DateTime<Utc>>,
    asleep_since: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    let before_sleep = asleep_since
        .is_some_and(|enacted| last.is_none_or(|l| l.timestamp() <= enacted.timestamp()));
    let interval = chrono::Duration::from_std(vnest_crds::activity::RENEW_INTERVAL)
        .unwrap_or(chrono::Duration::MAX);
    before_sleep || last.is_none_or(|l| now - l >= interval)
}

/// What the wake listener tells a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The wake was requested (or is under way): retry after [`RETRY_AFTER_SECONDS`].
    Waking,
    /// `spec.paused`: nothing wakes it but setting `paused: false`; no retry.
    Paused,
}

/// The HTTP/1.1 response for `answer`: 503 with a Kubernetes `Status` body, so kubectl shows
/// the message, and `Retry-After` when waiting helps.
pub fn response(answer: Answer, namespace: &str, name: &str) -> Vec<u8> {
    let (message, retry) = match answer {
        Answer::Waking => (
            format!("virtual cluster {namespace}/{name} is waking up; retry in a few seconds"),
            Some(RETRY_AFTER_SECONDS),
        ),
        Answer::Paused => (
            format!(
                "virtual cluster {namespace}/{name} is paused; set spec.paused to false to resume it"
            ),
            None,
        ),
    };
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "ServiceUnavailable", "code": 503,
    });
    if let Some(seconds) = retry {
        status["details"] = json!({ "retryAfterSeconds": seconds });
    }
    let body = status.to_string();
    let retry_header = retry.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"));
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n{retry_header}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn routes_to_wake_while_asleep_or_not_ready_with_auto_wakeup_only() {
        assert!(routes_to_wake(true, true, 0));
        assert!(
            routes_to_wake(true, true, 1),
            "asleep, pod still terminating"
        );
        assert!(routes_to_wake(true, false, 0), "waking: until Ready");
        assert!(!routes_to_wake(true, false, 1));
        assert!(!routes_to_wake(false, true, 0));
    }

    #[test]
    fn a_server_name_names_a_cluster_by_its_service_dns_names() {
        let vc = Some(("team-a".to_string(), "dev".to_string()));
        assert_eq!(target("dev.team-a.svc", "cluster.local", &[]), vc);
        assert_eq!(target("dev.team-a", "cluster.local", &[]), vc);
        assert_eq!(
            target("DEV.team-a.svc.cluster.local.", "cluster.local", &[]),
            vc
        );
        assert_eq!(
            target("dev.team-a.svc.corp.internal", "corp.internal", &[]),
            vc
        );
        let watched = ["team-a".to_string()];
        assert_eq!(target("dev.team-a.svc", "cluster.local", &watched), vc);
        assert_eq!(target("dev.team-b.svc", "cluster.local", &watched), None);
        assert_eq!(target("localhost", "cluster.local", &[]), None);
        assert_eq!(target("a.b.c.svc", "cluster.local", &[]), None);
        assert_eq!(target("dev.team_a.svc", "cluster.local", &[]), None);
    }

    #[test]
    fn the_first_connection_after_the_sleep_renews_later_ones_every_thirty_seconds() {
        let slept = Some(t("2026-12-01T20:00:00Z"));
        let now = t("2026-12-01T20:00:10Z");
        // Activity from before the sleep: this connection is the wake request.
        assert!(should_renew(Some(t("2026-12-01T19:59:55Z")), slept, now));
        assert!(should_renew(None, slept, now));
        // Within the sleep's own second the decision would not see it as newer.
        assert!(should_renew(Some(t("2026-12-01T20:00:00.5Z")), slept, now));
        // Already requested: no write per connection.
        assert!(!should_renew(Some(t("2026-12-01T20:00:05Z")), slept, now));
        // Waking (no longer asleep): like the syncer.
        assert!(!should_renew(Some(t("2026-12-01T20:00:05Z")), None, now));
        assert!(should_renew(Some(t("2026-12-01T19:59:40Z")), None, now));
    }

    #[test]
    fn the_answer_is_a_retryable_kubernetes_status() {
        let text = String::from_utf8(response(Answer::Waking, "ns", "vc")).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nRetry-After: 5\r\n"), "{head}");
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        let status: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(status["kind"], "Status");
        assert_eq!(status["reason"], "ServiceUnavailable");
        assert_eq!(status["code"], 503);
        assert_eq!(status["details"]["retryAfterSeconds"], 5);

        let paused = String::from_utf8(response(Answer::Paused, "ns", "vc")).unwrap();
        assert!(!paused.contains("Retry-After"));
        assert!(paused.contains("is paused"));
    }
}
