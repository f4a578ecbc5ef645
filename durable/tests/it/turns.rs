//! Turns outside of crashes: a stop mid-stream, a refused commit, the hook that ends a turn,
//! and the per-turn blocks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::executor::block_on;
use futures::stream::BoxStream;
use seed_durable::FileName;
use seed_durable::record::{LiveState, TurnState};
use seed_durable::{
    Clock, Harness, HarnessConfig, HookDecision, MemoryFs, ToolSet, TurnOutcome, TurnRequest,
};
use seed_providers::{
    Message, Provider, Request, ScriptedProvider, ScriptedStep, StreamEvent, UserMessage,
    text_response,
};

/// A clock that moves only when told.
#[derive(Debug, Default)]
struct ManualClock {
    now_ms: AtomicU64,
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_millis(self.now_ms.load(Ordering::SeqCst))
    }
}

/// A scripted provider that calls `on_delta` with the text streamed so far, as each delta
/// passes: lets a test stop a turn, or move the clock, at an exact point of the stream.
#[derive(Clone)]
struct Tapped {
    inner: ScriptedProvider,
    on_delta: Arc<dyn Fn(&str) + Send + Sync>,
}

impl Provider for Tapped {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let on_delta = Arc::clone(&self.on_delta);
        let mut streamed = String::new();
        self.inner
            .stream(request)
            .inspect(move |event| {
                if let StreamEvent::TextDelta(delta) = event {
                    streamed.push_str(delta);
                    on_delta(&streamed);
                }
            })
            .boxed()
    }
}

fn open<P: Provider>(fs: MemoryFs, provider: P) -> Harness<MemoryFs, P> {
    block_on(Harness::open(
        fs,
        provider,
        ToolSet::new(),
        HarnessConfig::new("scripted", "You are tested."),
    ))
    .expect("open")
}

#[test]
fn a_stop_mid_stream_keeps_the_text_in_live_and_out_of_the_next_context() {
    let scripted = ScriptedProvider::new(vec![
        // Streams its text, then hangs: only a stop ends it.
        ScriptedStep::Hang {
            text: "I was about to say".to_owned(),
        },
        ScriptedStep::Respond(text_response("fresh answer")),
    ])
    .with_chunk_chars(4);
    let turn = TurnRequest::new("r1", "tell me");
    let stop = turn.stop.clone();
    let provider = Tapped {
        inner: scripted.clone(),
        on_delta: Arc::new(move |streamed| {
            if streamed == "I was about to say" {
                stop.stop();
            }
        }),
    };
    let fs = MemoryFs::new();
    let mut harness = open(fs.clone(), provider);
    let outcome = block_on(harness.run_turn(turn)).expect("a stopped turn is not an error");
    assert_eq!(
        outcome,
        TurnOutcome::Stopped {
            partial_text: "I was about to say".to_owned()
        }
    );
    let live = harness
        .state()
        .live()
        .expect("pi.live keeps the streamed text");
    assert_eq!(live.text, "I was about to say");
    assert_eq!(live.state, LiveState::Stopped);
    assert_eq!(
        harness.state().turn().map(|t| t.state),
        Some(TurnState::Stopped)
    );
    // Coming back with the same request id finds the turn stopped, and asks nothing.
    let replay = block_on(harness.run_turn(TurnRequest::new("r1", "tell me"))).expect("replay");
    assert_eq!(replay, outcome);
    assert_eq!(scripted.n_requests(), 1);

    // The next turn's request does not carry the cut-off response.
    let next = block_on(harness.run_turn(TurnRequest::new("r2", "again"))).expect("next turn");
    assert!(matches!(next, TurnOutcome::Answered { .. }));
    let requests = scripted.requests();
    let last = requests.last().expect("a second request");
    assert!(
        last.messages
            .iter()
            .all(|message| !matches!(message.as_ref(), Message::Assistant(_))),
        "the cut-off response leaked into the context: {:?}",
        last.messages
    );
    assert_eq!(last.messages.len(), 2, "both inputs, nothing else");
}

