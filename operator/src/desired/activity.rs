//! The activity Lease (`<name>-activity`) the syncer renews on tenant requests; the operator
//! only creates it and owns none of its `spec` (see `vnest_crds::activity`).

use serde_json::json;
use vnest_crds::activity;

use super::{Child, ChildKind, Input};

pub fn lease(input: &Input) -> Child {
    input.child(
        ChildKind::Lease,
        &activity::lease_name(input.name),
        "activity",
        json!({}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::test_support::*;

    /// Applying the Lease must never reset the renewTime the syncer wrote.
    #[test]
    fn the_lease_claims_no_spec_field() {
        let spec = spec_from_yaml("{}");
        let child = lease(&input(&spec));
        assert_eq!(child.name, "team-alpha-activity");
        assert!(child.object.get("spec").is_none(), "{}", child.object);
    }
}
