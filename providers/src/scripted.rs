//! The scripted model: replays a script of responses, the default when no key is configured and
//! the model of every test and simulation.
//!
//! A response streams the way a real provider's does (text in small deltas, tool calls whole,
//! usage, then the final message), so the code that consumes streams is tested on the same path
//! it runs on in production. Nothing here reads the clock or a random source; the only waiting is
//! the optional delay between events, done by a helper thread per delay.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use serde::{Deserialize, Serialize};

use crate::message::{AssistantBlock, AssistantMessage, Request, StopReason, ToolCall, Usage};
use crate::provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent};

/// The number of characters in each delta unless `with_chunk_chars` says otherwise.
const CHUNK_CHARS_DEFAULT: usize = 8;

/// One scripted response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ScriptedStep {
    /// Streams the message: each Text block as deltas of `chunk_chars` characters (each Thinking
    /// block likewise as ThinkingDelta), each tool call as a ToolCall event, then Usage, then
    /// Done(message).
    Respond(AssistantMessage),
    /// Streams `text` as deltas, then ends with Error(error) (a response that breaks mid-way).
    FailAfter {
        /// The text streamed before the failure.
        text: String,
        /// The error the stream ends with.
        error: ProviderError,
    },
    /// Streams `text` as deltas, then never ends (for stop tests): the stream stays pending
    /// forever.
    Hang {
        /// The text streamed before the stream hangs.
        text: String,
    },
}

/// The function a `from_fn` script answers with.
type RespondFn = dyn Fn(&Request, usize) -> ScriptedStep + Send + Sync;

/// Where the steps come from.
enum Script {
    /// The n-th request gets the n-th step.
    Steps(Vec<ScriptedStep>),
    /// Each request gets what the function returns for it and its index.
    Function(Box<RespondFn>),
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Steps(steps) => f.debug_tuple("Steps").field(steps).finish(),
            Self::Function(_) => f.write_str("Function(..)"),
        }
    }
}

/// What every clone of a `ScriptedProvider` shares.
#[derive(Debug)]
struct Shared {
    script: Script,
    /// Every request received, in order; a request's index is its position here. One lock
    /// assigns the index and records the request, so indexes and order always agree, whichever
    /// clone or thread a request comes from.
    requests: Mutex<Vec<Request>>,
    /// Requests received, recorded or not.
    n_requests: std::sync::atomic::AtomicUsize,
}

/// The scripted model. Clones share the script and the record of requests.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    shared: Arc<Shared>,
    /// Characters in each text or thinking delta; at least 1.
    chunk_chars: usize,
    /// The wait before each event after the first; zero for none.
    delta_delay: Duration,
    /// Whether requests are kept for `requests()` (benches turn it off: a clone per request).
    record: bool,
}

impl ScriptedProvider {
    /// Answers the n-th request with the n-th step; requests past the end get
    /// Error(ScriptExhausted).
    pub fn new(steps: Vec<ScriptedStep>) -> Self {
        Self::with_script(Script::Steps(steps))
    }

    /// Answers each request with `respond(&request, request_index)`: deterministic scripts keyed
    /// by what the request holds. Indexes count from 0.
    pub fn from_fn(
        respond: impl Fn(&Request, usize) -> ScriptedStep + Send + Sync + 'static,
    ) -> Self {
        Self::with_script(Script::Function(Box::new(respond)))
    }

    fn with_script(script: Script) -> Self {
        Self {
            shared: Arc::new(Shared {
                script,
                requests: Mutex::new(Vec::new()),
                n_requests: std::sync::atomic::AtomicUsize::new(0),
            }),
            record: true,
            chunk_chars: CHUNK_CHARS_DEFAULT,
            delta_delay: Duration::ZERO,
        }
    }

    /// Streams text and thinking in deltas of `n` characters (8 by default).
    ///
    /// # Panics
    ///
    /// If `n` is 0.
    pub fn with_chunk_chars(self, n: usize) -> Self {
        assert!(n > 0, "chunk_chars must be at least 1");
        Self {
            chunk_chars: n,
            ..self
        }
    }

    /// Keeps no copy of the requests: `requests()` stays empty, `n_requests()` still counts.
    /// For benches, where copying every request would be measured too.
    pub fn without_recording(self) -> Self {
        Self {
            record: false,
            ..self
        }
    }

    /// Waits `delay` before each event after the first (zero by default: no waiting).
    pub fn with_delta_delay(self, delay: Duration) -> Self {
        Self {
            delta_delay: delay,
            ..self
        }
    }

    /// Every request received so far, in order (clones).
    pub fn requests(&self) -> Vec<Request> {
        self.lock_requests().clone()
    }

