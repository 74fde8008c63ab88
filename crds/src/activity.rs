//! How tenant activity reaches the operator.
//!
//! Contract: a `coordination.k8s.io/v1` Lease named [`lease_name`] (`<vc>-activity`) in the
//! VirtualCluster's namespace. The operator creates it, owned by the VirtualCluster, and never
//! writes its `spec`. The syncer's proxy sets `spec.renewTime` to the time of a tenant
//! request, at most once per [`RENEW_INTERVAL`] (see [`needs_renewal`], [`renewal`]), with
//! its Role allowing `get`/`patch`/`update` on that one Lease. The operator watches the Lease
//! (so a renewal costs one watch event, no polling) and copies `renewTime` into
//! `status.lastActivityTime`.
//!
//! A `renewTime` later than the moment the operator put the cluster to sleep is a wake request
//! when `sleepMode.autoWakeup` is on: the syncer is down while asleep, so only a wake endpoint,
//! or a person (`kubectl patch lease <vc>-activity`), renews it then.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::Lease, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use serde_json::{Value, json};

/// The syncer records activity at most this often, bounding API writes per busy cluster.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(30);

/// Field manager of the syncer's renewals.
pub const SYNCER_FIELD_MANAGER: &str = "vnest-syncer/activity";

/// Name of the activity Lease of virtual cluster `vc`.
pub fn lease_name(vc: &str) -> String {
    format!("{vc}-activity")
}

/// The last tenant activity the Lease records.
pub fn last_activity(lease: &Lease) -> Option<Timestamp> {
    lease.spec.as_ref()?.renew_time.as_ref().map(|t| t.0)
}

/// Whether a request at `now` must be written, given the `renewTime` last written.
pub fn needs_renewal(last: Option<Timestamp>, now: Timestamp) -> bool {
    last.is_none_or(|last| {
        now.duration_since(last)
            .try_into()
            .is_ok_and(|elapsed: Duration| elapsed >= RENEW_INTERVAL)
    })
}

/// The merge patch that records activity at `at`.
pub fn renewal(at: Timestamp) -> Value {
    json!({ "spec": { "renewTime": MicroTime(at) } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn renewals_are_at_most_every_thirty_seconds() {
        assert!(needs_renewal(None, at(100)));
        assert!(!needs_renewal(Some(at(100)), at(129)));
        assert!(needs_renewal(Some(at(100)), at(130)));
        // A clock behind the recorded time does not write.
        assert!(!needs_renewal(Some(at(100)), at(90)));
    }

    /// What the syncer writes is what the operator reads.
    #[test]
    fn a_renewal_reads_back_as_the_last_activity() {
        let mut lease: Lease =
            serde_json::from_value(json!({ "metadata": { "name": "vc-activity" } })).unwrap();
        assert_eq!(last_activity(&lease), None);
        let patch = renewal(at(1_800_000_000));
        lease.spec = serde_json::from_value(patch["spec"].clone()).unwrap();
        assert_eq!(last_activity(&lease), Some(at(1_800_000_000)));
        assert_eq!(lease_name("team-alpha"), "team-alpha-activity");
    }
}
