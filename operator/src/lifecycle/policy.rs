//! The lifecycle fields of a spec, parsed: made by `validate::validate`, which reports any
//! that cannot be parsed by field, so the spec is parsed once.

use chrono::Duration;
use chrono_tz::Tz;

use super::schedule::Cron;

#[derive(Clone, Debug)]
pub struct Policy {
    pub paused: bool,
    /// `None` when `spec.sleepMode` is absent: the cluster never sleeps unless paused.
    pub sleep: Option<SleepPolicy>,
    pub delete_after_creation: Option<Duration>,
    pub delete_after_inactivity: Option<Duration>,
}

#[derive(Clone, Debug)]
pub struct SleepPolicy {
    pub after_inactivity: Option<Duration>,
    pub sleep_schedule: Option<Cron>,
    pub wake_schedule: Option<Cron>,
    pub timezone: Tz,
    pub auto_wakeup: bool,
}
