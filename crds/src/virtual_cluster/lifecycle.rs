//! `spec.sleepMode` and `spec.autoDelete`: when a virtual cluster sleeps, wakes and is deleted.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use crate::DurationSpec;

const CRON_RULE: &str = "self.matches('^\\\\s*\\\\S+(\\\\s+\\\\S+){4}\\\\s*$')";
const CRON_MESSAGE: &str = "must be a 5-field cron expression (minute hour day-of-month month day-of-week), e.g. \"0 20 * * 1-5\"";

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.afterInactivity) || has(self.sleepSchedule)").message("set afterInactivity or sleepSchedule (or both); with neither the virtual cluster never sleeps"))]
pub struct SleepMode {
    /// Sleep when no tenant request arrived for this long, e.g. `1800` or `30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_inactivity: Option<DurationSpec>,
    /// Cron (5 fields, in `timezone`) at which to sleep, e.g. `0 20 * * 1-5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(CRON_RULE).message(CRON_MESSAGE))]
    pub sleep_schedule: Option<String>,
    /// Cron (5 fields, in `timezone`) at which to wake, e.g. `0 8 * * 1-5`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new(CRON_RULE).message(CRON_MESSAGE))]
    pub wake_schedule: Option<String>,
    /// IANA time zone the schedules are read in, e.g. `Europe/Berlin`.
    #[serde(default = "utc")]
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')").message("must be an IANA time zone name such as UTC or Europe/Berlin"))]
    pub timezone: String,
    /// Wake on the first request to the virtual cluster's endpoint.
    #[serde(default = "yes")]
    pub auto_wakeup: bool,
}

fn utc() -> String {
    "UTC".into()
}

fn yes() -> bool {
    true
}

#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.afterInactivity) || has(self.afterCreation)").message("set afterInactivity or afterCreation (or both); with neither nothing is ever deleted"))]
pub struct AutoDelete {
    /// Delete when no tenant request arrived for this long, e.g. `14400` or `4h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_inactivity: Option<DurationSpec>,
    /// Delete this long after creation (a TTL), e.g. `72h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_creation: Option<DurationSpec>,
}
