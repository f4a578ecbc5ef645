//! Wake-ups a session schedules for itself: when one is first due, and where it goes after it
//! fired. Pure: `now` is always an argument, so the service, the tests and the simulation's
//! virtual clock all compute the same occurrences.
//!
//! A wake-up is one of four kinds, stored as a kind and a spec text:
//!
//! | kind | spec | first due | after it fired |
//! |---|---|---|---|
//! | `delay` | milliseconds | `now + delay` | ends |
//! | `at` | unix milliseconds | that time | ends |
//! | `cron` | five fields, UTC | the next match after `now` | the next match after `now` |
//! | `interval` | milliseconds | `now + every` | `due + every × k`, the first past `now` |
//!
//! An occurrence that comes due while the service is down is not fired for each miss: the
//! wake-up fires once, saying how many occurrences it stands for ([`Advance::missed`]) and how
//! late it is, and moves on past `now`.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::ids::{ScheduleId, SessionId};

/// The longest note a wake-up may carry, in characters.
pub const NOTE_CHARS_MAX: usize = 2_000;

/// The furthest ahead a wake-up may first be due: ten years.
pub const HORIZON_MS: i64 = 10 * 366 * 86_400_000;

/// The shortest delay: one second.
pub const DELAY_MS_MIN: i64 = 1_000;

/// Missed occurrences are counted up to this many; past it the count says "at least".
pub const MISSED_COUNT_MAX: u64 = 100_000;

/// What kind of wake-up a schedule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScheduleKind {
    /// Once, a delay after it was set.
    Delay,
    /// Once, at a time.
    At,
    /// At each match of a cron expression (UTC).
    Cron,
    /// Every interval, from when it was set.
    Interval,
}

impl ScheduleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleKind::Delay => "delay",
            ScheduleKind::At => "at",
            ScheduleKind::Cron => "cron",
            ScheduleKind::Interval => "interval",
        }
    }

    /// Whether it fires once and ends.
    pub fn is_one_shot(self) -> bool {
        matches!(self, ScheduleKind::Delay | ScheduleKind::At)
    }
}

impl fmt::Display for ScheduleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScheduleKind {
    type Err = ScheduleError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "delay" => ScheduleKind::Delay,
            "at" => ScheduleKind::At,
            "cron" => ScheduleKind::Cron,
            "interval" => ScheduleKind::Interval,
            other => return Err(ScheduleError::UnknownKind(other.to_owned())),
        })
    }
}

/// Why a wake-up cannot be set (or a stored one read back).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "the cron expression {expression:?} is not valid: {reason}. Write five fields, \
         minute hour day-of-month month day-of-week, in UTC: for example \"0 9 * * MON\" \
         (09:00 every Monday) or \"*/15 * * * *\" (every 15 minutes)"
    )]
    Cron { expression: String, reason: String },
    #[error("the cron expression {0:?} never matches a time in the next ten years")]
    CronNeverDue(String),
    #[error(
        "the time {0:?} is not an RFC 3339 time: write it like \"2026-12-24T18:00:00Z\" or \
         \"2026-12-24T19:00:00+01:00\""
    )]
    Time(String),
    #[error("the time {at} is not in the future (it is {now} now)")]
    InThePast { at: String, now: String },
    #[error("the time {0} is more than ten years away")]
    TooFar(String),
    #[error("the delay must be at least {min_seconds} seconds; {seconds} was given")]
    DelayTooShort { seconds: i64, min_seconds: i64 },
    #[error("the interval must be at least {min_seconds} seconds; {seconds} was given")]
    IntervalTooShort { seconds: i64, min_seconds: i64 },
    #[error("the note is {chars} characters long; at most {max} are kept")]
    NoteTooLong { chars: usize, max: usize },
    #[error("unknown schedule kind {0:?}")]
    UnknownKind(String),
    #[error("a stored schedule's spec {0:?} does not parse")]
    Spec(String),
}

/// When a wake-up is due, as the agent asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Once, `ms` after it was set.
    Delay { ms: i64 },
    /// Once, at unix milliseconds `ms`.
    At { ms: i64 },
    /// At each match of `expression` (five fields, UTC).
    Cron { expression: String },
    /// Every `every_ms`, the first `every_ms` after it was set.
    Interval { every_ms: i64 },
}

