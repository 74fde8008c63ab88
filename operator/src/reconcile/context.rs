//! What every reconcile shares: the client, caches, metrics, event recorder, and what this
//! process last reported per VirtualCluster (for backoff and the phase gauges).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use futures::future::{BoxFuture, Shared};
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::{
    Client, Resource,
    core::PartialObjectMeta,
    runtime::{
        events::{Event, EventType},
        reflector::{ObjectRef, Store},
    },
};
use tracing::warn;
use vnest_crds::{
    Phase, VirtualCluster, VirtualClusterPolicy, VirtualClusterStatus, VirtualClusterTemplate,
};

use crate::{
    children::ChildStores,
    conditions::{self, SLEEPING},
    metrics::Metrics,
    recorder::Recorder,
    settings::Settings,
};

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub metrics: Metrics,
    pub(super) stores: ChildStores,
    pub(super) namespaces: Store<PartialObjectMeta<Namespace>>,
    pub(super) templates: Store<VirtualClusterTemplate>,
    pub(super) policies: Store<VirtualClusterPolicy>,
    /// Resolves once every cache has finished its first list. Shared, because a store's own
    /// `wait_until_ready` wakes only the last of several concurrent waiters.
    pub(super) caches_ready: Shared<BoxFuture<'static, ()>>,
    pub(super) recorder: Recorder,
    /// Consecutive failures per VirtualCluster, for backoff.
    pub(super) failures: Mutex<HashMap<ObjectRef<VirtualCluster>, u32>>,
    /// Last phase and sleep reason per VirtualCluster, for the by-phase and sleeping gauges.
    pub(super) phases: Mutex<HashMap<ObjectRef<VirtualCluster>, Reported>>,
}

/// What a VirtualCluster's status last said: its phase and, while asleep, why.
type Reported = (Phase, Option<String>);

/// Sets a gauge to the number of entries per label, clearing labels that have none.
fn set_counts<'a>(gauge: &prometheus::IntGaugeVec, labels: impl Iterator<Item = &'a str>) {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for label in labels {
        *counts.entry(label).or_default() += 1;
    }
    gauge.reset();
    for (label, n) in counts {
        gauge.with_label_values(&[label]).set(n);
    }
}

impl Context {
    /// Records the phase and sleep reason `status` reports, or forgets them when `None`.
    pub(super) fn record_phase(
        &self,
        key: ObjectRef<VirtualCluster>,
        status: Option<&VirtualClusterStatus>,
    ) {
        let mut phases = self.phases.lock().unwrap_or_else(|e| e.into_inner());
        match status.and_then(|s| s.phase) {
            Some(phase) => {
                let sleeping = conditions::find(status, SLEEPING)
                    .filter(|c| c.status == "True")
                    .map(|c| c.reason.clone());
                phases.insert(key, (phase, sleeping))
            }
            None => phases.remove(&key),
        };
        let names: Vec<String> = phases.values().map(|(p, _)| format!("{p:?}")).collect();
        set_counts(
            &self.metrics.virtual_clusters,
            names.iter().map(String::as_str),
        );
        set_counts(
            &self.metrics.sleeping,
            phases.values().filter_map(|(_, r)| r.as_deref()),
        );
    }

    /// Whether this process last reported `vc` asleep; `None` when it reported nothing yet.
    pub(super) fn reported_asleep(&self, vc: &VirtualCluster) -> Option<bool> {
        self.phases
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&ObjectRef::from_obj(vc))
            .map(|(_, sleeping)| sleeping.is_some())
    }

    pub(super) async fn event(
        &self,
        vc: &VirtualCluster,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.event_about(vc, None, type_, reason, action, note)
            .await;
    }

    /// An event on `vc` naming the child it concerns, so events about different children are
    /// not folded into one series.
    pub(super) async fn event_about(
        &self,
        vc: &VirtualCluster,
        child: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: child,
        };
        if let Err(err) = self.recorder.publish(&event, &vc.object_ref(&())).await {
            warn!(error = %err, "failed to publish event");
        } else {
            self.metrics.write("Event", "create");
        }
    }
}