#[test]
fn partial_text_is_committed_at_most_every_live_interval() {
    let clock = Arc::new(ManualClock::default());
    let ticking = Arc::clone(&clock);
    // Every delta of two characters takes 30 ms.
    let provider = Tapped {
        inner: ScriptedProvider::new(vec![ScriptedStep::Respond(text_response(
            "0123456789abcdefghij",
        ))])
        .with_chunk_chars(2),
        on_delta: Arc::new(move |_| {
            ticking.now_ms.fetch_add(30, Ordering::SeqCst);
        }),
    };
    let fs = MemoryFs::new();
    let mut harness = open(fs.clone(), provider).with_clock(clock.clone());
    block_on(harness.run_turn(TurnRequest::new("r1", "hi"))).expect("turn");
    // Deltas arrive at 30, 60, ..., 300 ms: partial text is due at 120 ms (4 deltas) and at
    // 240 ms (8 deltas), never twice within 100 ms.
    let documents = fs.snapshot()[&FileName::Documents].clone();
    let partials: Vec<String> = documents
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["name"] == "pi.live" && !line["value"].is_null())
        .map(|line| {
            line["value"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(partials, ["01234567", "0123456789abcdef"]);
    assert_eq!(
        harness.state().live(),
        None,
        "pi.live is cleared by the answer"
    );

    // A response faster than the interval costs no partial commit at all.
    let fast = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("quick"))]);
    let fs = MemoryFs::new();
    let mut harness = open(fs.clone(), fast).with_clock(Arc::new(ManualClock::default()));
    block_on(harness.run_turn(TurnRequest::new("r1", "hi"))).expect("turn");
    assert_eq!(fs.n_commits(), 2, "the input, then the answer");
}

#[test]
fn a_refused_commit_ends_the_turn_with_an_error_promptly_and_closes_the_harness() {
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("never kept"))]);
    let fs = MemoryFs::new();
    let mut harness = open(fs.clone(), provider.clone());
    // The input commits; the answer's commit is refused.
    fs.fail_after(1);
    let started = Instant::now();
    let outcome = block_on(harness.run_turn(TurnRequest::new("r1", "hi")));
    assert!(
        matches!(outcome, Err(seed_durable::Error::StoreRefused(_))),
        "{outcome:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "it waited on the refused commit"
    );
    assert!(harness.is_closed());
    // Closed: nothing more is written, and it says so at once.
    let again = block_on(harness.run_turn(TurnRequest::new("r2", "hi")));
    assert!(
        matches!(again, Err(seed_durable::Error::Closed)),
        "{again:?}"
    );
    assert_eq!(provider.n_requests(), 1);
}

#[test]
fn the_hook_before_a_request_can_end_the_turn_so_the_request_never_leaves() {
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("unused"))]);
    let mut harness = open(MemoryFs::new(), provider.clone());
    harness.set_before_request(Box::new(|_| HookDecision::EndTurn {
        reason: "continued into another session".to_owned(),
    }));
    let outcome = block_on(harness.run_turn(TurnRequest::new("r1", "hi"))).expect("turn");
    assert_eq!(
        outcome,
        TurnOutcome::Ended {
            reason: "continued into another session".to_owned()
        }
    );
    assert_eq!(provider.n_requests(), 0);
}

#[test]
fn turn_blocks_ride_behind_the_input_and_are_never_stored() {
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(text_response("ok"))]);
    let fs = MemoryFs::new();
    let mut harness = open(fs.clone(), provider.clone());
    let mut turn = TurnRequest::new("r1", "what time is it");
    turn.blocks = vec![UserMessage::new(
        "<current_time>2026-11-29T23:00Z</current_time>".to_owned(),
    )];
    block_on(harness.run_turn(turn)).expect("turn");
    let request = &provider.requests()[0];
    let texts: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::User(user) => Some(user.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "what time is it",
            "<current_time>2026-11-29T23:00Z</current_time>"
        ]
    );
    let stored = format!("{:?}", fs.snapshot());
    assert!(!stored.contains("current_time"), "a block was stored");
}

