//! Elicitations: an MCP server, during one of Seed's calls to it, asks the person for input
//! (`elicitation/create`: a message and the schema of the answer's content). The question takes
//! the path of an approval: it is recorded pending (`seed_store`'s `elicitations`), announced
//! on the bus, listed with the session's approvals, and answered through the same endpoint
//! (accept with content, decline or cancel); the answer goes back to the server as the
//! request's result and the call goes on.
//!
//! Which call asked: a request from the server names no call of ours (over stdio nothing links
//! it to the request it serves), so it is the call in flight on that connection when there is
//! exactly one, and it is refused, saying why, when there are none or several ([`attribute`]).
//!
//! A question lives only as long as the call that asked: the call's end closes it, an answer
//! not given within the approval timeout cancels it ("no answer in N"), and the next boot
//! closes any a crash left pending.
//!
//! [`attribute`] and [`check_content`] are pure; [`People`] and [`PersonAsker`] are the shell.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use seed_actors::approval_timer::duration_text;
use seed_actors::bus::{Notification, Publisher};
use seed_events::{RunId, SessionId};
use seed_store::{
    AnswerOutcome, AskOutcome, ElicitationAnswer, ElicitationRow, ElicitationStatus,
    NewElicitation, Store,
};
use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

/// What a server asks.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub message: String,
    /// The JSON Schema of the answer's content: an object of primitive fields.
    pub requested_schema: Value,
}

/// The answer a server is sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Accept { content: Value },
    Decline,
    Cancel,
}

impl Reply {
    /// The reply an answered row stands for: what was not accepted or declined is a cancel.
    pub fn of(row: &ElicitationRow) -> Reply {
        match (row.status, &row.content) {
            (ElicitationStatus::Accepted, Some(content)) => Reply::Accept {
                content: content.clone(),
            },
            (ElicitationStatus::Declined, _) => Reply::Decline,
            _ => Reply::Cancel,
        }
    }
}

/// Who answers the questions a server asks during one call. `ended` is cancelled when the
/// call ends (or the server withdraws its question): the question is closed then.
pub trait Asker: Send + Sync {
    fn ask(
        &self,
        question: Question,
        ended: CancellationToken,
    ) -> BoxFuture<'static, Result<Reply, String>>;
}

/// The call a question comes from, among Seed's calls in flight on the connection that asked
/// (`true` for each that has someone to ask): the index of the one call in flight, or why no
/// call can be told.
pub fn attribute(in_flight: &[bool]) -> Result<usize, String> {
    match in_flight {
        [] => Err("no call of seed's is in flight on this connection".to_owned()),
        [true] => Ok(0),
        [false] => Err("the call in flight on this connection has no one to ask".to_owned()),
        several => Err(format!(
            "{} of seed's calls are in flight on this connection and the request does not say \
             which one it belongs to; seed answers only a question it can tie to its call",
            several.len()
        )),
    }
}

/// Why an answer's content does not fit the requested schema: the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentProblem {
    /// `content`, or `content.NAME` for one field.
    pub field: String,
    pub problem: String,
}

fn problem(field: &str, text: impl Into<String>) -> ContentProblem {
    ContentProblem {
        field: if field.is_empty() {
            "content".to_owned()
        } else {
            format!("content.{field}")
        },
        problem: text.into(),
    }
}

/// The values an enum field (single or multiple select) allows: `enum`, or the `const` of each
/// `oneOf`/`anyOf` option.
fn allowed_values(schema: &Value) -> Option<Vec<&Value>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().collect());
    }
    ["oneOf", "anyOf"].iter().find_map(|key| {
        schema.get(*key).and_then(Value::as_array).map(|options| {
            options
                .iter()
                .filter_map(|option| option.get("const"))
                .collect()
        })
    })
}

