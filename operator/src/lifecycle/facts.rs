//! What the decision needs to know, read from a VirtualCluster and its activity Lease, and
//! the conversions between the API's timestamps and the decision's.
//!
//! Everything is truncated to whole seconds: status times are serialized at that precision,
//! so finer times would never compare equal to what was read back and every reconcile would
//! rewrite the status.

use chrono::{DateTime, Utc};
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use vnest_crds::VirtualCluster;

use super::{
    decide::{Facts, State},
    reason::SleepReason,
};
use crate::conditions::{self, SLEEPING};

pub fn to_utc(t: Timestamp) -> DateTime<Utc> {
    DateTime::from_timestamp(t.as_second(), 0).unwrap_or_default()
}

pub fn to_time(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or_default())
}

/// `now` to the second.
pub fn now() -> DateTime<Utc> {
    to_utc(Timestamp::now())
}

/// The facts about `vc`, given the activity its Lease records (if the Lease exists).
pub fn facts(vc: &VirtualCluster, lease_activity: Option<Timestamp>) -> Facts {
    let created = vc
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(now, |t| to_utc(t.0));
    let status = vc.status.as_ref();
    // A Lease deleted by someone is recreated empty; the status still remembers.
    let last_activity = lease_activity
        .or_else(|| {
            status
                .and_then(|s| s.last_activity_time.as_ref())
                .map(|t| t.0)
        })
        .map(to_utc);
    let sleeping = conditions::find(status, SLEEPING);
    let previous = match sleeping {
        Some(c) if c.status == "True" => {
            let since = status.and_then(|s| s.sleeping_since.as_ref());
            match (SleepReason::parse(&c.reason), since) {
                (Some(reason), Some(since)) => State::Asleep {
                    reason,
                    since: to_utc(since.0),
                    enacted: Some(to_utc(c.last_transition_time.0)),
                },
                // Not a status this operator wrote; start over as awake.
                _ => State::Awake { since: created },
            }
        }
        Some(c) => State::Awake {
            since: to_utc(c.last_transition_time.0),
        },
        None => State::Awake { since: created },
    };
    Facts {
        created,
        last_activity,
        previous,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vc(status: serde_json::Value) -> VirtualCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "vnest.dev/v1alpha1", "kind": "VirtualCluster",
            "metadata": { "name": "vc", "namespace": "ns", "creationTimestamp": "2026-12-01T06:00:00Z" },
            "spec": {}, "status": status,
        }))
        .unwrap()
    }

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    #[test]
    fn a_new_cluster_is_awake_since_its_creation() {
        let f = facts(&vc(serde_json::json!({})), None);
        assert_eq!(
            f.previous,
            State::Awake {
                since: t("2026-12-01T06:00:00Z")
            }
        );
        assert_eq!(f.last_activity, None);
    }

    /// The Sleeping condition's transition time is when the operator enacted the sleep.
    #[test]
    fn the_sleeping_condition_and_since_give_the_recorded_state() {
        let asleep = vc(serde_json::json!({
            "sleepingSince": "2026-12-01T19:00:00Z",
            "conditions": [{ "type": "Sleeping", "status": "True", "reason": "Schedule", "message": "", "lastTransitionTime": "2026-12-01T19:00:03Z" }],
        }));
        assert_eq!(
            facts(&asleep, None).previous,
            State::Asleep {
                reason: SleepReason::Schedule,
                since: t("2026-12-01T19:00:00Z"),
                enacted: Some(t("2026-12-01T19:00:03Z")),
            }
        );
        let awake = vc(serde_json::json!({
            "conditions": [{ "type": "Sleeping", "status": "False", "reason": "Awake", "message": "", "lastTransitionTime": "2026-12-02T07:00:01Z" }],
        }));
        assert_eq!(
            facts(&awake, None).previous,
            State::Awake {
                since: t("2026-12-02T07:00:01Z")
            }
        );
    }

    #[test]
    fn activity_comes_from_the_lease_then_the_status_to_the_second() {
        let v = vc(serde_json::json!({ "lastActivityTime": "2026-12-01T08:00:00Z" }));
        assert_eq!(
            facts(&v, None).last_activity,
            Some(t("2026-12-01T08:00:00Z"))
        );
        let lease: Timestamp = "2026-12-01T09:00:00.75Z".parse().unwrap();
        assert_eq!(
            facts(&v, Some(lease)).last_activity,
            Some(t("2026-12-01T09:00:00Z"))
        );
    }
}
