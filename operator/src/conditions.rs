//! The condition types the operator reports in a VirtualCluster's status. A leaf module: the
//! status computation writes them, the lifecycle facts and the wake listener read them back.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use vnest_crds::VirtualClusterStatus;

pub const READY: &str = "Ready";
pub const CONTROL_PLANE_READY: &str = "ControlPlaneReady";
pub const SPEC_VALID: &str = "SpecValid";
/// True while scaled to zero, with the reason (`Paused`, `Schedule`, `Inactivity`); its
/// transition time is when the operator enacted the change.
pub const SLEEPING: &str = "Sleeping";

/// The condition of `type_` in `status`, if it has one.
pub fn find<'a>(status: Option<&'a VirtualClusterStatus>, type_: &str) -> Option<&'a Condition> {
    status.and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}
