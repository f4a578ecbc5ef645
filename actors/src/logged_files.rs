//! A session's durable files as its harness commits to them, with the log following commit by
//! commit: each commit that adds entries writes their log events in the same transaction, and
//! subscribers hear of a step only after its commit — the events it made visible (by seq), the
//! tool calls of a committed response, and the text of the response in flight once `pi.live`
//! (or the response itself) holds it. Nothing a viewer sees can be lost by a crash.

use std::sync::{Arc, Mutex};

use seed_durable::record::{LIVE_DOCUMENT, LiveDocument, LiveState};
use seed_durable::{Append, Batch, DurableFs, EntryBody, FileName};
use seed_events::body::kind;
use seed_events::{EventBody, NewEvent, RunId, SessionEvent, SessionId};
use seed_projections::store_to_log::entry_events;
use seed_store::{Projection, SessionFiles};
use serde::Deserialize;

use crate::bus::{Notification, Publisher, SeqRange};

/// The run a session's commits belong to now: a harness outlives a run, and each run sets
/// itself here. With traces exported, it holds the run's `traceparent` until a commit keeps it
/// with the run (the run's first commit, in the same transaction).
#[derive(Debug, Clone)]
pub struct RunCell(Arc<Mutex<CurrentRun>>);

#[derive(Debug)]
struct CurrentRun {
    run_id: RunId,
    /// The run span's `traceparent`, not kept yet.
    trace_parent: Option<String>,
}

impl RunCell {
    pub fn new(run_id: RunId) -> RunCell {
        RunCell(Arc::new(Mutex::new(CurrentRun {
            run_id,
            trace_parent: None,
        })))
    }

    fn current(&self) -> std::sync::MutexGuard<'_, CurrentRun> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `run_id` the run of the commits to come (with no `traceparent` to keep).
    pub fn set(&self, run_id: RunId) {
        *self.current() = CurrentRun {
            run_id,
            trace_parent: None,
        };
    }

    pub fn get(&self) -> RunId {
        self.current().run_id
    }

    /// Has the next commit keep `traceparent` with the run.
    pub fn keep_trace_parent(&self, traceparent: Option<String>) {
        self.current().trace_parent = traceparent;
    }

    /// The `traceparent` no commit kept yet, taken: the caller keeps it.
    pub fn take_trace_parent(&self) -> Option<String> {
        self.current().trace_parent.take()
    }

    /// The run, and the `traceparent` a commit is to keep with it (taken).
    fn take(&self) -> (RunId, Option<String>) {
        let mut current = self.current();
        (current.run_id, current.trace_parent.take())
    }

    /// Gives back a `traceparent` a commit did not keep after all.
    fn give_back(&self, run_id: RunId, traceparent: String) {
        let mut current = self.current();
        if current.run_id == run_id && current.trace_parent.is_none() {
            current.trace_parent = Some(traceparent);
        }
    }
}

/// How much of the response in flight subscribers have been sent.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    bytes: usize,
    chars: usize,
}

/// A session's [`SessionFiles`], projecting each commit's entries to the log in its own
/// transaction and telling subscribers once it committed.
pub struct LoggedFiles {
    files: SessionFiles,
    publisher: Publisher,
    clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    run: RunCell,
    /// The verbs whose call's result a delegated child's end writes to the log
    /// ([`crate::verb::TurnEffect::Delegates`]).
    delegating: Vec<String>,
    /// The text of the response in flight that deltas have carried so far.
    sent: Mutex<Sent>,
}

impl std::fmt::Debug for LoggedFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggedFiles")
            .field("session_id", &self.files.session_id())
            .finish_non_exhaustive()
    }
}

impl LoggedFiles {
    /// `delegating`: the names of the verbs that delegate (see `delivered_calls`).
    pub fn new(
        files: SessionFiles,
        publisher: Publisher,
        clock: Arc<dyn Fn() -> i64 + Send + Sync>,
        run: RunCell,
        delegating: Vec<String>,
    ) -> LoggedFiles {
        LoggedFiles {
            files,
            publisher,
            clock,
            run,
            delegating,
            sent: Mutex::default(),
        }
    }

