//! The `schedule` and `unschedule` verbs: a session sets wake-ups for itself (after a delay, at
//! a time, on a cron expression, every interval), each with a note to itself, and cancels them.
//! A due wake-up starts a background turn of the session whose input is a
//! `<scheduled_wakeup>` notice with the note (`crate::scheduler`); `<session_status>` lists
//! the wake-ups still to fire.

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use seed_events::ScheduleId;
use seed_events::schedule::{self, NOTE_CHARS_MAX, ScheduleError, When};
use seed_store::{CallEffect, NewSchedule};

use crate::schema::parse_checked;
use crate::verb::{Availability, Verb, VerbContext, VerbOutput};

/// The shortest interval an agent may schedule by default: a minute.
pub const INTERVAL_MS_MIN_DEFAULT: i64 = 60_000;

/// Wake-ups a session may have still to fire at once, by default.
pub const PER_SESSION_MAX_DEFAULT: usize = 20;

/// Sets a wake-up. Not safe to repeat: run twice, it would set two. The schedule records its
/// call with it, so a call cut off by a crash after it committed is answered with what it set.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// The shortest interval allowed, in milliseconds.
    pub interval_ms_min: i64,
    /// Wake-ups a session may have still to fire at once.
    pub per_session_max: usize,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            interval_ms_min: INTERVAL_MS_MIN_DEFAULT,
            per_session_max: PER_SESSION_MAX_DEFAULT,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleArgs {
    note: String,
    delay_seconds: Option<i64>,
    at: Option<String>,
    cron: Option<String>,
    every_seconds: Option<i64>,
}

impl Verb for Schedule {
    fn name(&self) -> &'static str {
        "schedule"
    }

    fn description(&self) -> &'static str {
        "Sets a wake-up for yourself: when it is due, a new turn of this session starts with a \
         <scheduled_wakeup> message carrying your note, even if nobody writes. Give the note \
         (what to do then, for your future self) and exactly one of: delay_seconds (once, that \
         many seconds from now), at (once, at an RFC 3339 time such as \
         2026-12-24T18:00:00Z), cron (five fields in UTC, minute hour day-of-month month \
         day-of-week, such as \"0 9 * * MON\"), or every_seconds (repeatedly, the first one \
         that many seconds from now). <session_status> lists your wake-ups; cancel one with \
         unschedule. Wake-ups missed while the service was down fire once when it is back, \
         saying how late. Returns the wake-up's id and when it is first due."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "note": {
                    "type": "string",
                    "description": "What to do when it fires, for your future self"
                },
                "delay_seconds": {
                    "type": "integer",
                    "description": "Once, this many seconds from now"
                },
                "at": {
                    "type": "string",
                    "description": "Once, at this RFC 3339 time"
                },
                "cron": {
                    "type": "string",
                    "description": "At each match of this five-field cron expression, in UTC"
                },
                "every_seconds": {
                    "type": "integer",
                    "description": "Repeatedly, every this many seconds"
                }
            },
            "required": ["note"],
            "additionalProperties": false
        })
    }

    /// Run twice it would set two wake-ups: a call cut off by a crash is not run again. The
    /// wake-up records its call's id (and the call's result) in its transaction, so such a call
    /// is answered with what it set when it took effect, and as interrupted when it did not.
    fn safe_to_repeat(&self) -> bool {
        false
    }

    /// A delegated child's turns are its parent's to start: it sets no wake-ups.
    fn availability(&self) -> Availability {
        Availability::NotInChildren
    }

    fn reconcile(&self, context: VerbContext, _: Value) -> BoxFuture<'static, Option<VerbOutput>> {
        Box::pin(reconcile_by_effect(context, "schedule"))
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<ScheduleArgs>(self.name(), &self.parameters(), arguments);
        let verb = *self;
        Box::pin(async move {
            match parsed {
                Ok(args) => verb.set(context, args).await,
                Err(error) => error,
            }
        })
    }
}

impl Schedule {
    async fn set(self, context: VerbContext, args: ScheduleArgs) -> VerbOutput {
        let refuse = |error: ScheduleError| {
            VerbOutput::error(format!("invalid arguments for schedule: {error}"))
        };
        let when = match when_of(&args) {
            Ok(when) => when,
            Err(error) => return error,
        };
        let n_chars = args.note.chars().count();
        if n_chars > NOTE_CHARS_MAX {
            return refuse(ScheduleError::NoteTooLong {
                chars: n_chars,
                max: NOTE_CHARS_MAX,
            });
        }
        let first_due_ms = match when.first_due(context.now_ms, self.interval_ms_min) {
            Ok(due) => due,
            Err(error) => return refuse(error),
        };
        match context.store.list_schedules(context.session_id).await {
            Ok(active) if active.len() >= self.per_session_max => {
                return VerbOutput::error(format!(
                    "this session has {} wake-ups still to fire, the most it may have; cancel \
                     one with unschedule first",
                    active.len()
                ));
            }
            Ok(_) => {}
            Err(error) => return VerbOutput::error(format!("schedule failed: {error}")),
        }
        let id = ScheduleId::new_v7();
        let done = format!(
            "scheduled wake-up {id}: {}, first due at {}. It will start a turn of this \
             session with your note; cancel it with unschedule.",
            schedule::describe(when.kind(), &when.spec()),
            schedule::format_ms(first_due_ms)
        );
        let effect = CallEffect {
            session_id: context.session_id,
            tool_call_id: context.tool_call_id.clone(),
            verb: "schedule".to_owned(),
            result: done.clone(),
        };
        let new = NewSchedule {
            id,
            session_id: context.session_id,
            when,
            note: args.note,
            first_due_ms,
            created_by_call_id: Some(context.tool_call_id.clone()),
            created_at_ms: context.now_ms,
        };
        match context.store.add_schedule(new, Some(effect)).await {
            Ok(row) if row.id == id => VerbOutput::ok(done),
            // The same call set one already (a caller that repeated it): that one stands.
            Ok(row) => VerbOutput::ok(format!(
                "scheduled wake-up {}: {} (set by this call already)",
                row.id,
                row.describe()
            )),
            Err(error) => VerbOutput::error(format!("schedule failed: {error}")),
        }
    }
}

