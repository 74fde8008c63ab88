//! How tenant activity reaches the operator.
//!
//! Contract: a `coordination.k8s.io/v1` Lease named [`lease_name`] (`<vc>-activity`) in the
//! VirtualCluster's namespace. The operator creates it, owned by the VirtualCluster, and never
//! writes its `spec`. The syncer's proxy sets `spec.renewTime` to the time of a tenant
//! request, at most once per [`RENEW_INTERVAL`] (see [`wait_before_renewal`], [`renewal`]), with
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

/// How long a renewal for a request at `now` must wait, `last` being the `renewTime` last
/// written: zero once [`RENEW_INTERVAL`] has passed (a clock behind `last` waits it whole).
pub fn wait_before_renewal(last: Option<Timestamp>, now: Timestamp) -> Duration {
    let Some(last) = last else {
        return Duration::ZERO;
    };
    let elapsed: Duration = now.duration_since(last).try_into().unwrap_or_default();
    RENEW_INTERVAL.saturating_sub(elapsed)
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
    fn the_first_renewal_goes_out_at_once() {
        assert_eq!(wait_before_renewal(None, at(100)), Duration::ZERO);
    }

    #[test]
    fn renewals_are_at_most_every_thirty_seconds() {
        assert_eq!(
            wait_before_renewal(Some(at(100)), at(110)),
            Duration::from_secs(20)
        );
        assert_eq!(wait_before_renewal(Some(at(100)), at(130)), Duration::ZERO);
        assert_eq!(wait_before_renewal(Some(at(100)), at(500)), Duration::ZERO);
        // A clock behind the recorded time waits the whole interval.
        assert_eq!(wait_before_renewal(Some(at(100)), at(90)), RENEW_INTERVAL);
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