impl When {
    pub fn kind(&self) -> ScheduleKind {
        match self {
            When::Delay { .. } => ScheduleKind::Delay,
            When::At { .. } => ScheduleKind::At,
            When::Cron { .. } => ScheduleKind::Cron,
            When::Interval { .. } => ScheduleKind::Interval,
        }
    }

    /// The spec text a row stores beside its kind ([`When::from_stored`] reads it back).
    pub fn spec(&self) -> String {
        match self {
            When::Delay { ms } | When::At { ms } => ms.to_string(),
            When::Cron { expression } => expression.clone(),
            When::Interval { every_ms } => every_ms.to_string(),
        }
    }

    /// The wake-up a row's kind and spec stand for.
    pub fn from_stored(kind: ScheduleKind, spec: &str) -> Result<When, ScheduleError> {
        let ms = || {
            spec.parse::<i64>()
                .map_err(|_| ScheduleError::Spec(spec.to_owned()))
        };
        Ok(match kind {
            ScheduleKind::Delay => When::Delay { ms: ms()? },
            ScheduleKind::At => When::At { ms: ms()? },
            ScheduleKind::Cron => When::Cron {
                expression: spec.to_owned(),
            },
            ScheduleKind::Interval => When::Interval { every_ms: ms()? },
        })
    }

    /// When it is first due, set at `now_ms`: refused when a time is past or too far, a delay
    /// or an interval too short (`interval_ms_min`), or a cron expression does not parse or
    /// never matches.
    pub fn first_due(&self, now_ms: i64, interval_ms_min: i64) -> Result<i64, ScheduleError> {
        let due = match self {
            When::Delay { ms } => {
                if *ms < DELAY_MS_MIN {
                    return Err(ScheduleError::DelayTooShort {
                        seconds: ms / 1000,
                        min_seconds: DELAY_MS_MIN / 1000,
                    });
                }
                now_ms.saturating_add(*ms)
            }
            When::At { ms } => {
                if *ms <= now_ms {
                    return Err(ScheduleError::InThePast {
                        at: format_ms(*ms),
                        now: format_ms(now_ms),
                    });
                }
                *ms
            }
            When::Cron { expression } => {
                let cron = parse_cron(expression)?;
                next_match(&cron, now_ms)
                    .ok_or_else(|| ScheduleError::CronNeverDue(expression.clone()))?
            }
            When::Interval { every_ms } => {
                if *every_ms < interval_ms_min {
                    return Err(ScheduleError::IntervalTooShort {
                        seconds: every_ms / 1000,
                        min_seconds: interval_ms_min / 1000,
                    });
                }
                now_ms.saturating_add(*every_ms)
            }
        };
        if due - now_ms > HORIZON_MS {
            return Err(ScheduleError::TooFar(format_ms(due)));
        }
        Ok(due)
    }

    /// Where a wake-up due at `due_ms` goes once it fires at `now_ms` (`due_ms <= now_ms`).
    pub fn advance(&self, due_ms: i64, now_ms: i64) -> Result<Advance, ScheduleError> {
        match self {
            When::Delay { .. } | When::At { .. } => Ok(Advance {
                next_due_ms: None,
                missed: 0,
            }),
            When::Interval { every_ms } => {
                let every = (*every_ms).max(1);
                // The occurrences due + every × k, k >= 1, that are already past.
                let missed = u64::try_from((now_ms - due_ms).max(0) / every).unwrap_or(0);
                let steps = i64::try_from(missed).unwrap_or(i64::MAX).saturating_add(1);
                Ok(Advance {
                    next_due_ms: Some(due_ms.saturating_add(every.saturating_mul(steps))),
                    missed,
                })
            }
            When::Cron { expression } => {
                let cron = parse_cron(expression)?;
                let mut missed = 0;
                let mut at = due_ms;
                // Count the matches after `due` that are already past, up to a bound.
                while missed < MISSED_COUNT_MAX {
                    match next_match(&cron, at) {
                        Some(next) if next <= now_ms => {
                            missed += 1;
                            at = next;
                        }
                        _ => break,
                    }
                }
                Ok(Advance {
                    next_due_ms: next_match(&cron, now_ms.max(at)),
                    missed,
                })
            }
        }
    }
}

/// Where a wake-up goes after it fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advance {
    /// When it is next due; `None` when it ended (a one-shot, or a cron that matches no more).
    pub next_due_ms: Option<i64>,
    /// Occurrences after the one fired that were also past: they fire with it, not one by one.
    pub missed: u64,
}

