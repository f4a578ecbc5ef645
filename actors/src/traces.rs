//! Traces of runs: each run (each pass of it) is a span, `invoke_agent seed`, under the span of
//! the request that queued it; the time a run spent waiting (queued, parked on its children or
//! on a person's approval) is a span of its own; a run taken up again after a crash links to the
//! span of the attempt the crash cut off.
//!
//! This crate knows nothing of OpenTelemetry. A run's span and what is made under it (its wait,
//! its turn's model requests and tool calls) are made on the exporter directly, through
//! [`SpanContexts`], which the service implements: none is a `tracing` span, since nothing runs
//! with a run's span current (what a run starts carries its `traceparent`), and the bridge's
//! bookkeeping cost more than the spans themselves (docs/design/traces.md). A continuation's
//! span is a `tracing` span of [`seed_durable::TRACE_TARGET`], current while the continuation runs. Without
//! an exporter ([`Traces`]'s default) nothing is made: no map is touched, nothing is written.

use std::sync::Arc;

use dashmap::DashMap;
use seed_durable::spans::TurnSpans;
use seed_events::{RunId, RunStatus};
use seed_store::RunRow;
use tracing::Span;

/// Runs whose parent span (or parking) is remembered at once, at most. A run is taken out when
/// it starts, but on several nodes another node may start it, and its entry would stay: past
/// the bound the map forgets all it holds and starts again, so that the runs queued from then on
/// still continue their traces (those forgotten start traces of their own).
pub const TRACE_PARENTS_MAX: usize = 65_536;

/// What the exporter does for the runtime: ids in and out of `tracing` spans, and the spans
/// made on the exporter directly (a run's, and what is made under it). Implemented by the
/// service (`server/src/traces.rs`).
pub trait SpanContexts: Send + Sync {
    /// `span`'s W3C `traceparent`, when it is exported (sampled or not).
    fn traceparent(&self, span: &Span) -> Option<String>;
    /// Makes `traceparent` the parent of `span`, which has not been entered yet.
    fn set_parent(&self, span: &Span, traceparent: &str);
    /// Starts the span of a pass of `run`: under `pass.parent` when a request queued it,
    /// linked to `pass.earlier` when the run had a span already.
    fn start_run(&self, run: &RunRow, pass: &RunPass<'_>) -> Arc<dyn UnderRun>;
}

/// How a pass of a run relates to spans before it ([`SpanContexts::start_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunPass<'a> {
    /// The `traceparent` of the span of the request that queued the run (its parent).
    pub parent: Option<&'a str>,
    /// The `traceparent` of the run's earlier span (its earlier pass, or the attempt a crash
    /// cut off), which this one links to.
    pub earlier: Option<&'a str>,
    /// Whether the run is taken up after a crash (it had a span, and did not park).
    pub adopted: bool,
}

/// The span of one pass of a run, started ([`SpanContexts::start_run`]), and what is made
/// under it: its turn's spans (the harness makes them), its wait, its `traceparent`.
pub trait UnderRun: TurnSpans {
    /// The run span's W3C `traceparent` (`None` if its ids are not valid ones).
    fn traceparent(&self) -> Option<String>;
    /// Exports a finished span under the run's, from `wait.started_at_ms` to
    /// `wait.ended_at_ms`.
    fn wait_span(&self, wait: &Wait);
    /// Ends the run's span with how the pass ended (`None`: it panicked).
    fn end(&self, outcome: Option<RunStatus>);
}

/// A pass of a run as traces see it ([`Traces::run_trace`]): nothing (the default) when
/// traces are off.
#[derive(Debug, Clone, Default)]
pub struct RunTrace {
    run: Option<Arc<dyn UnderRun>>,
}

impl RunTrace {
    /// Its `traceparent`, kept with the run by the turn's first commit, so that an attempt
    /// after a crash links to this one.
    pub fn traceparent(&self) -> Option<String> {
        self.run.as_ref()?.traceparent()
    }

    /// Where the turn's model requests and tool calls go as spans under it.
    pub fn turn_spans(&self) -> Option<Arc<dyn TurnSpans>> {
        let run = self.run.clone()?;
        Some(run)
    }

