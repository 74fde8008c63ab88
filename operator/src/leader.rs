//! Leader election through a `coordination.k8s.io/v1` Lease, so two operator replicas never
//! reconcile at once. The holder renews every third of the lease; a replica that cannot renew
//! before the lease runs out stops (its Deployment restarts it as a standby).

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use tracing::{info, warn};

pub struct LeaderElection {
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_duration: Duration,
}

/// Whether `lease` lets `identity` take or keep it at `now`.
pub fn may_hold(lease: &LeaseSpec, identity: &str, now: Timestamp) -> bool {
    let holder = lease.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return true;
    }
    let duration = i64::from(lease.lease_duration_seconds.unwrap_or(15));
    match &lease.renew_time {
        Some(MicroTime(renewed)) => renewed.as_second() + duration < now.as_second(),
        None => true,
    }
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
                if !may_hold(&current, &self.identity, Timestamp::now()) {
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
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.retry_period()).await;
            match self.try_hold().await {
                Ok(true) => last_renewal = tokio::time::Instant::now(),
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

    fn lease(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..Default::default()
        }
    }

    #[test]
    fn a_live_lease_of_another_holder_is_respected() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert!(!may_hold(&lease("b", 990), "a", now));
        assert!(may_hold(&lease("a", 990), "a", now));
    }

    #[test]
    fn an_expired_or_empty_lease_can_be_taken() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert!(may_hold(&lease("b", 980), "a", now));
        assert!(may_hold(&LeaseSpec::default(), "a", now));
    }
}