fn number_bounds(name: &str, schema: &Value, number: f64) -> Result<(), ContentProblem> {
    if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
        && number < minimum
    {
        return Err(problem(name, format!("must be at least {minimum}")));
    }
    if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64)
        && number > maximum
    {
        return Err(problem(name, format!("must be at most {maximum}")));
    }
    Ok(())
}

fn check_field(name: &str, schema: &Value, value: &Value) -> Result<(), ContentProblem> {
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("string");
    match kind {
        "string" => {
            let Some(text) = value.as_str() else {
                return Err(problem(name, "must be a string"));
            };
            if let Some(allowed) = allowed_values(schema)
                && !allowed.contains(&value)
            {
                return Err(problem(name, format!("must be one of {}", list(&allowed))));
            }
            let n_chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && n_chars < min
            {
                return Err(problem(name, format!("must be at least {min} characters")));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && n_chars > max
            {
                return Err(problem(name, format!("must be at most {max} characters")));
            }
            Ok(())
        }
        "number" => {
            let Some(number) = value.as_f64() else {
                return Err(problem(name, "must be a number"));
            };
            number_bounds(name, schema, number)
        }
        "integer" => {
            let Some(number) = value
                .as_i64()
                .map(|n| n as f64)
                .or_else(|| value.as_f64().filter(|n| n.fract() == 0.0 && n.is_finite()))
            else {
                return Err(problem(name, "must be an integer"));
            };
            number_bounds(name, schema, number)
        }
        "boolean" => match value {
            Value::Bool(_) => Ok(()),
            _ => Err(problem(name, "must be true or false")),
        },
        "array" => {
            let Some(items) = value.as_array() else {
                return Err(problem(name, "must be a list"));
            };
            let allowed = schema.get("items").and_then(allowed_values);
            if let Some(allowed) = allowed
                && let Some(stray) = items.iter().find(|item| !allowed.contains(item))
            {
                return Err(problem(
                    name,
                    format!("{stray} is not one of {}", list(&allowed)),
                ));
            }
            let n_items = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && n_items < min
            {
                return Err(problem(name, format!("must have at least {min} items")));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n_items > max
            {
                return Err(problem(name, format!("must have at most {max} items")));
            }
            Ok(())
        }
        other => Err(problem(
            name,
            format!("asks for a {other}, which seed cannot give"),
        )),
    }
}

fn list(values: &[&Value]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks an answer's content against the schema the server requested: an object with only the
/// fields it asks for, every required one, each of its type (string, number, integer, boolean,
/// one of an enum, a list of enum values) and within its bounds.
pub fn check_content(schema: &Value, content: &Value) -> Result<(), ContentProblem> {
    let Some(fields) = content.as_object() else {
        return Err(problem("", "must be an object"));
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, value) in fields {
        let Some(field_schema) = properties.get(name) else {
            return Err(problem(name, "is not asked for"));
        };
        check_field(name, field_schema, value)?;
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect::<Vec<_>>())
        .unwrap_or_default();
    if let Some(missing) = required.iter().find(|name| !fields.contains_key(**name)) {
        return Err(problem(missing, "is required"));
    }
    Ok(())
}

/// What a question needs once the runtime runs: where to announce it, how long it may wait,
/// the clock.
struct Ready {
    publisher: Publisher,
    timeout: Option<Duration>,
    clock: Arc<dyn Fn() -> i64 + Send + Sync>,
}

type Key = (SessionId, String);

/// The questions waiting for a person, and the runtime's part, set once it runs
/// ([`People::connect`]). One per [`crate::McpServers`].
#[derive(Default)]
pub struct People {
    ready: watch::Sender<Option<Arc<Ready>>>,
    /// Where an answer recorded for a pending question goes: to the task that asked, which
    /// replies to the server. By session and call id (a call asks one question at a time).
    waiting: Mutex<HashMap<Key, oneshot::Sender<ElicitationRow>>>,
}

impl std::fmt::Debug for People {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("People").finish_non_exhaustive()
    }
}

impl People {
    /// Questions asked from now on are announced on `publisher` and wait at most `timeout`
    /// (`None`: as long as their call does). Questions asked before wait for this.
    pub fn connect(
        &self,
        publisher: Publisher,
        timeout: Option<Duration>,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    ) {
        self.ready.send_replace(Some(Arc::new(Ready {
            publisher,
            timeout,
            clock,
        })));
    }

    /// Hands an answer recorded on `row` to the call that waits for it.
    pub fn answered(&self, row: ElicitationRow) {
        let key = (row.session_id, row.tool_call_id.clone());
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key);
        if let Some(waiter) = waiter {
            let _ = waiter.send(row);
        }
    }

    fn forget(&self, key: &Key) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(key);
    }
}

