//! Standard 5-field cron (`minute hour day-of-month month day-of-week`) evaluated in an IANA
//! time zone.
//!
//! The `cron` crate does the field matching, with two translations so that expressions mean
//! what crontab(5) says:
//! - day-of-week: crontab numbers Sunday 0 (or 7) to Saturday 6; the crate numbers Sunday 1 to
//!   Saturday 7. The field is expanded here and handed to the crate as its own ordinals, so
//!   `1-5` is Monday to Friday.
//! - when both day-of-month and day-of-week are restricted, crontab fires when *either*
//!   matches (`0 0 13 * 5`: the 13th and every Friday); the crate requires both, so such an
//!   expression becomes two schedules and the earlier firing wins.
//!
//! Daylight-saving changes: the crate walks wall-clock times (in UTC, where none are skipped
//! or repeated) and each is mapped to an instant here. A wall-clock time that does not exist
//! (spring forward) fires when the gap ends; one that occurs twice (fall back) fires once, at
//! its first occurrence.

use std::collections::BTreeSet;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// A parsed cron expression, ready to be evaluated in any time zone.
#[derive(Clone, Debug)]
pub struct Cron {
    /// Fires when any of these fires (more than one only for the day-of-month OR day-of-week
    /// rule).
    alternatives: Vec<cron::Schedule>,
}

const DAY_NAMES: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// A crontab day-of-week value: 0–7 or a three-letter name; Sunday is 0 (and 7).
fn day_of_week_value(text: &str) -> Result<u32, String> {
    if let Some(i) = DAY_NAMES.iter().position(|d| d.eq_ignore_ascii_case(text)) {
        return Ok(i as u32);
    }
    match text.parse::<u32>() {
        Ok(n) if n <= 7 => Ok(n),
        _ => Err(format!(
            "day-of-week {text:?} is not 0-7 (0 and 7 are Sunday) or a name such as mon"
        )),
    }
}

/// Expands a crontab day-of-week field into the `cron` crate's ordinals (Sunday = 1), e.g.
/// `1-5` → `2,3,4,5,6`.
fn translate_day_of_week(field: &str) -> Result<String, String> {
    if field == "*" || field == "?" {
        return Ok("*".into());
    }
    let mut days = BTreeSet::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => match step.parse::<u32>() {
                Ok(s) if s > 0 => (range, s),
                _ => {
                    return Err(format!(
                        "day-of-week step {step:?} must be a positive number"
                    ));
                }
            },
            None => (item, 1),
        };
        let (first, last) = match range {
            "*" | "?" => (0, 6),
            _ => match range.split_once('-') {
                Some((a, b)) => (day_of_week_value(a)?, day_of_week_value(b)?),
                // `3/2` means from Wednesday on; a bare value is just that day.
                None if item.contains('/') => (day_of_week_value(range)?, 7),
                None => {
                    let day = day_of_week_value(range)?;
                    (day, day)
                }
            },
        };
        if first > last {
            return Err(format!(
                "day-of-week range {range:?} runs backwards; write e.g. 5-6,0 for Friday to Sunday"
            ));
        }
        days.extend((first..=last).step_by(step as usize).map(|d| d % 7));
    }
    Ok(days
        .iter()
        .map(|d| (d + 1).to_string())
        .collect::<Vec<_>>()
        .join(","))
}

/// Parses a standard 5-field cron expression.
pub fn parse_cron(expression: &str) -> Result<Cron, String> {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let [minute, hour, day_of_month, month, day_of_week] = fields[..] else {
        return Err(format!(
            "{expression:?} has {} fields; use 5 (minute hour day-of-month month day-of-week)",
            fields.len()
        ));
    };
    let invalid = |err: String| format!("{expression:?} is not a valid cron expression: {err}");
    let days = translate_day_of_week(day_of_week).map_err(invalid)?;
    // crontab(5): a field "starting with *" does not restrict the day.
    let either_day = !day_of_month.starts_with('*') && !day_of_week.starts_with('*');
    let day_pairs = if either_day {
        vec![(day_of_month, "*".to_string()), ("*", days)]
    } else {
        vec![(day_of_month, days)]
    };
    let alternatives = day_pairs
        .into_iter()
        // The crate counts seconds first; vnest schedules fire on the minute.
        .map(|(dom, dow)| format!("0 {minute} {hour} {dom} {month} {dow}").parse())
        .collect::<Result<Vec<cron::Schedule>, _>>()
        .map_err(|err| invalid(err.to_string()))?;
    Ok(Cron { alternatives })
}