    /// How many requests have been received so far.
    pub fn n_requests(&self) -> usize {
        self.shared
            .n_requests
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn lock_requests(&self) -> MutexGuard<'_, Vec<Request>> {
        // A panic while holding the lock cannot leave the Vec half-pushed: keep going.
        self.shared
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The events of one step, made as the stream is read (a long text is not first copied
    /// into a list of deltas), and whether the stream then hangs instead of ending.
    fn events(&self, step: ScriptedStep) -> (ScriptedEvents, bool) {
        let chunk_chars = self.chunk_chars;
        let deltas = move |text: String, delta: fn(String) -> StreamEvent| {
            Chunks::new(text, chunk_chars).map(delta)
        };
        match step {
            ScriptedStep::Respond(message) => {
                let blocks: Vec<ScriptedEvents> = message
                    .content
                    .iter()
                    .map(|block| -> ScriptedEvents {
                        match block {
                            AssistantBlock::Text { text } => {
                                Box::new(deltas(text.clone(), StreamEvent::TextDelta))
                            }
                            AssistantBlock::Thinking { thinking, .. } => {
                                Box::new(deltas(thinking.clone(), StreamEvent::ThinkingDelta))
                            }
                            AssistantBlock::ToolCall(call) => {
                                Box::new(std::iter::once(StreamEvent::ToolCall(call.clone())))
                            }
                            AssistantBlock::RedactedThinking { .. } => Box::new(std::iter::empty()),
                        }
                    })
                    .collect();
                let end = [
                    StreamEvent::Usage(message.usage),
                    StreamEvent::Done(message),
                ];
                (Box::new(blocks.into_iter().flatten().chain(end)), false)
            }
            ScriptedStep::FailAfter { text, error } => {
                let events = deltas(text, StreamEvent::TextDelta);
                (Box::new(events.chain([StreamEvent::Error(error)])), false)
            }
            ScriptedStep::Hang { text } => (Box::new(deltas(text, StreamEvent::TextDelta)), true),
        }
    }
}

/// The events of a scripted response, in order.
type ScriptedEvents = Box<dyn Iterator<Item = StreamEvent> + Send>;

impl Provider for ScriptedProvider {
    /// The scripted model takes images (the capability table's `scripted` row), so tests see
    /// what an image becomes.
    fn takes_images(&self, model: &str) -> bool {
        crate::capabilities::model_takes_images("scripted", model).unwrap_or(false)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let request_idx = {
            let mut requests = self.lock_requests();
            if self.record {
                requests.push(request.clone());
            }
            // Under the lock, so indexes and the record's order agree.
            self.shared
                .n_requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        };
        tracing::debug!(request_idx, model = %request.model, "scripted request");
        // The function runs outside the lock, so it may itself look at `requests()`.
        let step = match &self.shared.script {
            Script::Steps(steps) => steps.get(request_idx).cloned(),
            Script::Function(respond) => Some(respond(&request, request_idx)),
        };
        let (events, hangs) = match step {
            Some(step) => self.events(step),
            None => {
                let n_steps = match &self.shared.script {
                    Script::Steps(steps) => steps.len(),
                    Script::Function(_) => 0,
                };
                let error = ProviderError::new(
                    ProviderErrorKind::ScriptExhausted,
                    format!("the script has {n_steps} steps and none for request {request_idx}"),
                );
                (
                    Box::new(std::iter::once(StreamEvent::Error(error))) as ScriptedEvents,
                    false,
                )
            }
        };

        let delay = self.delta_delay;
        let events = stream::iter(events);
        let paced = if delay.is_zero() {
            events.boxed()
        } else {
            events
                .enumerate()
                .then(move |(event_idx, event)| async move {
                    if event_idx > 0 {
                        if tokio::runtime::Handle::try_current().is_ok() {
                            // On a runtime, its timer: virtual under a simulation's paused
                            // clock.
                            tokio::time::sleep(delay).await;
                        } else {
                            Delay::new(delay).await;
                        }
                    }
                    event
                })
                .boxed()
        };
        if hangs {
            paced.chain(stream::pending()).boxed()
        } else {
            paced
        }
    }
}

/// `text` in pieces of `chunk_chars` characters (not bytes); nothing for empty text.
struct Chunks {
    text: String,
    /// The byte where the next piece starts.
    at: usize,
    chunk_chars: usize,
}

impl Chunks {
    fn new(text: String, chunk_chars: usize) -> Self {
        Self {
            text,
            at: 0,
            chunk_chars,
        }
    }
}

impl Iterator for Chunks {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let rest = &self.text[self.at..];
        if rest.is_empty() {
            return None;
        }
        let len = rest
            .char_indices()
            .nth(self.chunk_chars)
            .map_or(rest.len(), |(idx, _)| idx);
        self.at += len;
        Some(rest[..len].to_owned())
    }
}

/// A future that is ready once `duration` has passed, timed by a helper thread started on the
/// first poll: the pacing of a stream polled outside any runtime.
struct Delay {
    duration: Duration,
    /// Shared with the helper thread once started; `None` before the first poll.
    state: Option<Arc<Mutex<DelayState>>>,
}

#[derive(Default)]
struct DelayState {
    elapsed: bool,
    /// The waker of the latest poll, woken by the helper thread when the time is up.
    waker: Option<Waker>,
}

impl Delay {
    fn new(duration: Duration) -> Self {
        Self {
            duration,
            state: None,
        }
    }

