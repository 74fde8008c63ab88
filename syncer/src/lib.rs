//! vnest-syncer: fronts a virtual cluster's API server and syncs its objects with the host
//! namespace the VirtualCluster lives in.

pub mod cache;
pub mod change;
pub mod controllers;
pub mod custom;
pub mod dns;
pub mod engine;
pub mod host_client;
pub mod metrics;
pub mod proxy;
pub mod resources;
pub mod server;
pub mod translate;