/// A tool that is safe to repeat, answering at once.
struct Look;

impl seed_durable::Tool for Look {
    fn spec(&self) -> seed_providers::ToolSpec {
        seed_providers::ToolSpec {
            name: "look".to_owned(),
            description: "looks".to_owned(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn safe_to_repeat(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        _: &'a seed_providers::ToolCall,
    ) -> futures::future::BoxFuture<'a, seed_durable::ToolOutput> {
        Box::pin(async { seed_durable::ToolOutput::ok("seen") })
    }
}

fn look_call() -> seed_providers::ToolCall {
    seed_providers::ToolCall {
        id: "l1".to_owned(),
        name: "look".to_owned(),
        arguments: serde_json::json!({}),
    }
}

/// The store keeps a task per model request and per tool call, none skipped, each closed with
/// the entry that records it: even a response that never streamed to `pi.live`, and a call of a
/// tool that is safe to repeat (which commits no intent).
#[test]
fn every_model_request_and_every_tool_call_has_its_task() {
    use seed_durable::record::{ModelTaskState, Task, ToolTaskState};
    let scripted = ScriptedProvider::new(vec![
        ScriptedStep::Respond(seed_providers::tool_response("", vec![look_call()])),
        ScriptedStep::Respond(text_response("done")),
    ]);
    let fs = MemoryFs::new();
    let mut harness = block_on(Harness::open(
        fs,
        scripted,
        ToolSet::new().with(Arc::new(Look)),
        HarnessConfig::new("scripted", "You are tested."),
    ))
    .expect("open");
    let outcome = block_on(harness.run_turn(TurnRequest::new("r1", "look"))).expect("a turn");
    assert!(
        matches!(outcome, TurnOutcome::Answered { .. }),
        "{outcome:?}"
    );
    let tasks: Vec<&Task> = harness.state().tasks.values().collect();
    let models = tasks
        .iter()
        .filter(|task| {
            matches!(
                task,
                Task::Model {
                    state: ModelTaskState::Completed { .. },
                    ..
                }
            )
        })
        .count();
    let tools = tasks
        .iter()
        .filter(|task| {
            matches!(
                task,
                Task::Tool {
                    state: ToolTaskState::Completed { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!((models, tools, tasks.len()), (2, 1, 3), "{tasks:#?}");
}

/// What a model request's span was handed, in brief.
#[derive(Debug, Clone, PartialEq)]
struct Exported {
    request_id: String,
    step: u32,
    model: String,
    outcome: String,
    first_chunk: bool,
    in_order: bool,
    input_messages: Option<String>,
    output_messages: Option<String>,
}

#[derive(Debug, Default)]
struct Recorded {
    model_requests: std::sync::Mutex<Vec<Exported>>,
    /// Each tool call's span as it ended: its call id, whether safe to repeat, whether an
    /// error.
    tool_calls: Arc<std::sync::Mutex<Vec<(String, bool, bool)>>>,
}

/// A tool call's span, recorded when it ends.
#[derive(Debug)]
struct RecordedToolSpan {
    call_id: String,
    safe_to_repeat: bool,
    ended: Arc<std::sync::Mutex<Vec<(String, bool, bool)>>>,
}

impl seed_durable::spans::ToolSpan for RecordedToolSpan {
    fn traceparent(&self) -> Option<String> {
        None
    }
    fn set_attribute(&self, _: &'static str, _: String) {}
    fn end(&self, is_error: bool) {
        let ended = (self.call_id.clone(), self.safe_to_repeat, is_error);
        self.ended.lock().expect("the record").push(ended);
    }
}

impl seed_durable::spans::TurnSpans for Recorded {
    fn tool_call(
        &self,
        call: &seed_providers::ToolCall,
        safe_to_repeat: bool,
    ) -> Arc<dyn seed_durable::spans::ToolSpan> {
        Arc::new(RecordedToolSpan {
            call_id: call.id.clone(),
            safe_to_repeat,
            ended: Arc::clone(&self.tool_calls),
        })
    }

    fn model_request(&self, request: &seed_durable::spans::ModelRequest<'_>) {
        use seed_durable::spans::ModelOutcome;
        let outcome = match request.outcome {
            ModelOutcome::Response(message) => {
                seed_durable::spans::finish_reason(message.stop_reason).to_owned()
            }
            ModelOutcome::Failed(error_type) => format!("failed: {error_type}"),
        };
        self.model_requests
            .lock()
            .expect("the record")
            .push(Exported {
                request_id: request.request_id.to_owned(),
                step: request.step,
                model: request.model.to_owned(),
                outcome,
                first_chunk: request.first_chunk_after.is_some(),
                in_order: request.started_at <= request.ended_at,
                input_messages: request.input_messages.clone(),
                output_messages: request.output_messages.clone(),
            });
    }
}

/// Each model request is handed whole to the turn's spans once it ended: its step, whether a
/// first chunk came, and how it ended (answered, cut off, failed); the messages sent and the
/// response's text only with message text on. Each tool call's span ends once its tool ran.
#[test]
fn each_model_request_is_handed_to_its_span_once_it_ended() {
    let scripted = ScriptedProvider::new(vec![
        ScriptedStep::Respond(seed_providers::tool_response(
            "",
            vec![
                look_call(),
                seed_providers::ToolCall {
                    id: "u1".to_owned(),
                    name: "unknown".to_owned(),
                    arguments: serde_json::json!({}),
                },
            ],
        )),
        ScriptedStep::Respond(text_response("done")),
        ScriptedStep::Respond(text_response("with its text")),
        ScriptedStep::FailAfter {
            text: "half".to_owned(),
            error: seed_providers::ProviderError::new(
                seed_providers::ProviderErrorKind::Timeout,
                "busy",
            ),
        },
        ScriptedStep::Respond(text_response("unseen")),
    ]);
    let recorded = Arc::new(Recorded::default());
    let config = |trace_content| HarnessConfig {
        trace_content,
        ..HarnessConfig::new("scripted", "You are tested.")
    };
    // Each turn is given where its spans go (its run's).
    let traced = |request_id: &str, input: &str| TurnRequest {
        spans: Some(Arc::clone(&recorded) as Arc<dyn seed_durable::spans::TurnSpans>),
        ..TurnRequest::new(request_id, input)
    };
    let fs = MemoryFs::new();
    let mut harness = block_on(Harness::open(
        fs.clone(),
        scripted.clone(),
        ToolSet::new().with(Arc::new(Look)),
        config(false),
    ))
    .expect("open");
    block_on(harness.run_turn(traced("r1", "look"))).expect("a turn");
    let mut harness = block_on(Harness::open(
        fs,
        scripted,
        ToolSet::new().with(Arc::new(Look)),
        config(true),
    ))
    .expect("open");
    block_on(harness.run_turn(traced("r2", "again"))).expect("a turn");
    block_on(harness.run_turn(traced("r3", "once more"))).expect("a failed turn");
    // A turn given none (traces off) hands nothing over.
    block_on(harness.run_turn(TurnRequest::new("r4", "untraced"))).expect("a turn");
    let exported = recorded.model_requests.lock().expect("the record").clone();
    let brief: Vec<_> = exported
        .iter()
        .map(|e| {
            (
                e.request_id.as_str(),
                e.step,
                e.outcome.as_str(),
                e.first_chunk,
            )
        })
        .collect();
    assert_eq!(
        brief,
        [
            ("r1", 0, "tool_calls", true),
            ("r1", 1, "stop", true),
            ("r2", 0, "stop", true),
            ("r3", 0, "failed: timeout", true),
        ]
    );
    assert!(exported.iter().all(|e| e.in_order && e.model == "scripted"));
    assert_eq!(exported[0].input_messages, None);
    let sent = exported[2]
        .input_messages
        .as_deref()
        .expect("the messages sent");
    assert!(sent.contains("again"), "{sent}");
    // The response's text, with the switch on alone, and none from a failed request.
    assert_eq!(exported[1].output_messages, None);
    assert_eq!(
        exported[2].output_messages.as_deref(),
        Some("with its text")
    );
    assert_eq!(exported[3].output_messages, None);
    // Each tool call's span ended once, after its tool ran, an error result as an error; none
    // in the turn given no spans.
    assert_eq!(
        *recorded.tool_calls.lock().expect("the record"),
        [
            ("l1".to_owned(), true, false),
            ("u1".to_owned(), true, true)
        ]
    );
}

/// A provider that streams a little text and one tool call, then waits for ever.
struct CallsThenHangs;

impl Provider for CallsThenHangs {
    fn stream(&self, _: Request) -> BoxStream<'static, StreamEvent> {
        futures::stream::iter([
            StreamEvent::TextDelta("let me look".to_owned()),
            StreamEvent::ToolCall(look_call()),
        ])
        .chain(futures::stream::pending())
        .boxed()
    }
}

/// `pi.live` holds the tool calls of the response in flight as well as its text.
#[test]
fn the_response_in_flight_keeps_its_tool_calls_in_live() {
    let fs = MemoryFs::new();
    let config = HarnessConfig {
        live_interval: Duration::ZERO,
        ..HarnessConfig::new("scripted", "You are tested.")
    };
    let mut harness =
        block_on(Harness::open(fs, CallsThenHangs, ToolSet::new(), config)).expect("open");
    let turn = TurnRequest::new("r1", "look");
    let stop = turn.stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        stop.stop();
    });
    let outcome = block_on(harness.run_turn(turn)).expect("a stopped turn");
    stopper.join().expect("the stopper");
    assert_eq!(
        outcome,
        TurnOutcome::Stopped {
            partial_text: "let me look".to_owned()
        }
    );
    let live = harness.state().live().expect("pi.live");
    assert_eq!(live.text, "let me look");
    assert_eq!(live.tool_calls, [look_call()]);
}

#[test]
fn usage_a_server_does_not_send_is_estimated_from_the_request_and_marked() {
    let mut bare = text_response("an answer of thirty-two bytes...");
    bare.usage = seed_providers::Usage::default();
    let counted = text_response("counted");
    let scripted = ScriptedProvider::new(vec![
        ScriptedStep::Respond(bare),
        ScriptedStep::Respond(counted.clone()),
    ]);
    let mut harness = open(MemoryFs::new(), scripted.clone());
    let mut turn = TurnRequest::new("r1", "u".repeat(4_000));
    turn.blocks = vec![UserMessage::new("<current_time>now</current_time>")];
    block_on(harness.run_turn(turn)).expect("a turn");
    let sent = scripted.requests().pop().expect("a request");
    let usage_of = |harness: &Harness<MemoryFs, ScriptedProvider>| {
        harness
            .state()
            .entries
            .iter()
            .rev()
            .find_map(|entry| match &entry.body {
                seed_durable::EntryBody::Assistant { message, .. } => Some(message.usage),
                _ => None,
            })
            .expect("an answer")
    };
    let usage = usage_of(&harness);
    // The whole request as it was sent (system prompt, input, blocks), about four bytes a
    // token, and the answer's eight tokens: marked as an estimate.
    assert!(usage.estimated, "{usage:?}");
    assert_eq!(usage.input, seed_providers::estimate::request_tokens(&sent));
    assert!(usage.input > 1_000, "{usage:?}");
    assert_eq!(usage.output, 8);
    // A server that counts is taken at its word.
    block_on(harness.run_turn(TurnRequest::new("r2", "again"))).expect("a turn");
    assert_eq!(usage_of(&harness), counted.usage);
}
