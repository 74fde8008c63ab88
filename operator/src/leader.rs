//! Leader election through a `coordination.k8s.io/v1` Lease, so two operator replicas never
//! reconcile at once. The holder renews every third of the lease; a replica that cannot renew
//! before the lease runs out stops (its Deployment restarts it as a standby).
//!
//! A standby judges the lease expired by its own monotonic clock, as client-go does: by how long
//! the lease's resourceVersion has stayed unchanged since this replica first saw it, never by
//! comparing the holder's `renewTime` with the local wall clock. Replicas with skewed clocks
//! therefore cannot both believe they lead.

use std::{sync::Mutex, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use tokio::time::Instant;
use tracing::{info, warn};

pub struct LeaderElection {
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_duration: Duration,
    observed: Mutex<Option<Observation>>,
}

/// One version of the lease and the local instant this replica first saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    version: String,
    since: Instant,
}

/// How long the lease has stayed at `version` as seen from here; a new version restarts the count.
pub fn unchanged_for(observed: &mut Option<Observation>, version: &str, now: Instant) -> Duration {
    match observed {
        Some(seen) if seen.version == version => now.saturating_duration_since(seen.since),
        _ => {
            *observed = Some(Observation {
                version: version.to_string(),
                since: now,
            });
            Duration::ZERO
        }
    }
}

/// Whether `lease` lets `identity` take or keep it, given how long it has stayed unchanged here.
/// The holder's `renewTime` is not read: its clock may differ from ours.
pub fn may_hold(lease: &LeaseSpec, identity: &str, unchanged: Duration) -> bool {
    let holder = lease.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return true;
    }
    let duration = u64::try_from(lease.lease_duration_seconds.unwrap_or(15)).unwrap_or(0);
    unchanged > Duration::from_secs(duration)
}

impl LeaderElection {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        lease_duration: Duration,
    ) -> Self {
        LeaderElection {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration,
            observed: Mutex::new(None),
        }
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
        let same_holder =
            previous.and_then(|p| p.holder_identity.as_deref()) == Some(self.identity.as_str());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.lease_duration.as_secs() as i32),
            acquire_time: if same_holder {
                previous.and_then(|p| p.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if same_holder {
                transitions
            } else {
                transitions + 1
            }),
            ..Default::default()
        }
    }

    /// One attempt to take or renew the lease; `Ok(true)` when this replica holds it.
    async fn try_hold(&self) -> Result<bool, kube::Error> {
        match self.api.get_opt(&self.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(self.spec(None)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(err) => Err(err),
                }
            }
            Some(mut lease) => {
                let current = lease.spec.clone().unwrap_or_default();
                let version = lease.metadata.resource_version.clone().unwrap_or_default();
                let unchanged = {
                    let mut observed = self.observed.lock().expect("lease observation lock");
                    unchanged_for(&mut observed, &version, Instant::now())
                };
                if !may_hold(&current, &self.identity, unchanged) {
                    return Ok(false);
                }
                lease.spec = Some(self.spec(Some(&current)));
                // `replace` carries the resourceVersion read above, so a racing replica loses with 409.
                match self
                    .api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(err) => Err(err),
                }
            }
        }
    }

    fn retry_period(&self) -> Duration {
        self.lease_duration / 3
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_hold().await {
                Ok(true) => {
                    info!(lease = %self.name, identity = %self.identity, "became leader");
                    return;
                }
                Ok(false) => {}
                Err(err) => warn!(error = %err, "leader election attempt failed"),
            }
            tokio::time::sleep(self.retry_period()).await;
        }
    }

    /// Renews the lease until that fails for a whole lease duration; returns when leadership is lost.
    pub async fn hold(&self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.retry_period()).await;
            match self.try_hold().await {
                Ok(true) => last_renewal = Instant::now(),
                Ok(false) => {
                    warn!(lease = %self.name, "another replica took the lease");
                    return;
                }
                Err(err) => warn!(error = %err, "renewing the lease failed"),
            }
            if last_renewal.elapsed() >= self.lease_duration {
                warn!(lease = %self.name, "could not renew the lease in time");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: Timestamp) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..Default::default()
        }
    }

    #[test]
    fn an_empty_lease_or_ones_own_can_be_taken_at_once() {
        assert!(may_hold(&LeaseSpec::default(), "a", Duration::ZERO));
        assert!(may_hold(&lease("a", Timestamp::now()), "a", Duration::ZERO));
    }

    #[test]
    fn another_holders_lease_is_respected_until_unchanged_for_its_duration() {
        let held = lease("b", Timestamp::now());
        assert!(!may_hold(&held, "a", Duration::from_secs(15)));
        assert!(may_hold(&held, "a", Duration::from_secs(16)));
    }

    #[test]
    fn a_renew_time_far_in_the_past_does_not_expire_a_lease_that_keeps_changing() {
        // The holder's clock runs an hour behind ours: its renewTime looks stale, but it renews.
        let skewed = lease("b", Timestamp::now() - Duration::from_secs(3600));
        let start = Instant::now();
        let mut observed = None;
        for renewal in 0..10u64 {
            let now = start + Duration::from_secs(5 * renewal);
            let unchanged = unchanged_for(&mut observed, &renewal.to_string(), now);
            assert!(!may_hold(&skewed, "a", unchanged), "renewal {renewal}");
        }
    }

    #[test]
    fn a_renew_time_in_the_future_does_not_keep_a_dead_holder() {
        // The holder's clock ran an hour ahead; it died and the lease stopped changing.
        let ahead = lease("b", Timestamp::now() + Duration::from_secs(3600));
        let start = Instant::now();
        let mut observed = None;
        assert_eq!(unchanged_for(&mut observed, "7", start), Duration::ZERO);
        let later = start + Duration::from_secs(16);
        let unchanged = unchanged_for(&mut observed, "7", later);
        assert_eq!(unchanged, Duration::from_secs(16));
        assert!(may_hold(&ahead, "a", unchanged));
    }

    #[test]
    fn a_new_version_restarts_the_count() {
        let start = Instant::now();
        let mut observed = None;
        unchanged_for(&mut observed, "1", start);
        let later = start + Duration::from_secs(30);
        assert_eq!(unchanged_for(&mut observed, "2", later), Duration::ZERO);
        assert_eq!(
            unchanged_for(&mut observed, "2", later + Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }
}
