//! The lifecycle decision: from the parsed spec, the state the status remembers, the last
//! tenant activity and the time, whether the virtual cluster should be awake, asleep (and
//! why) or deleted, and when that next changes if nothing else does.
//!
//! Rules:
//! - auto-delete (`afterCreation` from creation, `afterInactivity` from the later of creation
//!   and the last activity) comes first and applies asleep or paused;
//! - `paused` sleeps now and stays asleep, schedules suspended;
//! - awake, the earlier of the next `sleepSchedule` firing and the end of the inactivity
//!   window puts it to sleep; at a schedule moment fresh activity does not keep it awake;
//! - asleep, the next `wakeSchedule` firing wakes it; so does activity recorded after the
//!   operator put it to sleep when `autoWakeup` is on (that is the wake request: the syncer is
//!   down while asleep, so only a wake endpoint or a person renews the activity Lease);
//! - transitions missed while the operator was away are replayed at their own moments, so
//!   coming back at noon after a night's sleep/wake finds the cluster awake.

use chrono::{DateTime, Utc};

use super::{
    policy::Policy,
    reason::{DeleteReason, SleepReason, WakeReason},
};

/// Awake or asleep, and since when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Awake {
        since: DateTime<Utc>,
    },
    Asleep {
        reason: SleepReason,
        since: DateTime<Utc>,
        /// When the operator put it to sleep; activity after this is a wake request. `None`
        /// for a sleep this decision has only just found due.
        enacted: Option<DateTime<Utc>>,
    },
}