/// One firing, as the session's wake-up notice tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wakeup {
    pub schedule_id: ScheduleId,
    pub session_id: SessionId,
    pub kind: ScheduleKind,
    /// The spec as a person reads it: the cron expression, or the interval or delay in
    /// seconds, or the time.
    pub spec_text: String,
    pub note: String,
    /// Which firing this is: 1 for the first.
    pub occurrence: u64,
    /// When the occurrence was due.
    pub due_at_ms: i64,
    /// When it fired.
    pub fired_at_ms: i64,
    /// Later occurrences that were also past and fire with it.
    pub missed: u64,
    /// When it is next due; `None` when this was its last.
    pub next_due_ms: Option<i64>,
}

impl Wakeup {
    /// How late it fired, in milliseconds.
    pub fn late_ms(&self) -> i64 {
        (self.fired_at_ms - self.due_at_ms).max(0)
    }
}

/// A schedule's spec as a person reads it.
pub fn describe(kind: ScheduleKind, spec: &str) -> String {
    match When::from_stored(kind, spec) {
        Ok(When::Delay { ms }) => format!("once, {} s after it was set", ms / 1000),
        Ok(When::At { ms }) => format!("once, at {}", format_ms(ms)),
        Ok(When::Cron { expression }) => format!("cron \"{expression}\" (UTC)"),
        Ok(When::Interval { every_ms }) => format!("every {} s", every_ms / 1000),
        Err(_) => format!("{kind} {spec}"),
    }
}

/// Parses an RFC 3339 time into unix milliseconds.
pub fn parse_time(text: &str) -> Result<i64, ScheduleError> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|time| time.timestamp_millis())
        .map_err(|_| ScheduleError::Time(text.to_owned()))
}

/// Unix milliseconds as an RFC 3339 time in UTC, to the second: `2026-12-24T18:00:00Z`.
pub fn format_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|time| time.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// A five-field cron expression (minute hour day-of-month month day-of-week), refused with a
/// clear reason otherwise: seconds and years are not taken.
pub fn parse_cron(expression: &str) -> Result<Cron, ScheduleError> {
    let refuse = |reason: String| ScheduleError::Cron {
        expression: expression.to_owned(),
        reason,
    };
    let n_fields = expression.split_whitespace().count();
    if n_fields != 5 {
        return Err(refuse(format!("it has {n_fields} fields, not 5")));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expression)
        .map_err(|error| refuse(error.to_string()))
}

