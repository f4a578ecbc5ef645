//! Streaming one response: the provider's events are read into a [`Partial`], which is
//! committed to `pi.live` at most every live interval (a timer commits text that has waited that
//! long when the clock can sleep), until the response completes, fails or the stop fires.

use futures::future::{BoxFuture, Either, select};
use futures::{FutureExt, StreamExt};
use seed_providers::{
    AssistantMessage, Provider, ProviderError, ProviderErrorKind, Request, StreamEvent, ToolCall,
};

use super::{Harness, Result};
use crate::fs::DurableFs;
use crate::record::{LIVE_DOCUMENT, LiveDocument, LiveState, ModelTaskState, Task, TurnDocument};
use crate::state::Batch;
use crate::stop::StopSignal;

/// What woke the stream's reader.
enum Wake {
    Event(Option<StreamEvent>),
    Stopped,
    /// The partial text has waited an interval for its commit.
    Flush,
}

/// How a response's stream ended.
pub(super) enum Streamed {
    Done(AssistantMessage),
    Stopped(Partial),
    Failed {
        error: ProviderError,
        partial: Partial,
    },
}

/// What a response has streamed so far: `pi.live`'s content.
#[derive(Debug, Default)]
pub(super) struct Partial {
    pub(super) text: String,
    thinking: String,
    tool_calls: Vec<ToolCall>,
}

impl Partial {
    pub(super) fn live(
        &self,
        doc: &TurnDocument,
        state: LiveState,
        error: Option<String>,
    ) -> LiveDocument {
        LiveDocument {
            request_id: doc.request_id.clone(),
            text: self.text.clone(),
            thinking: self.thinking.clone(),
            tool_calls: self.tool_calls.clone(),
            state,
            error,
        }
    }
}

impl<F: DurableFs, P: Provider> Harness<F, P> {
    /// Reads the response stream, committing what it has streamed (text, reasoning, tool calls)
    /// to `pi.live` at most every `live_interval`, until it completes, fails, or the stop fires.
    /// How long the first chunk took goes to `first_chunk_after` (for its trace span).
    pub(super) async fn stream(
        &mut self,
        doc: &TurnDocument,
        step: u32,
        request: Request,
        stop: &StopSignal,
        first_chunk_after: &mut Option<std::time::Duration>,
    ) -> Result<Streamed> {
        let requested_at = self.clock.now();
        let mut events = self.provider.stream(request);
        let mut stopped = stop.stopped();
        let mut partial = Partial::default();
        // The first partial text is committed one interval after the request left: a response
        // that completes sooner costs no commit for it.
        let mut live_committed = false;
        let mut last_live_at = self.clock.now();
        // Text that arrived since the last commit of `pi.live` waits at most one interval for
        // the next: when the clock can sleep, a timer commits it even if the stream goes quiet.
        // The timer is armed only when the stream has nothing ready: a response whose events
        // come one after another (a model that answers at once) never arms one.
        let mut uncommitted = false;
        let mut flush: Option<BoxFuture<'static, ()>> = None;
        loop {
            let wake = match events.next().now_or_never() {
                Some(event) => Wake::Event(event),
                None => {
                    if uncommitted && flush.is_none() {
                        let since = self.clock.now().saturating_sub(last_live_at);
                        flush = self
                            .clock
                            .sleep(self.config.live_interval.saturating_sub(since));
                    }
                    let next = select(events.next(), &mut stopped);
                    match flush.as_mut() {
                        Some(timer) => match select(next, timer).await {
                            Either::Left((Either::Left((event, _)), _)) => Wake::Event(event),
                            Either::Left((Either::Right(((), _)), _)) => Wake::Stopped,
                            Either::Right(((), _)) => Wake::Flush,
                        },
                        None => match next.await {
                            Either::Left((event, _)) => Wake::Event(event),
                            Either::Right(((), _)) => Wake::Stopped,
                        },
                    }
                }
            };
            let event = match wake {
                // Dropping the stream cancels the request.
                Wake::Stopped => {
                    return Ok(Streamed::Stopped(partial));
                }
                Wake::Flush => {
                    flush = None;
                    uncommitted = false;
                    self.commit_live(doc, step, &partial, live_committed)
                        .await?;
                    live_committed = true;
                    last_live_at = self.clock.now();
                    continue;
                }
                Wake::Event(event) => event,
            };
            if first_chunk_after.is_none() {
                *first_chunk_after = Some(self.clock.now().saturating_sub(requested_at));
            }
            match event {
                None => {
                    let error = ProviderError::new(
                        ProviderErrorKind::Malformed,
                        "the stream ended without a final message",
                    );
                    return Ok(Streamed::Failed { error, partial });
                }
                Some(StreamEvent::Done(message)) => return Ok(Streamed::Done(message)),
                Some(StreamEvent::Error(error)) => {
                    return Ok(Streamed::Failed { error, partial });
                }
                Some(StreamEvent::TextDelta(delta)) => partial.text.push_str(&delta),
                Some(StreamEvent::ThinkingDelta(delta)) => partial.thinking.push_str(&delta),
                Some(StreamEvent::ToolCall(call)) => partial.tool_calls.push(call),
                Some(StreamEvent::Usage(_)) => continue,
            }
            let now = self.clock.now();
            if now.saturating_sub(last_live_at) >= self.config.live_interval {
                flush = None;
                uncommitted = false;
                self.commit_live(doc, step, &partial, live_committed)
                    .await?;
                live_committed = true;
                last_live_at = now;
            } else {
                uncommitted = true;
            }
        }
    }

    /// Commits what the response in flight has streamed to `pi.live` (the first time, with the
    /// model task's line that says it is streaming).
    async fn commit_live(
        &mut self,
        doc: &TurnDocument,
        step: u32,
        partial: &Partial,
        live_committed: bool,
    ) -> Result<()> {
        let mut batch = Batch::new(&self.state);
        if !live_committed {
            batch.task(Task::Model {
                request_id: doc.request_id.clone(),
                step,
                state: ModelTaskState::Streaming,
            });
        }
        batch.document(
            LIVE_DOCUMENT,
            Some(&partial.live(doc, LiveState::Streaming, None)),
        );
        self.commit(batch).await
    }
}
