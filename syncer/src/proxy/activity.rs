//! Records tenant activity on the VirtualCluster's activity Lease for sleep mode (the
//! contract is in `vnest_crds::activity`): at most one write per
//! [`RENEW_INTERVAL`](vnest_crds::activity::RENEW_INTERVAL), and the last request is always
//! written, at most that long after it happened.

use std::time::Duration;

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use tokio::sync::watch;
use vnest_crds::activity::{self, SYNCER_FIELD_MANAGER};

/// Wait after a failed write before trying again.
const RETRY: Duration = Duration::from_secs(5);

/// Where requests report themselves; a background task writes the Lease.
pub struct Activity {
    latest: watch::Sender<Option<Timestamp>>,
}

impl Activity {
    /// Starts the writer of Lease `<vc>-activity` in `namespace`.
    pub fn start(host: Client, namespace: &str, vc: &str) -> Self {
        let (latest, requests) = watch::channel(None);
        let leases = Api::<Lease>::namespaced(host, namespace);
        tokio::spawn(write_renewals(leases, activity::lease_name(vc), requests));
        Activity { latest }
    }

    /// A tenant request arrived now.
    pub fn record(&self) {
        self.latest.send_replace(Some(Timestamp::now()));
    }
}

async fn write_renewals(
    leases: Api<Lease>,
    name: String,
    mut requests: watch::Receiver<Option<Timestamp>>,
) {
    let params = PatchParams {
        field_manager: Some(SYNCER_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let mut written: Option<Timestamp> = None;
    while requests.changed().await.is_ok() {
        let wait = activity::wait_before_renewal(written, Timestamp::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        loop {
            let Some(at) = *requests.borrow_and_update() else {
                break;
            };
            if written.is_some_and(|w| at <= w) {
                break;
            }
            let patch = Patch::Merge(activity::renewal(at));
            match leases.patch(&name, &params, &patch).await {
                Ok(_) => {
                    written = Some(at);
                    break;
                }
                Err(e) => {
                    tracing::warn!(lease = %name, error = %e, "recording tenant activity failed; retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
}