/// What the decision knows besides the spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facts {
    pub created: DateTime<Utc>,
    pub last_activity: Option<DateTime<Utc>>,
    /// The state the status recorded.
    pub previous: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Desired {
    Awake {
        since: DateTime<Utc>,
    },
    Asleep {
        reason: SleepReason,
        since: DateTime<Utc>,
    },
    Delete {
        reason: DeleteReason,
        at: DateTime<Utc>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub desired: Desired,
    /// When an awake cluster will sleep, if nothing changes.
    pub next_sleep: Option<DateTime<Utc>>,
    /// When an asleep cluster will wake by schedule.
    pub next_wake: Option<DateTime<Utc>>,
    pub delete_at: Option<DateTime<Utc>>,
    /// Why the cluster is awake again, when the recorded state was asleep.
    pub woke_by: Option<WakeReason>,
}

impl Decision {
    /// The next moment the decision changes by itself: when the operator must look again.
    pub fn recheck_at(&self) -> Option<DateTime<Utc>> {
        [self.next_sleep, self.next_wake, self.delete_at]
            .into_iter()
            .flatten()
            .min()
    }
}

/// The earlier of two optional moments, with its tag; ties go to `a`.
fn earliest<T>(
    a: Option<(DateTime<Utc>, T)>,
    b: Option<(DateTime<Utc>, T)>,
) -> Option<(DateTime<Utc>, T)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// More replayed transitions than this (every-minute schedules over a long outage) stop the
/// replay where it is; the next reconcile continues from there.
const MAX_REPLAYED_TRANSITIONS: usize = 1000;

pub fn decide(policy: &Policy, facts: &Facts, now: DateTime<Utc>) -> Decision {
    let delete = earliest(
        policy
            .delete_after_creation
            .map(|d| (facts.created + d, DeleteReason::AfterCreation)),
        policy.delete_after_inactivity.map(|d| {
            let idle_since = facts
                .last_activity
                .map_or(facts.created, |a| a.max(facts.created));
            (idle_since + d, DeleteReason::AfterInactivity)
        }),
    );
    let delete_at = delete.map(|(at, _)| at);
    let was_asleep = matches!(facts.previous, State::Asleep { .. });
    let decision = |desired, next_sleep, next_wake, woke_by: Option<WakeReason>| Decision {
        desired,
        next_sleep,
        next_wake,
        delete_at,
        woke_by: woke_by.filter(|_| was_asleep),
    };
    if let Some((at, reason)) = delete.filter(|(at, _)| *at <= now) {
        return decision(Desired::Delete { reason, at }, None, None, None);
    }

    let previous_pause = match facts.previous {
        State::Asleep {
            reason: SleepReason::Paused,
            since,
            ..
        } => Some(since),
        _ => None,
    };
    if policy.paused {
        let since = previous_pause.unwrap_or(now);
        let desired = Desired::Asleep {
            reason: SleepReason::Paused,
            since,
        };
        return decision(desired, None, None, None);
    }
    let Some(sleep) = &policy.sleep else {
        return match facts.previous {
            State::Awake { since } => decision(Desired::Awake { since }, None, None, None),
            State::Asleep { reason, .. } => {
                let woke_by = if reason == SleepReason::Paused {
                    WakeReason::Resumed
                } else {
                    WakeReason::SleepModeRemoved
                };
                decision(Desired::Awake { since: now }, None, None, Some(woke_by))
            }
        };
    };
    // Unpausing wakes now; a pause is not replayed as a schedule sleep.
    let (mut state, mut woke_by) = match previous_pause {
        Some(_) => (State::Awake { since: now }, Some(WakeReason::Resumed)),
        None => (facts.previous, None),
    };
    for _ in 0..MAX_REPLAYED_TRANSITIONS {
        match state {
            State::Awake { since } => {
                let by_schedule = sleep
                    .sleep_schedule
                    .as_ref()
                    .and_then(|c| c.next_after(since, sleep.timezone))
                    .map(|t| (t, SleepReason::Schedule));
                let by_inactivity = sleep.after_inactivity.map(|d| {
                    let idle_since = facts.last_activity.map_or(since, |a| a.max(since));
                    (idle_since + d, SleepReason::Inactivity)
                });
                match earliest(by_schedule, by_inactivity) {
                    Some((at, reason)) if at <= now => {
                        woke_by = None;
                        state = State::Asleep {
                            reason,
                            since: at,
                            enacted: None,
                        }
                    }
                    next => {
                        let next_sleep = next.map(|n| n.0);
                        return decision(Desired::Awake { since }, next_sleep, None, woke_by);
                    }
                }
            }
            State::Asleep {
                reason,
                since,
                enacted,
            } => {
                let by_schedule = sleep
                    .wake_schedule
                    .as_ref()
                    .and_then(|c| c.next_after(since, sleep.timezone));
                let by_request = facts
                    .last_activity
                    .filter(|a| sleep.auto_wakeup && enacted.is_some_and(|e| *a > e));
                let by_request = by_request.map(|t| (t, WakeReason::Request));
                match earliest(by_request, by_schedule.map(|t| (t, WakeReason::Schedule))) {
                    Some((at, why)) if at <= now => {
                        woke_by = Some(why);
                        state = State::Awake { since: at };
                    }
                    _ => {
                        let desired = Desired::Asleep { reason, since };
                        return decision(desired, None, by_schedule, None);
                    }
                }
            }
        }
    }
    match state {
        State::Awake { since } => decision(Desired::Awake { since }, None, None, woke_by),
        State::Asleep { reason, since, .. } => {
            decision(Desired::Asleep { reason, since }, None, None, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn policy(yaml: &str) -> Policy {
        let spec: vnest_crds::VirtualClusterSpec = serde_yaml::from_str(yaml).unwrap();
        crate::validate::validate(&spec, "team-alpha").unwrap()
    }

    const CREATED: &str = "2026-12-01T06:00:00Z";

    /// Awake since creation (a Tuesday), no activity recorded yet.
    fn fresh() -> Facts {
        Facts {
            created: t(CREATED),
            last_activity: None,
            previous: State::Awake { since: t(CREATED) },
        }
    }

    fn asleep(reason: SleepReason, since: &str, enacted: &str) -> Facts {
        Facts {
            previous: State::Asleep {
                reason,
                since: t(since),
                enacted: Some(t(enacted)),
            },
            ..fresh()
        }
    }

    const OFFICE_HOURS: &str = "sleepMode: {sleepSchedule: '0 20 * * 1-5', wakeSchedule: '0 8 * * 1-5', timezone: Europe/Berlin}";

    #[test]
    fn without_lifecycle_settings_it_stays_awake_and_nothing_is_scheduled() {
        let d = decide(&policy("{}"), &fresh(), t("2027-06-01T00:00:00Z"));
        assert_eq!(d.desired, Desired::Awake { since: t(CREATED) });
        assert_eq!((d.recheck_at(), d.woke_by), (None, None));
    }

    #[test]
    fn inactivity_sleeps_after_the_window_counted_from_the_last_activity() {
        let p = policy("sleepMode: {afterInactivity: 30m}");
        let mut facts = fresh();
        facts.last_activity = Some(t("2026-12-01T07:00:00Z"));
        let d = decide(&p, &facts, t("2026-12-01T07:10:00Z"));
        assert_eq!(d.desired, Desired::Awake { since: t(CREATED) });
        assert_eq!(d.next_sleep, Some(t("2026-12-01T07:30:00Z")));
        assert_eq!(d.recheck_at(), d.next_sleep);

        let d = decide(&p, &facts, t("2026-12-01T07:30:00Z"));
        assert_eq!(
            d.desired,
            Desired::Asleep {
                reason: SleepReason::Inactivity,
                since: t("2026-12-01T07:30:00Z")
            }
        );
        // Nothing wakes it by itself: no wake schedule.
        assert_eq!(d.recheck_at(), None);
    }

    /// Without recorded activity the window starts when the cluster was created or woke.
    #[test]
    fn inactivity_counts_from_waking_when_activity_is_older() {
        let p = policy("sleepMode: {afterInactivity: 600}");
        let facts = Facts {
            last_activity: Some(t("2026-12-01T06:01:00Z")),
            previous: State::Awake {
                since: t("2026-12-01T09:00:00Z"),
            },
            ..fresh()
        };
        let d = decide(&p, &facts, t("2026-12-01T09:05:00Z"));
        assert_eq!(d.next_sleep, Some(t("2026-12-01T09:10:00Z")));
    }

    #[test]
    fn the_sleep_schedule_fires_in_its_time_zone() {
        let d = decide(&policy(OFFICE_HOURS), &fresh(), t("2026-12-01T12:00:00Z"));
        // 20:00 in Berlin (UTC+1 in December).
        assert_eq!(d.next_sleep, Some(t("2026-12-01T19:00:00Z")));
        let d = decide(&policy(OFFICE_HOURS), &fresh(), t("2026-12-01T19:00:00Z"));
        assert_eq!(
            d.desired,
            Desired::Asleep {
                reason: SleepReason::Schedule,
                since: t("2026-12-01T19:00:00Z")
            }
        );
        assert_eq!(d.next_wake, Some(t("2026-12-02T07:00:00Z")));
    }

    /// The schedule wins at its moment even when the tenant was active a second ago.
    #[test]
    fn the_schedule_wins_over_fresh_activity() {
        let p = policy(
            "sleepMode: {afterInactivity: 1h, sleepSchedule: '0 20 * * *', wakeSchedule: '0 8 * * *'}",
        );
        let mut facts = fresh();
        facts.last_activity = Some(t("2026-12-01T19:59:59Z"));
        let d = decide(&p, &facts, t("2026-12-01T20:00:05Z"));
        assert_eq!(
            d.desired,
            Desired::Asleep {
                reason: SleepReason::Schedule,
                since: t("2026-12-01T20:00:00Z")
            }
        );
        // Once enacted, that same activity does not wake it.
        let facts = Facts {
            last_activity: Some(t("2026-12-01T19:59:59Z")),
            ..asleep(
                SleepReason::Schedule,
                "2026-12-01T20:00:00Z",
                "2026-12-01T20:00:05Z",
            )
        };
        let d = decide(&p, &facts, t("2026-12-01T23:00:00Z"));
        assert!(matches!(d.desired, Desired::Asleep { .. }), "{d:?}");
        assert_eq!(d.next_wake, Some(t("2026-12-02T08:00:00Z")));
    }

    #[test]
    fn the_wake_schedule_wakes_a_sleeping_cluster_and_the_next_sleep_follows() {
        let facts = asleep(
            SleepReason::Schedule,
            "2026-12-01T19:00:00Z",
            "2026-12-01T19:00:01Z",
        );
        let d = decide(&policy(OFFICE_HOURS), &facts, t("2026-12-02T07:00:00Z"));
        assert_eq!(
            d.desired,
            Desired::Awake {
                since: t("2026-12-02T07:00:00Z")
            }
        );
        assert_eq!(d.next_sleep, Some(t("2026-12-02T19:00:00Z")));
        assert_eq!(d.woke_by, Some(WakeReason::Schedule));
    }

    /// Friday 20:00 to Monday 08:00: weekday schedules skip the weekend.
    #[test]
    fn weekday_schedules_sleep_through_the_weekend() {
        let facts = asleep(
            SleepReason::Schedule,
            "2026-12-04T19:00:00Z",
            "2026-12-04T19:00:00Z",
        );
        let d = decide(&policy(OFFICE_HOURS), &facts, t("2026-12-05T12:00:00Z"));
        assert_eq!(d.next_wake, Some(t("2026-12-07T07:00:00Z")));
    }

    /// Coming back at noon after missing a night's sleep and wake finds the cluster awake.
    #[test]
    fn missed_transitions_are_replayed_at_their_moments() {
        let d = decide(&policy(OFFICE_HOURS), &fresh(), t("2026-12-02T11:00:00Z"));
        assert_eq!(
            d.desired,
            Desired::Awake {
                since: t("2026-12-02T07:00:00Z")
            }
        );
        assert_eq!(d.next_sleep, Some(t("2026-12-02T19:00:00Z")));
        // It never slept as far as anyone saw, so no wake is counted.
        assert_eq!(d.woke_by, None);
    }

    #[test]
    fn a_request_after_the_sleep_wakes_it_when_auto_wakeup_is_on() {
        let facts = Facts {
            last_activity: Some(t("2026-12-01T21:00:00Z")),
            ..asleep(
                SleepReason::Schedule,
                "2026-12-01T19:00:00Z",
                "2026-12-01T19:00:02Z",
            )
        };
        let d = decide(&policy(OFFICE_HOURS), &facts, t("2026-12-01T21:00:01Z"));
        assert_eq!(
            d.desired,
            Desired::Awake {
                since: t("2026-12-01T21:00:00Z")
            }
        );
        assert_eq!(d.woke_by, Some(WakeReason::Request));
        let off = policy(
            "sleepMode: {sleepSchedule: '0 20 * * 1-5', wakeSchedule: '0 8 * * 1-5', timezone: Europe/Berlin, autoWakeup: false}",
        );
        assert!(matches!(
            decide(&off, &facts, t("2026-12-01T21:00:01Z")).desired,
            Desired::Asleep { .. }
        ));
    }

    /// Activity recorded while the operator was away, after a sleep it had not yet enacted,
    /// is not a wake request.
    #[test]
    fn activity_before_the_sleep_was_enacted_does_not_wake_it() {
        let mut facts = fresh();
        facts.last_activity = Some(t("2026-12-01T19:30:00Z"));
        let d = decide(&policy(OFFICE_HOURS), &facts, t("2026-12-01T20:00:00Z"));
        assert!(matches!(d.desired, Desired::Asleep { .. }), "{d:?}");
    }

    #[test]
    fn paused_sleeps_now_keeps_its_start_and_suspends_schedules() {
        let p = policy(&format!("{{paused: true, {}}}", &OFFICE_HOURS));
        let now = t("2026-12-01T10:00:00Z");
        let d = decide(&p, &fresh(), now);
        let paused_now = Desired::Asleep {
            reason: SleepReason::Paused,
            since: now,
        };
        assert_eq!(d.desired, paused_now);
        assert_eq!((d.next_sleep, d.next_wake), (None, None));
        // Still paused later, past a wake moment, and activity does not wake it.
        let facts = Facts {
            last_activity: Some(t("2026-12-02T09:00:00Z")),
            ..asleep(
                SleepReason::Paused,
                "2026-12-01T10:00:00Z",
                "2026-12-01T10:00:00Z",
            )
        };
        assert_eq!(
            decide(&p, &facts, t("2026-12-02T09:30:00Z")).desired,
            paused_now
        );
    }

    #[test]
    fn unpausing_wakes_now_and_restarts_the_inactivity_window() {
        let p = policy("sleepMode: {afterInactivity: 30m}");
        let facts = asleep(
            SleepReason::Paused,
            "2026-12-01T10:00:00Z",
            "2026-12-01T10:00:00Z",
        );
        let now = t("2026-12-03T10:00:00Z");
        let d = decide(&p, &facts, now);
        assert_eq!(d.desired, Desired::Awake { since: now });
        assert_eq!(d.woke_by, Some(WakeReason::Resumed));
        assert_eq!(d.next_sleep, Some(t("2026-12-03T10:30:00Z")));
        // And without any sleep mode.
        assert_eq!(
            decide(&policy("{}"), &facts, now).desired,
            Desired::Awake { since: now }
        );
    }

    #[test]
    fn removing_the_sleep_mode_wakes_a_sleeping_cluster() {
        let facts = asleep(
            SleepReason::Schedule,
            "2026-12-01T19:00:00Z",
            "2026-12-01T19:00:00Z",
        );
        let now = t("2026-12-01T21:00:00Z");
        let d = decide(&policy("{}"), &facts, now);
        assert_eq!(d.desired, Desired::Awake { since: now });
        assert_eq!(d.woke_by, Some(WakeReason::SleepModeRemoved));
    }

    #[test]
    fn auto_delete_after_creation_is_a_ttl() {
        let p = policy("autoDelete: {afterCreation: 72h}");
        let d = decide(&p, &fresh(), t("2026-12-02T06:00:00Z"));
        assert_eq!(d.delete_at, Some(t("2026-12-04T06:00:00Z")));
        assert_eq!(d.recheck_at(), d.delete_at);
        assert_eq!(
            decide(&p, &fresh(), t("2026-12-04T06:00:00Z")).desired,
            Desired::Delete {
                reason: DeleteReason::AfterCreation,
                at: t("2026-12-04T06:00:00Z")
            }
        );
    }

    /// Sleeping is inactivity: a scheduled wake is not tenant activity and does not postpone it.
    #[test]
    fn auto_delete_after_inactivity_counts_from_the_last_activity() {
        let p = policy(&format!(
            "{{autoDelete: {{afterInactivity: 14400}}, {}}}",
            &OFFICE_HOURS
        ));
        let mut facts = fresh();
        assert_eq!(
            decide(&p, &facts, t("2026-12-01T07:00:00Z")).delete_at,
            Some(t("2026-12-01T10:00:00Z"))
        );
        facts.last_activity = Some(t("2026-12-01T09:00:00Z"));
        let d = decide(&p, &facts, t("2026-12-01T13:00:00Z"));
        assert_eq!(
            d.desired,
            Desired::Delete {
                reason: DeleteReason::AfterInactivity,
                at: t("2026-12-01T13:00:00Z")
            }
        );
    }

    #[test]
    fn the_earlier_delete_reason_wins_and_deletes_even_when_paused() {
        let p = policy("{paused: true, autoDelete: {afterInactivity: 4h, afterCreation: 1h}}");
        let d = decide(&p, &fresh(), t("2026-12-01T07:00:00Z"));
        assert_eq!(
            d.desired,
            Desired::Delete {
                reason: DeleteReason::AfterCreation,
                at: t("2026-12-01T07:00:00Z")
            }
        );
    }

    #[test]
    fn recheck_is_the_earliest_of_sleep_and_delete() {
        let p = policy("{sleepMode: {afterInactivity: 2h}, autoDelete: {afterCreation: 1h}}");
        let d = decide(&p, &fresh(), t("2026-12-01T06:10:00Z"));
        assert_eq!(d.next_sleep, Some(t("2026-12-01T08:00:00Z")));
        assert_eq!(d.recheck_at(), Some(t("2026-12-01T07:00:00Z")));
    }

    /// Berlin's clocks go back on 2026-10-25: a 20:00 sleep moves from 18:00 to 19:00 UTC.
    #[test]
    fn schedule_moments_move_with_daylight_saving() {
        let p = policy("sleepMode: {sleepSchedule: '0 20 * * *', timezone: Europe/Berlin}");
        let facts = Facts {
            created: t("2026-10-24T18:30:00Z"),
            last_activity: None,
            previous: State::Awake {
                since: t("2026-10-24T18:30:00Z"),
            },
        };
        let d = decide(&p, &facts, t("2026-10-25T10:00:00Z"));
        assert_eq!(d.next_sleep, Some(t("2026-10-25T19:00:00Z")));
    }
}