/// The first match of `cron` strictly after `after_ms`, to the minute; `None` when none comes.
fn next_match(cron: &Cron, after_ms: i64) -> Option<i64> {
    let after = DateTime::<Utc>::from_timestamp_millis(after_ms)?;
    cron.find_next_occurrence(&after, false)
        .ok()
        .map(|next| next.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: i64 = 60_000;
    /// 2026-12-03T00:00:00Z, a Thursday.
    const DAY0: i64 = 1_796_256_000_000;

    fn cron(expression: &str) -> When {
        When::Cron {
            expression: expression.to_owned(),
        }
    }

    #[test]
    fn the_epoch_constant_is_midnight() {
        assert_eq!(format_ms(DAY0), "2026-12-03T00:00:00Z");
    }

    #[test]
    fn a_delay_is_due_once_after_it() -> Result<(), ScheduleError> {
        let when = When::Delay { ms: 90_000 };
        assert_eq!(when.first_due(DAY0, MINUTE)?, DAY0 + 90_000);
        assert_eq!(
            when.advance(DAY0 + 90_000, DAY0 + 95_000)?,
            Advance {
                next_due_ms: None,
                missed: 0
            }
        );
        Ok(())
    }

    #[test]
    fn a_time_in_the_past_is_refused_clearly() {
        let refused = When::At { ms: DAY0 - 1000 }.first_due(DAY0, MINUTE);
        let Err(error) = refused else {
            panic!("a past time was taken: {refused:?}");
        };
        assert_eq!(
            error.to_string(),
            "the time 2026-12-02T23:59:59Z is not in the future (it is 2026-12-03T00:00:00Z now)"
        );
    }

    #[test]
    fn times_parse_with_their_offset() -> Result<(), ScheduleError> {
        assert_eq!(parse_time("2026-12-03T01:00:00+01:00")?, DAY0);
        assert!(matches!(
            parse_time("tomorrow at nine"),
            Err(ScheduleError::Time(_))
        ));
        Ok(())
    }

    #[test]
    fn an_interval_below_the_minimum_is_refused() {
        let refused = When::Interval { every_ms: 5_000 }.first_due(DAY0, MINUTE);
        assert_eq!(
            refused.map_err(|error| error.to_string()),
            Err("the interval must be at least 60 seconds; 5 was given".to_owned())
        );
    }

    #[test]
    fn an_interval_fires_once_for_the_occurrences_it_missed() -> Result<(), ScheduleError> {
        let when = When::Interval { every_ms: MINUTE };
        let due = when.first_due(DAY0, MINUTE)?;
        assert_eq!(due, DAY0 + MINUTE);
        // On time: the next is one interval on.
        assert_eq!(
            when.advance(due, due + 10)?,
            Advance {
                next_due_ms: Some(due + MINUTE),
                missed: 0
            }
        );
        // Down across three occurrences (due, due+1, due+2, fired at due+2.5): one firing that
        // stands for the two after the first, and the next one is the first still to come.
        assert_eq!(
            when.advance(due, due + 2 * MINUTE + MINUTE / 2)?,
            Advance {
                next_due_ms: Some(due + 3 * MINUTE),
                missed: 2
            }
        );
        // Exactly on an occurrence: that one is past too.
        assert_eq!(
            when.advance(due, due + MINUTE)?,
            Advance {
                next_due_ms: Some(due + 2 * MINUTE),
                missed: 1
            }
        );
        Ok(())
    }

    #[test]
    fn a_cron_is_due_at_its_next_match_in_utc() -> Result<(), ScheduleError> {
        // 09:00 every Monday: 2026-12-07 is the first Monday after Thursday the 3rd.
        let when = cron("0 9 * * MON");
        let due = when.first_due(DAY0, MINUTE)?;
        assert_eq!(format_ms(due), "2026-12-07T09:00:00Z");
        let next = when.advance(due, due + 5_000)?;
        assert_eq!(next.missed, 0);
        assert_eq!(
            next.next_due_ms.map(format_ms).as_deref(),
            Some("2026-12-14T09:00:00Z")
        );
        Ok(())
    }

    #[test]
    fn a_cron_counts_the_matches_it_missed() -> Result<(), ScheduleError> {
        let when = cron("*/15 * * * *");
        let due = when.first_due(DAY0, MINUTE)?;
        assert_eq!(due, DAY0 + 15 * MINUTE);
        // Fired at 00:50: 00:30 and 00:45 were missed too; next is 01:00.
        let advance = when.advance(due, DAY0 + 50 * MINUTE)?;
        assert_eq!(
            advance,
            Advance {
                next_due_ms: Some(DAY0 + 60 * MINUTE),
                missed: 2
            }
        );
        Ok(())
    }

    #[test]
    fn cron_errors_are_clear_refusals() {
        let cases = [
            ("every monday", "it has 2 fields, not 5"),
            ("0 9 * *", "it has 4 fields, not 5"),
            ("0 0 9 * * MON", "it has 6 fields, not 5"),
            ("61 * * * *", "not valid"),
            ("0 25 * * *", "not valid"),
            ("0 9 * * FUNDAY", "not valid"),
        ];
        for (expression, says) in cases {
            let refused = cron(expression).first_due(DAY0, MINUTE);
            let Err(error @ ScheduleError::Cron { .. }) = refused else {
                panic!("{expression:?} was not refused as a bad cron: {refused:?}");
            };
            let text = error.to_string();
            assert!(text.contains(says), "{expression:?}: {text}");
            assert!(text.contains("five fields"), "{expression:?}: {text}");
            assert!(text.contains(expression), "{expression:?}: {text}");
        }
    }

    #[test]
    fn a_cron_that_never_matches_is_refused() {
        let refused = cron("0 0 30 2 *").first_due(DAY0, MINUTE);
        assert!(
            matches!(
                refused,
                Err(ScheduleError::CronNeverDue(_) | ScheduleError::Cron { .. })
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn a_stored_spec_reads_back_as_it_was() -> Result<(), ScheduleError> {
        for when in [
            When::Delay { ms: 1_000 },
            When::At { ms: DAY0 },
            cron("0 9 * * MON"),
            When::Interval { every_ms: MINUTE },
        ] {
            let kind: ScheduleKind = when.kind().as_str().parse()?;
            assert_eq!(When::from_stored(kind, &when.spec())?, when);
        }
        Ok(())
    }
}