/// The instant at which wall-clock time `local` happens in `tz`: the first of two, or the end
/// of the gap for a time that is skipped.
fn resolve(local: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    // Gaps last at most a day (Pacific/Apia skipped 30 Dec 2011); transitions are on minutes.
    (0..=24 * 60).find_map(|minutes| {
        tz.from_local_datetime(&(local + chrono::Duration::minutes(minutes)))
            .earliest()
            .map(|t| t.with_timezone(&Utc))
    })
}

impl Cron {
    /// The first moment strictly after `after` at which this schedule fires in `tz`, or `None`
    /// when it never fires again (`0 0 30 2 *`, or past the crate's year 2100).
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        // Wall-clock time stands in as UTC, so the crate never meets a skipped or repeated
        // time. Mapping back is monotonic and never lands later than `after` for wall times
        // up to `after`'s, so the first candidate past `after` is the answer.
        let wall = Utc.from_utc_datetime(&after.with_timezone(&tz).naive_local());
        self.alternatives
            .iter()
            .filter_map(|schedule| {
                schedule
                    .after(&wall)
                    .filter_map(|candidate| resolve(candidate.naive_utc(), tz))
                    .find(|t| *t > after)
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, Weekday};

    fn utc(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn next(expression: &str, tz: &str, after: &str) -> DateTime<Utc> {
        parse_cron(expression)
            .unwrap()
            .next_after(utc(after), tz.parse().unwrap())
            .unwrap()
    }

    /// The firings of `expression` in `tz` after `after`, as UTC RFC 3339 strings.
    fn firings(expression: &str, tz: &str, after: &str, n: usize) -> Vec<String> {
        let cron = parse_cron(expression).unwrap();
        let tz: Tz = tz.parse().unwrap();
        let mut t = utc(after);
        (0..n)
            .map(|_| {
                t = cron.next_after(t, tz).unwrap();
                t.to_rfc3339()
            })
            .collect()
    }

    fn weekdays(expression: &str) -> Vec<Weekday> {
        let cron = parse_cron(expression).unwrap();
        // 2026-12-05 is a Saturday; a week of daily firings covers every day once.
        let mut t = utc("2026-12-05T00:00:00Z");
        let mut days: Vec<Weekday> = Vec::new();
        loop {
            t = cron.next_after(t, Tz::UTC).unwrap();
            if t >= utc("2026-12-12T00:00:00Z") {
                return days;
            }
            days.push(t.weekday());
        }
    }

    /// crontab's 1-5 is Monday to Friday, not the cron crate's Sunday to Thursday.
    #[test]
    fn one_to_five_is_monday_to_friday() {
        use Weekday::*;
        assert_eq!(weekdays("0 9 * * 1-5"), vec![Mon, Tue, Wed, Thu, Fri]);
        assert_eq!(
            next("0 9 * * 1-5", "UTC", "2026-12-05T12:00:00Z"),
            utc("2026-12-07T09:00:00Z")
        );
    }

    #[test]
    fn sunday_is_zero_and_seven() {
        use Weekday::*;
        assert_eq!(weekdays("0 9 * * 0"), vec![Sun]);
        assert_eq!(weekdays("0 9 * * 7"), vec![Sun]);
        assert_eq!(weekdays("0 9 * * 5-7"), vec![Sat, Sun, Fri]);
        assert_eq!(weekdays("0 9 * * 6"), vec![Sat]);
    }

    #[test]
    fn day_names_lists_and_steps_translate() {
        use Weekday::*;
        assert_eq!(weekdays("0 9 * * MON-fri"), weekdays("0 9 * * 1-5"));
        assert_eq!(weekdays("0 9 * * sat,sun"), vec![Sat, Sun]);
        assert_eq!(weekdays("0 9 * * */2"), vec![Sat, Sun, Tue, Thu]);
        assert_eq!(weekdays("0 9 * * 1-5/2"), vec![Mon, Wed, Fri]);
        assert_eq!(weekdays("0 9 * * 4/2"), vec![Sat, Thu]);
    }

    #[test]
    fn bad_days_of_week_are_refused() {
        for bad in ["0 9 * * 8", "0 9 * * 5-1", "0 9 * * funday", "0 9 * * */0"] {
            let err = parse_cron(bad).unwrap_err();
            assert!(
                err.contains("is not a valid cron expression"),
                "{bad}: {err}"
            );
        }
        assert!(parse_cron("0 25 * * *").is_err());
        assert!(parse_cron("0 20 * *").unwrap_err().contains("has 4 fields"));
    }

    /// crontab(5): with both day fields restricted, either one matching fires.
    #[test]
    fn day_of_month_or_day_of_week() {
        // 2026-12-01 is a Tuesday: the next Friday comes before the 13th.
        assert_eq!(
            firings("0 0 13 * 5", "UTC", "2026-12-01T00:00:00Z", 3),
            [
                "2026-12-04T00:00:00+00:00",
                "2026-12-11T00:00:00+00:00",
                "2026-12-13T00:00:00+00:00"
            ]
        );
        // A star in either field means only the other restricts.
        assert_eq!(
            next("0 0 13 * *", "UTC", "2026-12-01T00:00:00Z"),
            utc("2026-12-13T00:00:00Z")
        );
    }

    #[test]
    fn the_31st_skips_shorter_months() {
        assert_eq!(
            firings("0 0 31 * *", "UTC", "2026-03-31T00:00:00Z", 3),
            [
                "2026-05-31T00:00:00+00:00",
                "2026-07-31T00:00:00+00:00",
                "2026-08-31T00:00:00+00:00"
            ]
        );
    }

    #[test]
    fn february_29th_waits_for_a_leap_year() {
        assert_eq!(
            next("0 12 29 2 *", "UTC", "2026-03-01T00:00:00Z"),
            utc("2028-02-29T12:00:00Z")
        );
        assert!(
            parse_cron("0 0 30 2 *")
                .unwrap()
                .next_after(utc("2026-01-01T00:00:00Z"), Tz::UTC)
                .is_none()
        );
    }

    #[test]
    fn month_end_in_a_time_zone_ahead_of_utc() {
        // Midnight on 1 March in Tokyo is still February in UTC.
        assert_eq!(
            next("0 0 1 3 *", "Asia/Tokyo", "2028-02-28T00:00:00Z"),
            utc("2028-02-29T15:00:00Z")
        );
    }

    #[test]
    fn schedules_follow_the_local_clock_across_daylight_saving() {
        // Berlin moves from +01:00 to +02:00 on 2026-03-29 and back on 2026-10-25.
        assert_eq!(
            firings("0 20 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
            ["2026-03-28T19:00:00+00:00", "2026-03-29T18:00:00+00:00"]
        );
        assert_eq!(
            firings("0 20 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
            ["2026-10-24T18:00:00+00:00", "2026-10-25T19:00:00+00:00"]
        );
    }

    /// 02:30 does not exist in Berlin on 2026-03-29: it fires at 03:00 CEST, when the gap ends.
    #[test]
    fn a_skipped_time_fires_when_the_gap_ends() {
        assert_eq!(
            firings("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29T01:00:00+00:00", "2026-03-30T00:30:00+00:00"]
        );
        // New York springs forward at 02:00 on 2026-03-08.
        assert_eq!(
            firings("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", 2),
            ["2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]
        );
    }

    /// 02:30 happens twice in Berlin on 2026-10-25: it fires once, at the first.
    #[test]
    fn a_repeated_time_fires_once() {
        assert_eq!(
            firings("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25T00:30:00+00:00", "2026-10-26T01:30:00+00:00"]
        );
        // Asked from inside the second 02:xx, the next is tomorrow's.
        assert_eq!(
            next("30 2 * * *", "Europe/Berlin", "2026-10-25T01:10:00Z"),
            utc("2026-10-26T01:30:00Z")
        );
        // New York falls back at 02:00 EDT on 2026-11-01; 01:30 happens twice.
        assert_eq!(
            firings("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", 2),
            ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]
        );
    }

    /// Every wall-clock time fires once, so the repeated hour of a fall-back has no firings.
    #[test]
    fn frequent_schedules_skip_the_repeated_hour() {
        assert_eq!(
            firings(
                "*/30 * * * *",
                "America/New_York",
                "2026-11-01T05:00:00Z",
                3
            ),
            [
                "2026-11-01T05:30:00+00:00",
                "2026-11-01T07:00:00+00:00",
                "2026-11-01T07:30:00+00:00"
            ]
        );
    }

    #[test]
    fn next_is_strictly_after() {
        assert_eq!(
            next("0 20 * * *", "UTC", "2026-12-03T20:00:00Z"),
            utc("2026-12-04T20:00:00Z")
        );
        assert_eq!(
            next("0 20 * * *", "UTC", "2026-12-03T19:59:59Z"),
            utc("2026-12-03T20:00:00Z")
        );
    }
}
