//! `kubectl vnest list`: one line per VirtualCluster.

use chrono::{DateTime, Utc};
use vnest_crds::VirtualCluster;

/// "45s", "12m", "5h", "3d" — kubectl's age style.
pub fn age(since: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - since).num_seconds().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn to_chrono(time: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> DateTime<Utc> {
    DateTime::from_timestamp(time.0.as_second(), 0).unwrap_or_default()
}

/// The table `list` prints, header first.
pub fn table(vcs: &[VirtualCluster], now: DateTime<Utc>) -> String {
    let mut rows = vec![[
        "NAMESPACE".to_string(),
        "NAME".into(),
        "PHASE".into(),
        "SLEEPING".into(),
        "AGE".into(),
        "ENDPOINT".into(),
    ]];
    for vc in vcs {
        let status = vc.status.as_ref();
        let phase = status
            .and_then(|s| serde_json::to_value(s.phase).ok())
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_else(|| "Pending".into());
        let sleeping = status
            .and_then(|s| s.sleeping_since.as_ref())
            .map_or("-".into(), |t| format!("for {}", age(to_chrono(t), now)));
        let created = vc.metadata.creation_timestamp.as_ref();
        rows.push([
            vc.metadata.namespace.clone().unwrap_or_default(),
            vc.metadata.name.clone().unwrap_or_default(),
            phase,
            sleeping,
            created.map_or("-".into(), |t| age(to_chrono(t), now)),
            status
                .and_then(|s| s.endpoint.clone())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect();
            cells.join("   ").trim_end().to_string() + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn ages_read_like_kubectl() {
        let now = at("2026-12-03T12:00:00Z");
        assert_eq!(age(at("2026-12-03T11:59:15Z"), now), "45s");
        assert_eq!(age(at("2026-12-03T11:48:00Z"), now), "12m");
        assert_eq!(age(at("2026-12-03T07:00:00Z"), now), "5h");
        assert_eq!(age(at("2026-11-30T12:00:00Z"), now), "3d");
        assert_eq!(
            age(at("2026-12-03T12:00:05Z"), now),
            "0s",
            "clock skew is not negative"
        );
    }

    #[test]
    fn table_shows_phase_sleep_age_and_endpoint() {
        let vc: VirtualCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "dev", "namespace": "team-a", "creationTimestamp": "2026-12-03T11:00:00Z" },
            "spec": {},
            "status": { "phase": "Running", "endpoint": "https://dev.team-a.svc:443",
                        "sleepingSince": "2026-12-03T11:50:00Z" },
        }))
        .unwrap();
        let fresh: VirtualCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "new", "namespace": "team-b" }, "spec": {},
        }))
        .unwrap();
        let table = table(&[vc, fresh], at("2026-12-03T12:00:00Z"));
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   NAME   PHASE"), "{table}");
        assert!(
            lines[1].contains("Running") && lines[1].contains("for 10m"),
            "{table}"
        );
        assert!(lines[1].contains("60m") && lines[1].ends_with("https://dev.team-a.svc:443"));
        assert!(lines[2].contains("Pending"), "{table}");
    }
}