/// Asks the person behind one call of a session's run, on the approvals path.
#[derive(Debug)]
pub struct PersonAsker {
    pub people: Arc<People>,
    pub store: Store,
    pub session_id: SessionId,
    pub run_id: RunId,
    pub tool_call_id: String,
    pub verb: String,
    pub arguments: Value,
}

impl Asker for PersonAsker {
    fn ask(
        &self,
        question: Question,
        ended: CancellationToken,
    ) -> BoxFuture<'static, Result<Reply, String>> {
        let people = Arc::clone(&self.people);
        let store = self.store.clone();
        let asked = NewElicitation {
            session_id: self.session_id,
            run_id: self.run_id,
            tool_call_id: self.tool_call_id.clone(),
            verb: self.verb.clone(),
            arguments: self.arguments.clone(),
            message: question.message,
            requested_schema: question.requested_schema,
            deadline_at_ms: None,
        };
        Box::pin(async move { ask(people, store, asked, ended).await })
    }
}

async fn ask(
    people: Arc<People>,
    store: Store,
    mut asked: NewElicitation,
    ended: CancellationToken,
) -> Result<Reply, String> {
    let mut ready = people.ready.subscribe();
    let ready = tokio::select! {
        ready = ready.wait_for(Option::is_some) => match ready {
            Ok(ready) => ready.clone().expect("wait_for returned a set value"),
            Err(_) => return Err("seed is shutting down".to_owned()),
        },
        () = ended.cancelled() => return Err("the call ended first".to_owned()),
    };
    let now_ms = (ready.clock)();
    let timeout_ms = ready
        .timeout
        .map(|timeout| i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX));
    asked.deadline_at_ms = timeout_ms.map(|timeout_ms| now_ms.saturating_add(timeout_ms));
    let key: Key = (asked.session_id, asked.tool_call_id.clone());
    let (sender, answer) = oneshot::channel();
    {
        let mut waiting = people
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if waiting.contains_key(&key) {
            return Err("this call's previous question is still waiting for an answer".to_owned());
        }
        waiting.insert(key.clone(), sender);
    }
    let row = match store.ask_elicitation(asked.clone(), now_ms).await {
        Ok(AskOutcome::Asked(row)) => *row,
        Ok(AskOutcome::Busy) => {
            people.forget(&key);
            return Err("this call's previous question is still waiting for an answer".to_owned());
        }
        Err(error) => {
            people.forget(&key);
            return Err(format!("seed could not record the question: {error}"));
        }
    };
    ready.publisher.publish(Notification::ElicitationPending {
        session_id: row.session_id,
        run_id: row.run_id,
        call_id: row.tool_call_id.clone(),
        name: row.verb.clone(),
        arguments: row.arguments.clone(),
        message: row.message.clone(),
        requested_schema: row.requested_schema.clone(),
    });
    let timed_out = async {
        match ready.timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let closing = tokio::select! {
        answered = answer => match answered {
            Ok(row) => return Ok(Reply::of(&row)),
            Err(_) => ElicitationAnswer::Close {
                reason: "seed lost track of the question".to_owned(),
            },
        },
        () = timed_out => ElicitationAnswer::TimeOut {
            reason: format!("no answer in {}", duration_text(timeout_ms.unwrap_or(0))),
        },
        () = ended.cancelled() => ElicitationAnswer::Close {
            reason: "the call ended before anyone answered".to_owned(),
        },
    };
    people.forget(&key);
    // An answer recorded at the same moment wins: the store keeps the first.
    let outcome = store
        .answer_elicitation(row.session_id, &row.tool_call_id, closing, (ready.clock)())
        .await
        .map_err(|error| format!("seed could not record the end of the question: {error}"))?;
    let row = match outcome {
        AnswerOutcome::Answered(row) | AnswerOutcome::NotPending(Some(row)) => row,
        AnswerOutcome::NotPending(None) => return Ok(Reply::Cancel),
    };
    ready.publisher.publish(Notification::SessionChanged {
        session_id: row.session_id,
        reason: "approval",
        seqs: None,
    });
    Ok(Reply::of(&row))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The one call in flight asked; none, several, or one that cannot ask, and no call is told.
    #[test]
    fn a_question_belongs_to_the_one_call_in_flight() {
        assert_eq!(attribute(&[true]), Ok(0));
        for in_flight in [&[][..], &[false], &[true, true], &[true, false]] {
            let refused = attribute(in_flight).expect_err("no call is told");
            assert!(refused.contains("in flight"), "{refused}");
        }
        assert!(
            attribute(&[true, true])
                .expect_err("two calls")
                .starts_with("2 of seed's calls")
        );
    }

    /// The content fits the requested schema field by field, or the field at fault is named.
    #[test]
    fn content_is_checked_against_the_requested_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "check": {"type": "boolean"},
                "integer": {"type": "integer", "minimum": 1, "maximum": 100},
                "number": {"type": "number", "maximum": 1000},
                "friend": {"type": "string", "enum": ["Monica", "Joey"]},
                "hero": {"type": "string", "oneOf": [{"const": "hero-1", "title": "Superman"}]},
                "fish": {"type": "array", "maxItems": 2,
                         "items": {"anyOf": [{"const": "fish-1"}, {"const": "fish-2"}]}},
            },
            "required": ["name"],
        });
        check_content(
            &schema,
            &json!({"name": "Ada", "check": true, "integer": 7, "number": 3.5,
                    "friend": "Joey", "hero": "hero-1", "fish": ["fish-2"]}),
        )
        .expect("it fits");
        for (content, field, said) in [
            (json!("Ada"), "content", "must be an object"),
            (json!({}), "content.name", "is required"),
            (
                json!({"name": "Ada", "age": 3}),
                "content.age",
                "is not asked for",
            ),
            (json!({"name": 5}), "content.name", "must be a string"),
            (json!({"name": ""}), "content.name", "at least 1 characters"),
            (
                json!({"name": "A", "check": "yes"}),
                "content.check",
                "true or false",
            ),
            (
                json!({"name": "A", "integer": 1.5}),
                "content.integer",
                "an integer",
            ),
            (
                json!({"name": "A", "integer": 101}),
                "content.integer",
                "at most 100",
            ),
            (
                json!({"name": "A", "number": "3"}),
                "content.number",
                "a number",
            ),
            (
                json!({"name": "A", "friend": "Ross"}),
                "content.friend",
                "one of",
            ),
            (
                json!({"name": "A", "hero": "hero-9"}),
                "content.hero",
                "one of",
            ),
            (
                json!({"name": "A", "fish": ["fish-3"]}),
                "content.fish",
                "not one of",
            ),
            (
                json!({"name": "A", "fish": ["fish-1", "fish-2", "fish-1"]}),
                "content.fish",
                "at most 2 items",
            ),
        ] {
            let refused = check_content(&schema, &content).expect_err("it does not fit");
            assert_eq!(refused.field, field, "{content}");
            assert!(refused.problem.contains(said), "{content}: {refused:?}");
        }
    }
}