    /// Ends the pass's span with how it ended (`None`: it panicked).
    pub fn end(&self, outcome: Option<RunStatus>) {
        if let Some(run) = &self.run {
            run.end(outcome);
        }
    }
}

/// A time a run spent waiting, as a span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub kind: WaitKind,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
}

/// Why a run waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// In the queue, for a slot.
    Queued,
    /// Parked on the children it delegated to.
    Children,
    /// Parked on a person's approval of a call.
    Approval,
}

impl WaitKind {
    /// The wait span's name.
    pub fn span_name(self) -> &'static str {
        match self {
            WaitKind::Queued => "seed.run.queued",
            WaitKind::Children => "seed.run.parked_on_children",
            WaitKind::Approval => "seed.run.awaiting_approval",
        }
    }
}

/// The runtime's traces: off by default.
#[derive(Clone, Default)]
pub struct Traces {
    contexts: Option<Arc<dyn SpanContexts>>,
    /// Whether spans carry message text (`--otlp-content`).
    pub content: bool,
    /// The `traceparent` of the request that queued each run not yet started: the run's span
    /// continues that trace. Bounded by [`TRACE_PARENTS_MAX`].
    parents: Arc<DashMap<RunId, String>>,
    /// When each parked run parked, and on what: its next pass shows the wait.
    parked: Arc<DashMap<RunId, (WaitKind, i64)>>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces")
            .field("on", &self.contexts.is_some())
            .field("content", &self.content)
            .finish_non_exhaustive()
    }
}

impl Traces {
    /// Traces exported through `contexts`, with message text when `content`.
    pub fn new(contexts: Arc<dyn SpanContexts>, content: bool) -> Traces {
        Traces {
            contexts: Some(contexts),
            content,
            ..Traces::default()
        }
    }

    /// Whether anything is exported.
    pub fn is_on(&self) -> bool {
        self.contexts.is_some()
    }

    /// The `traceparent` of the span current in the caller, when traces are on: what a run it
    /// queues will continue ([`Traces::queued`]).
    pub fn current_traceparent(&self) -> Option<String> {
        self.contexts.as_ref()?.traceparent(&Span::current())
    }

    /// Notes that `run_id` was queued under `traceparent`: its span will be that span's child.
    pub fn queued(&self, run_id: RunId, traceparent: String) {
        if self.is_on() {
            keep_bounded(&self.parents, run_id, traceparent);
        }
    }

    /// Notes that `run_id`, about to be queued here, continues the trace of the span current in
    /// the caller (a continuation's, a request's), when traces are on. Made before the run is
    /// written, so that its span cannot start first.
    pub fn continue_here(&self, run_id: RunId) {
        if let Some(traceparent) = self.current_traceparent() {
            self.queued(run_id, traceparent);
        }
    }

    /// Makes `traceparent` (a tool call's) the parent of `span`, which has not been entered
    /// yet, when traces are on.
    pub fn set_parent(&self, span: &Span, traceparent: &str) {
        if let Some(contexts) = &self.contexts {
            contexts.set_parent(span, traceparent);
        }
    }

    /// Forgets what [`Traces::continue_here`] (or [`Traces::queued`]) noted for a run that was
    /// not queued after all.
    pub fn forget(&self, run_id: RunId) {
        if self.is_on() {
            self.parents.remove(&run_id);
        }
    }

    /// Notes that `run_id` parked on `kind` at `now_ms`.
    pub fn parked(&self, run_id: RunId, kind: WaitKind, now_ms: i64) {
        if self.is_on() {
            keep_bounded(&self.parked, run_id, (kind, now_ms));
        }
    }

