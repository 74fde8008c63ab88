//! Sleep, wake and auto-delete. `schedule` and `decide` are pure: when a virtual cluster
//! should be awake, asleep or gone, from its spec, what its status remembers and the time.
//! `policy` is the spec's lifecycle fields parsed, `facts` the inputs read from the objects,
//! `reason` why a change happens; `enact` does the API calls a decision needs beyond the
//! desired state (which scales the StatefulSet).

pub mod decide;
pub mod enact;
pub mod facts;
pub mod policy;
pub mod reason;
pub mod schedule;
