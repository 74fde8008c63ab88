//! The VirtualCluster controller, one reconcile as a short list of steps:
//!
//! 1. [`read`] gathers what the reconcile decides from, once, from the caches;
//! 2. [`plan`] (pure) resolves the template and policy, validates the spec, decides the
//!    lifecycle and the desired state;
//! 3. [`apply`] writes the certificate Secret (read there each time: keys are not cached),
//!    children and namespace labels, and returns a token only it can make;
//! 4. [`status`] computes the status from that token alone and writes it.
//!
//! On deletion [`cleanup`] removes what owner references cannot. [`controller`] wires the
//! watches, the concurrency and the error policy; [`error`] says what failed.

mod apply;
mod cleanup;
mod context;
pub mod controller;
mod error;
mod plan;
mod read;
#[cfg(test)]
mod schema_walk;
mod status;

use std::{sync::Arc, time::Instant};

use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        finalizer::{self, Event as Finalizer, finalizer},
        reflector::ObjectRef,
    },
};
use tracing::{Instrument, info_span};
use vnest_crds::{VirtualCluster, meta};

use self::{context::Context, error::Error, plan::Step};
use crate::lifecycle::facts;

/// Brings the host objects of `vc` to what its spec asks for, and reports it.
async fn reconcile_spec(ctx: &Context, vc: &VirtualCluster) -> Result<Action, Error> {
    let observed = read::read(ctx, vc).await?;
    let plan = plan::plan(&ctx.settings, vc, observed, facts::now());
    if let Step::Delete { reason, at } = plan.step {
        return apply::auto_delete(ctx, &plan.vc, reason, at).await;
    }
    let written = apply::apply(ctx, &plan).await?;
    status::report(ctx, &plan, written).await
}

async fn reconcile(vc: Arc<VirtualCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Drift checks read the caches: until each has finished its first list, a restarted
    // operator would take every child for missing and apply it again.
    ctx.caches_ready.clone().await;
    let started = Instant::now();
    let namespace = vc.namespace().unwrap_or_default();
    let api: Api<VirtualCluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let span = info_span!("reconcile", namespace = %namespace, name = %vc.name_any());
    let result = finalizer(&api, meta::FINALIZER, vc.clone(), |event| async {
        match event {
            Finalizer::Apply(vc) => reconcile_spec(&ctx, &vc).await,
            Finalizer::Cleanup(vc) => cleanup::cleanup(&ctx, &vc).await,
        }
    })
    .instrument(span)
    .await
    .map_err(|err| match err {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        other => Error::Finalizer {
            object: format!("{namespace}/{}", vc.name_any()),
            message: other.to_string(),
        },
    });
    ctx.metrics
        .reconcile_duration
        .observe(started.elapsed().as_secs_f64());
    let outcome = if result.is_ok() { "ok" } else { "error" };
    ctx.metrics.reconciles.with_label_values(&[outcome]).inc();
    if result.is_ok() {
        ctx.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ObjectRef::from_obj(vc.as_ref()));
    }
    result
}