    /// The span of a pass of `run`, starting at `now_ms`: under the span of the request that
    /// queued it, when one did; with its wait before it (queued, or parked) as a child span;
    /// linked to the span of the attempt a crash cut off, when the run carries one. Nothing
    /// when traces are off.
    pub fn run_trace(&self, run: &RunRow, now_ms: i64) -> RunTrace {
        let Some(contexts) = &self.contexts else {
            return RunTrace::default();
        };
        let parent = self.parents.remove(&run.id).map(|(_, parent)| parent);
        let parked = self.parked.remove(&run.id).map(|(_, parked)| parked);
        // A run with a span already: its earlier pass, which parked in this process, or an
        // attempt a crash cut off, adopted now.
        let earlier = run.trace_parent.as_deref();
        let under = contexts.start_run(
            run,
            &RunPass {
                parent: parent.as_deref(),
                earlier,
                adopted: earlier.is_some() && parked.is_none(),
            },
        );
        let wait = match parked {
            Some((kind, parked_at_ms)) => Some(Wait {
                kind,
                started_at_ms: parked_at_ms,
                ended_at_ms: now_ms,
            }),
            // A first pass waited from its queueing; a run taken up after a crash waited too
            // long ago to say.
            None => earlier.is_none().then_some(Wait {
                kind: WaitKind::Queued,
                started_at_ms: run.created_at_ms,
                ended_at_ms: now_ms,
            }),
        };
        if let Some(wait) = wait {
            under.wait_span(&wait);
        }
        RunTrace { run: Some(under) }
    }
}