    fn start(duration: Duration) -> Arc<Mutex<DelayState>> {
        let state = Arc::new(Mutex::new(DelayState::default()));
        let timer_state = Arc::clone(&state);
        let spawned = std::thread::Builder::new()
            .name("scripted-delay".to_owned())
            .spawn(move || {
                std::thread::sleep(duration);
                let waker = {
                    let mut state = lock(&timer_state);
                    state.elapsed = true;
                    state.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            });
        if let Err(error) = spawned {
            // Pacing is a nicety of tests; a stream that runs early beats one that never ends.
            tracing::warn!(%error, "scripted delay: no timer thread, not waiting");
            lock(&state).elapsed = true;
        }
        state
    }
}

impl Future for Delay {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let duration = this.duration;
        let state = this.state.get_or_insert_with(|| Delay::start(duration));
        let mut state = lock(state);
        if state.elapsed {
            Poll::Ready(())
        } else {
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

fn lock(state: &Mutex<DelayState>) -> MutexGuard<'_, DelayState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A scripted answer of `text`: one Text block, `StopReason::Stop`, model "scripted", usage of 10
/// input tokens and one output token per 4 characters.
pub fn text_response(text: &str) -> AssistantMessage {
    AssistantMessage {
        content: vec![AssistantBlock::Text {
            text: text.to_owned(),
        }],
        usage: scripted_usage(text),
        stop_reason: StopReason::Stop,
        model: "scripted".to_owned(),
        error_message: None,
    }
}

/// A scripted answer that calls tools: a Text block of `text` (if not empty), then one ToolCall
/// block per call, `StopReason::ToolUse`; model and usage as in `text_response`.
pub fn tool_response(text: &str, calls: Vec<ToolCall>) -> AssistantMessage {
    let mut content = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() {
        content.push(AssistantBlock::Text {
            text: text.to_owned(),
        });
    }
    content.extend(calls.into_iter().map(AssistantBlock::ToolCall));
    AssistantMessage {
        content,
        usage: scripted_usage(text),
        stop_reason: StopReason::ToolUse,
        model: "scripted".to_owned(),
        error_message: None,
    }
}

fn scripted_usage(text: &str) -> Usage {
    Usage {
        input: 10,
        output: (text.chars().count() / 4) as u64,
        ..Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_by_characters() {
        let chunks = |text: &str, n| Chunks::new(text.to_owned(), n);
        let pieces: Vec<String> = chunks("héllo wörld", 4).collect();
        assert_eq!(pieces, ["héll", "o wö", "rld"]);
        assert_eq!(chunks("", 4).count(), 0);
        assert_eq!(chunks("abcd", 4).collect::<Vec<_>>(), ["abcd"]);
    }

    #[test]
    fn a_delay_waits_its_duration_then_becomes_ready() {
        let duration = Duration::from_millis(20);
        let started = std::time::Instant::now();
        let mut delay = Delay::new(duration);
        // Not ready at once: the first poll starts the timer and waits for it.
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(Pin::new(&mut delay).poll(&mut cx), Poll::Pending);
        // Ready once the duration has passed, and not before (a lower bound, so not flaky).
        futures::executor::block_on(delay);
        assert!(started.elapsed() >= duration, "{:?}", started.elapsed());
    }

    #[test]
    fn helper_constructors() {
        let message = text_response("twelve chars");
        assert_eq!(message.text(), "twelve chars");
        assert_eq!(message.usage.output, 3);
        assert_eq!(message.usage.input, 10);
        assert_eq!(message.stop_reason, StopReason::Stop);
        assert_eq!(message.model, "scripted");

        let call = ToolCall {
            id: "c1".to_owned(),
            name: "ls".to_owned(),
            arguments: serde_json::json!({}),
        };
        let message = tool_response("", vec![call.clone()]);
        assert_eq!(message.content, [AssistantBlock::ToolCall(call.clone())]);
        assert_eq!(message.stop_reason, StopReason::ToolUse);
        let message = tool_response("let me look", vec![call.clone()]);
        assert_eq!(message.content.len(), 2);
        assert_eq!(message.tool_calls(), [&call]);
    }
}
