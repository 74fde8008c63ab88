//! vnest-operator: reconciles each `VirtualCluster` into the host objects that run its
//! virtual control plane, and reports what it found in the object's status.

pub mod certs;
pub mod desired;
pub mod settings;
pub mod validate;
