//! vnest-operator: reconciles each `VirtualCluster` into the host objects that run its
//! virtual control plane, and reports what it found in the object's status.

pub mod certs;
pub mod children;
pub mod conditions;
pub mod content;
pub mod desired;
pub mod drift;
pub mod error;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod policy;
pub mod reconcile;
pub mod recorder;
pub mod settings;
pub mod template;
pub mod validate;
pub mod wake;