/// Keeps `value` for `run_id`, forgetting all `map` holds first once it holds
/// [`TRACE_PARENTS_MAX`].
fn keep_bounded<V>(map: &DashMap<RunId, V>, run_id: RunId, value: V) {
    if map.len() >= TRACE_PARENTS_MAX {
        map.clear();
    }
    map.insert(run_id, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use seed_events::{Queue, RunStatus, SessionId};

    /// What the runtime asked of the exporter.
    #[derive(Debug, Clone, PartialEq)]
    enum Asked {
        /// A run's span started: its parent, the span it links to, whether adopted.
        Start {
            parent: Option<String>,
            earlier: Option<String>,
            adopted: bool,
        },
        Wait(Wait),
        End(Option<RunStatus>),
    }

    #[derive(Debug, Default)]
    struct Recording(Mutex<Vec<Asked>>);

    impl Recording {
        fn push(&self, asked: Asked) {
            self.0.lock().expect("the record").push(asked);
        }
    }

    impl TurnSpans for Recording {
        fn model_request(&self, _: &seed_durable::spans::ModelRequest<'_>) {}
        fn tool_call(
            &self,
            _: &seed_providers::ToolCall,
            _: bool,
        ) -> Arc<dyn seed_durable::spans::ToolSpan> {
            unreachable!("no turn runs here")
        }
    }

    impl UnderRun for Recording {
        fn traceparent(&self) -> Option<String> {
            Some(RUN.to_owned())
        }
        fn wait_span(&self, wait: &Wait) {
            self.push(Asked::Wait(*wait));
        }
        fn end(&self, outcome: Option<RunStatus>) {
            self.push(Asked::End(outcome));
        }
    }

    /// The recording, shared with the run spans it hands out.
    #[derive(Debug, Default)]
    struct Recorder(Arc<Recording>);

    impl SpanContexts for Recorder {
        fn traceparent(&self, _: &Span) -> Option<String> {
            None
        }
        fn set_parent(&self, _: &Span, _: &str) {}
        fn start_run(&self, _: &RunRow, pass: &RunPass<'_>) -> Arc<dyn UnderRun> {
            self.0.push(Asked::Start {
                parent: pass.parent.map(str::to_owned),
                earlier: pass.earlier.map(str::to_owned),
                adopted: pass.adopted,
            });
            Arc::clone(&self.0) as Arc<dyn UnderRun>
        }
    }

    fn run(trace_parent: Option<&str>) -> RunRow {
        RunRow {
            id: RunId::from_u128(1),
            session_id: SessionId::from_u128(2),
            queue: Queue::Interactive,
            status: RunStatus::Running,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: false,
            owner: None,
            attempts: 1,
            pass: 0,
            result: None,
            created_at_ms: 1_000,
            updated_at_ms: 1_000,
            trace_parent: trace_parent.map(str::to_owned),
        }
    }

    /// What a pass's start and end asked of the exporter; the pass carries the run's
    /// `traceparent` and where its turn's spans go, both from the run span the exporter
    /// started.
    fn asked_at_start(setup: impl FnOnce(&Traces), run: &RunRow, now_ms: i64) -> Vec<Asked> {
        let recording = Arc::new(Recording::default());
        let recorder = Recorder(Arc::clone(&recording));
        let traces = Traces::new(Arc::new(recorder) as Arc<dyn SpanContexts>, false);
        setup(&traces);
        let trace = traces.run_trace(run, now_ms);
        assert_eq!(trace.traceparent().as_deref(), Some(RUN));
        assert!(trace.turn_spans().is_some());
        trace.end(Some(RunStatus::Succeeded));
        recording.0.lock().expect("the record").clone()
    }

    fn start(parent: Option<&str>, earlier: Option<&str>, adopted: bool) -> Asked {
        Asked::Start {
            parent: parent.map(str::to_owned),
            earlier: earlier.map(str::to_owned),
            adopted,
        }
    }

    const ENDED: Asked = Asked::End(Some(RunStatus::Succeeded));

    const REQUEST: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const EARLIER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const RUN: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    #[test]
    fn a_first_pass_continues_its_requests_trace_and_shows_its_time_in_the_queue() {
        let run = run(None);
        let asked = asked_at_start(
            |traces| traces.queued(run.id, REQUEST.to_owned()),
            &run,
            1_250,
        );
        let queued = Wait {
            kind: WaitKind::Queued,
            started_at_ms: 1_000,
            ended_at_ms: 1_250,
        };
        assert_eq!(
            asked,
            [
                start(Some(REQUEST), None, false),
                Asked::Wait(queued),
                ENDED
            ]
        );
    }

    #[test]
    fn a_later_pass_links_to_the_earlier_one_and_shows_the_time_it_was_parked() {
        for kind in [WaitKind::Children, WaitKind::Approval] {
            let run = run(Some(EARLIER));
            let asked = asked_at_start(|traces| traces.parked(run.id, kind, 5_000), &run, 7_000);
            let parked = Wait {
                kind,
                started_at_ms: 5_000,
                ended_at_ms: 7_000,
            };
            assert_eq!(
                asked,
                [
                    start(None, Some(EARLIER), false),
                    Asked::Wait(parked),
                    ENDED
                ],
                "{kind:?}"
            );
        }
    }

    #[test]
    fn a_run_adopted_after_a_crash_links_to_the_attempt_it_cut_off_and_shows_no_wait() {
        let run = run(Some(EARLIER));
        let asked = asked_at_start(|_| {}, &run, 90_000);
        assert_eq!(asked, [start(None, Some(EARLIER), true), ENDED]);
    }

    #[test]
    fn with_traces_off_nothing_is_kept_and_nothing_is_made() {
        let traces = Traces::default();
        traces.queued(RunId::from_u128(1), REQUEST.to_owned());
        traces.parked(RunId::from_u128(1), WaitKind::Children, 5);
        let trace = traces.run_trace(&run(None), 10);
        assert_eq!(trace.traceparent(), None);
        assert!(trace.turn_spans().is_none());
        assert_eq!(traces.current_traceparent(), None);
        assert!(traces.parents.is_empty());
        assert!(traces.parked.is_empty());
    }

    #[test]
    fn what_is_kept_is_bounded_and_the_newest_runs_still_continue_their_traces() {
        let traces = Traces::new(Arc::new(Recorder::default()), false);
        let past_the_bound = TRACE_PARENTS_MAX as u128 + 10;
        for idx in 0..past_the_bound {
            traces.queued(RunId::from_u128(idx), REQUEST.to_owned());
            traces.parked(RunId::from_u128(idx), WaitKind::Children, 5);
        }
        assert!(traces.parents.len() <= TRACE_PARENTS_MAX);
        assert!(traces.parked.len() <= TRACE_PARENTS_MAX);
        let newest = RunId::from_u128(past_the_bound - 1);
        assert!(traces.parents.contains_key(&newest));
        assert!(traces.parked.contains_key(&newest));
    }
}
