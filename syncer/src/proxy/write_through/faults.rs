//! Fault injection for the write-through tests: with `VNEST_SYNCER_WRITE_THROUGH_FAULTS=1`
//! in the syncer's environment, a tenant object named `wt-fault-<step>.…` fails at that
//! step, so each rollback failure can be provoked against real API servers. Off unless set.
//!
//! - `host-write`: the host takes the write but its answer is lost (`response_error`);
//! - `host-delete`: the same, and deleting the host mirror in the rollback fails;
//! - `host-lookup`: the rollback cannot read the host;
//! - `virtual-delete`, `virtual-update`: the tenant-side rollback call fails;
//! - `virtual-delete-conflict`, `virtual-update-conflict`: it conflicts every time;
//! - `unidentified`: the written object is treated as unidentifiable.

pub const ENV: &str = "VNEST_SYNCER_WRITE_THROUGH_FAULTS";

#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    enabled: bool,
}

impl Faults {
    pub fn from_env() -> Self {
        let enabled = std::env::var(ENV).is_ok_and(|v| v == "1");
        if enabled {
            tracing::warn!(
                "{ENV}=1: write-through faults are injected for objects named wt-fault-<step>.…"
            );
        }
        Faults { enabled }
    }

    /// Whether the object `name` fails at `step`.
    pub fn hits(&self, step: &str, name: &str) -> bool {
        self.enabled
            && name
                .strip_prefix("wt-fault-")
                .and_then(|rest| rest.strip_prefix(step))
                .is_some_and(|rest| rest.starts_with('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::Faults;

    #[test]
    fn only_an_enabled_syncer_fails_and_only_at_the_named_step() {
        let on = Faults { enabled: true };
        assert!(on.hits("virtual-delete", "wt-fault-virtual-delete.1"));
        assert!(!on.hits("virtual-delete", "wt-fault-virtual-delete-conflict.1"));
        assert!(on.hits(
            "virtual-delete-conflict",
            "wt-fault-virtual-delete-conflict.1"
        ));
        assert!(!on.hits("host-lookup", "plain-name"));
        assert!(!Faults::default().hits("virtual-delete", "wt-fault-virtual-delete.1"));
    }
}