    fn session_id(&self) -> SessionId {
        self.files.session_id()
    }

    /// See [`SessionFiles::take_newest_line_written`].
    pub fn take_newest_line_written(&self) -> Option<i64> {
        self.files.take_newest_line_written()
    }

    /// Tells subscribers what `batch`'s commit made visible: `placed`, its events in the log.
    fn tell(&self, batch: &Batch, placed: &[SessionEvent], run_id: RunId) {
        let session_id = self.session_id();
        let listened = self.publisher.is_listened_to();
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        let delta = |text: &str, sent: &mut Sent| {
            let Some(new) = text.get(sent.bytes..).filter(|new| !new.is_empty()) else {
                return;
            };
            let offset_chars = sent.chars;
            sent.bytes = text.len();
            sent.chars += new.chars().count();
            if listened {
                self.publisher.publish(Notification::TextDelta {
                    session_id,
                    run_id,
                    offset_chars,
                    text: new.to_owned(),
                });
            }
        };
        for document in batch.documents() {
            if document.name != LIVE_DOCUMENT {
                continue;
            }
            // Cleared (`null`) by the response's commit; or streaming, stopped or failed, with
            // the text so far: what it holds beyond what was sent.
            let live = LiveDocument::deserialize(&document.value).ok();
            if let Some(live) = &live {
                delta(&live.text, &mut sent);
            }
            let streaming = live.is_some_and(|live| live.state == LiveState::Streaming);
            if !streaming && !batch.entries().iter().any(is_response) {
                // Stopped or failed: the next response starts afresh.
                *sent = Sent::default();
            }
        }
        for entry in batch.entries() {
            if let EntryBody::Assistant { message, .. } = &entry.body {
                // A response that completed within an interval never reached `pi.live`.
                if listened && message.text_len() > sent.bytes {
                    delta(&message.text(), &mut sent);
                }
                *sent = Sent::default();
            }
        }
        drop(sent);
        if !listened {
            return;
        }
        if let Some(seqs) = SeqRange::of(placed) {
            self.publisher.publish(Notification::SessionChanged {
                session_id,
                reason: "events",
                seqs: Some(seqs),
            });
        }
        // The calls of a committed response, with the seqs of their events (in the same order).
        let calls = batch.entries().iter().flat_map(|entry| match &entry.body {
            EntryBody::Assistant { message, .. } => message.tool_calls(),
            _ => Vec::new(),
        });
        let seqs = placed
            .iter()
            .filter(|event| event.kind == kind::TOOL_CALL)
            .map(|event| event.seq);
        for (call, seq) in calls.zip(seqs) {
            self.publisher.publish(Notification::ToolCall {
                session_id,
                run_id,
                seq,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }
    }
}

/// Whether `entry` is a model's response.
fn is_response(entry: &seed_durable::Entry) -> bool {
    matches!(entry.body, EntryBody::Assistant { .. })
}

/// The calls among `events` whose result a delegated child's end writes to the log itself (calls
/// of the verbs named in `delegating`): the store's own result for such a call (a recovered
/// call's, a restart's) then goes to the log as a notice when the log answers the call already.
pub(crate) fn delivered_calls(events: &[NewEvent], delegating: &[String]) -> Vec<String> {
    if delegating.is_empty() {
        return Vec::new();
    }
    // Only a result's content is read back into its body: an event's kind says what it is.
    events
        .iter()
        .filter(|event| event.kind == kind::TOOL_RESULT)
        .filter_map(|event| match event.body() {
            EventBody::ToolResult(result) if delegating.contains(&result.tool_name) => {
                Some(result.tool_call_id)
            }
            _ => None,
        })
        .collect()
}

impl DurableFs for LoggedFiles {
    type Error = seed_store::Error;

    fn read(
        &self,
        file: FileName,
    ) -> impl std::future::Future<Output = Result<Vec<String>, Self::Error>> + Send {
        self.files.read(file)
    }

    fn open_lines(
        &self,
    ) -> impl std::future::Future<Output = Result<seed_durable::OpenLines, Self::Error>> + Send
    {
        self.files.open_lines()
    }

    fn keep(
        &self,
        kept: &seed_durable::Kept,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.files.keep(kept)
    }

    /// Lines committed other than by the harness carry no log events.
    fn commit(
        &self,
        batch: Vec<Append>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.files.commit(batch)
    }

    async fn commit_batch(&self, batch: &Batch) -> Result<(), Self::Error> {
        let session_id = self.session_id();
        let (run_id, trace_parent) = self.run.take();
        let now_ms = (self.clock)();
        let events: Vec<NewEvent> = batch
            .entries()
            .iter()
            .flat_map(|entry| entry_events(entry, Some(run_id), now_ms))
            .collect();
        let projection = (!events.is_empty()).then(|| Projection {
            session_id,
            delivered_calls: delivered_calls(&events, &self.delegating),
            events,
        });
        let placed = self
            .files
            .commit_projecting_traced(
                batch.to_appends(),
                projection,
                trace_parent
                    .clone()
                    .map(|traceparent| (run_id, traceparent)),
            )
            .await;
        let placed = match placed {
            Ok(placed) => placed,
            Err(error) => {
                if let Some(traceparent) = trace_parent {
                    self.run.give_back(run_id, traceparent);
                }
                return Err(error);
            }
        };
        self.tell(batch, &placed, run_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_events::EventRole;
    use serde_json::json;

    #[test]
    fn a_runs_traceparent_goes_with_one_commit_and_comes_back_if_that_commit_is_refused() {
        let (first, second) = (RunId::from_u128(1), RunId::from_u128(2));
        let cell = RunCell::new(first);
        cell.keep_trace_parent(Some("00-a-b-01".to_owned()));
        assert_eq!(cell.take(), (first, Some("00-a-b-01".to_owned())));
        assert_eq!(cell.take(), (first, None), "one commit keeps it");

        // A refused commit gives it back to the next one.
        cell.give_back(first, "00-a-b-01".to_owned());
        assert_eq!(cell.take_trace_parent().as_deref(), Some("00-a-b-01"));

        // Not to a later run's commits, and not over the later run's own.
        cell.set(second);
        cell.give_back(first, "00-a-b-01".to_owned());
        assert_eq!(cell.take(), (second, None));
        cell.keep_trace_parent(Some("00-c-d-01".to_owned()));
        cell.give_back(second, "00-a-b-01".to_owned());
        assert_eq!(cell.take_trace_parent().as_deref(), Some("00-c-d-01"));

        // A new run starts with nothing to keep.
        cell.keep_trace_parent(Some("00-c-d-01".to_owned()));
        cell.set(first);
        assert_eq!(cell.take(), (first, None));
    }

    #[test]
    fn a_delegate_calls_result_is_delivered_by_the_child() {
        let event = |kind: &str, content| NewEvent {
            kind: kind.to_owned(),
            role: Some(EventRole::Tool),
            actor: Some("runtime".to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            pi_entry_id: Some(1),
            created_at_ms: 0,
        };
        let result = |call_id: &str, tool_name: &str| {
            event(
                "tool_result",
                json!({
                    "tool_call_id": call_id,
                    "tool_name": tool_name,
                    "content": "restarted",
                    "is_error": true,
                }),
            )
        };
        let events = [
            result("c1", "delegate"),
            result("c2", "read"),
            event(
                "tool_call",
                json!({ "id": "c3", "name": "delegate", "arguments": {} }),
            ),
            result("c4", "delegate"),
            event("notice", json!({ "text": "delegate" })),
        ];
        assert_eq!(
            delivered_calls(&events, &["delegate".to_owned()]),
            ["c1", "c4"]
        );
        assert!(delivered_calls(&events, &[]).is_empty());
    }
}
