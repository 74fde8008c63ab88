//! vnest-syncer: fronts a virtual cluster's API server and syncs its objects with the host
//! namespace the VirtualCluster lives in.

pub mod translate;
