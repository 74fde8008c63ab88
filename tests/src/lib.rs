//! Support for vnest's integration tests: the real local test bed (etcd, kube-apiserver,
//! controller-manager, scheduler, KWOK, a real node, and a second API server as the virtual
//! cluster), started once per test run, plus per-test namespaces and the operator as a real
//! process.

pub mod bed;
pub mod crd;
pub mod faults;
pub mod fixtures;
pub mod measure;
pub mod node;
pub mod operator;
pub mod scrape;
pub mod syncer;
pub mod tenant;
pub mod wait;

pub use bed::{TestBed, TestNamespace, bed};
pub use operator::OperatorProcess;
pub use syncer::SyncerProcess;