/// The wake-up the arguments ask for: exactly one of the four ways to say when.
fn when_of(args: &ScheduleArgs) -> Result<When, VerbOutput> {
    let refuse =
        |problem: String| VerbOutput::error(format!("invalid arguments for schedule: {problem}"));
    let given = [
        args.delay_seconds.is_some(),
        args.at.is_some(),
        args.cron.is_some(),
        args.every_seconds.is_some(),
    ]
    .iter()
    .filter(|given| **given)
    .count();
    if given != 1 {
        return Err(refuse(format!(
            "give exactly one of delay_seconds, at, cron and every_seconds ({given} given)"
        )));
    }
    let ms = |seconds: i64| seconds.saturating_mul(1000);
    if let Some(seconds) = args.delay_seconds {
        return Ok(When::Delay { ms: ms(seconds) });
    }
    if let Some(at) = &args.at {
        return schedule::parse_time(at)
            .map(|ms| When::At { ms })
            .map_err(|error| refuse(format!("at: {error}")));
    }
    if let Some(expression) = &args.cron {
        return schedule::parse_cron(expression)
            .map(|_| When::Cron {
                expression: expression.trim().to_owned(),
            })
            .map_err(|error| refuse(format!("cron: {error}")));
    }
    let seconds = args.every_seconds.unwrap_or_default();
    Ok(When::Interval {
        every_ms: ms(seconds),
    })
}

/// Cancels a wake-up. Not safe to repeat (run again it would find the wake-up cancelled and
/// answer otherwise): the cancellation records its call, as `schedule` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unschedule;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnscheduleArgs {
    schedule_id: String,
}

impl Verb for Unschedule {
    fn name(&self) -> &'static str {
        "unschedule"
    }

    fn description(&self) -> &'static str {
        "Cancels one of your wake-ups (set with schedule) by its id, as <session_status> lists \
         it and as schedule returned it: it will not fire again, and nothing it was to do then \
         happens unless you do it or schedule it anew. A wake-up that already fired its last \
         time (a delay or a time) is no longer listed and cannot be cancelled. Returns what \
         was cancelled."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "schedule_id": {
                    "type": "string",
                    "description": "The wake-up's id"
                }
            },
            "required": ["schedule_id"],
            "additionalProperties": false
        })
    }

    fn safe_to_repeat(&self) -> bool {
        false
    }

    fn availability(&self) -> Availability {
        Availability::NotInChildren
    }

    fn reconcile(&self, context: VerbContext, _: Value) -> BoxFuture<'static, Option<VerbOutput>> {
        Box::pin(reconcile_by_effect(context, "unschedule"))
    }

    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        let parsed = parse_checked::<UnscheduleArgs>(self.name(), &self.parameters(), arguments);
        Box::pin(async move {
            match parsed {
                Ok(args) => cancel(context, args).await,
                Err(error) => error,
            }
        })
    }
}

async fn cancel(context: VerbContext, args: UnscheduleArgs) -> VerbOutput {
    let Ok(id) = args.schedule_id.trim().parse::<ScheduleId>() else {
        return VerbOutput::error(format!(
            "invalid arguments for unschedule: schedule_id: {:?} is not a wake-up's id",
            args.schedule_id
        ));
    };
    let done = format!("cancelled wake-up {id}");
    let effect = CallEffect {
        session_id: context.session_id,
        tool_call_id: context.tool_call_id.clone(),
        verb: "unschedule".to_owned(),
        result: done.clone(),
    };
    match context
        .store
        .cancel_schedule(context.session_id, id, context.now_ms, Some(effect))
        .await
    {
        Ok(true) => VerbOutput::ok(done),
        Ok(false) => VerbOutput::error(format!(
            "this session has no wake-up {id} still to fire (see <session_status>)"
        )),
        Err(error) => VerbOutput::error(format!("unschedule failed: {error}")),
    }
}

/// What a call of `verb` cut off by a crash did, from the effect it recorded with its change.
async fn reconcile_by_effect(context: VerbContext, verb: &'static str) -> Option<VerbOutput> {
    match context
        .store
        .call_effect(context.session_id, &context.tool_call_id)
        .await
    {
        Ok(effect) => effect.map(|effect| VerbOutput::ok(effect.result)),
        Err(error) => {
            tracing::warn!(%error, verb, "cannot look up a cut-off call");
            None
        }
    }
}
