//! A continue_session call, run by the succession actor: replay, refusals, the projection, the atomic
//! creation of the successor, its run, and the notifications.
//!
//! The pure parts (argument checks, the projection) are in `seed_projections::continuation`;
//! this is the shell that reads what they need by index and writes what they decide.

use seed_events::continuation::CONTINUED_FROM_META;
use seed_events::{
    AccountId, ContinuationId, ContinueSessionInput, ContinuedFrom, EventRole, MessageBody,
    NewEvent, PlanTransfer, Queue, RunId, SessionEvent, SessionId, Source,
};
use seed_projections::continuation::{
    CONTINUATION_PROJECTION_BUDGET_BYTES, EXCERPT_EVENTS_MAX,
    MAX_SESSION_CONTINUATIONS_PER_SESSION, Projection, ProjectionInput,
    RECENT_EXCHANGES_EVENTS_MAX, ThreadRef, check_range, compile_projection_recalling,
    normalize_input, parse_input, plan_transfer,
};
use seed_store::{
    ContinuationRow, NewContinuation, NewRun, NewSession, NewSuccessor, Refusal, SessionRow, Store,
    TitleSource,
};
use serde_json::{Value, json};

use crate::bus::{Notification, SeqRange};
use crate::crash::points;
use crate::env::RunEnv;
use crate::verb::{VerbContext, VerbOutput};

pub mod person;
pub mod preview;

/// How many predecessors the lineage block names (the origin is always named).
const LINEAGE_MAX: usize = 8;

/// What the succession actor answers, and which successor's actor it should spawn.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub output: VerbOutput,
    pub successor_to_start: Option<SessionId>,
}

enum Failure {
    /// Refused: the model reads why; nothing was created.
    Refused(String),
    /// Refused for an argument: `field` names it (`title`, `sources[2]`), `message` says
    /// why as the model reads it; nothing was created.
    Invalid { field: String, message: String },
    /// The store failed under the call.
    Store(seed_store::Error),
}

impl From<seed_store::Error> for Failure {
    fn from(error: seed_store::Error) -> Self {
        Failure::Store(error)
    }
}

fn refuse<T>(why: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::Refused(why.into()))
}

/// Refuses for the argument `field`, saying `message`.
fn invalid<T>(field: &str, message: impl Into<String>) -> Result<T, Failure> {
    Err(Failure::Invalid {
        field: field.to_owned(),
        message: message.into(),
    })
}

impl Failure {
    /// Why, as the model and a person read it.
    fn why(&self) -> String {
        match self {
            Failure::Refused(why) => why.clone(),
            Failure::Invalid { message, .. } => message.clone(),
            Failure::Store(error) => error.to_string(),
        }
    }
}

/// Runs one continue_session call of `context`'s run.
pub(crate) async fn continue_session(
    env: &RunEnv,
    context: VerbContext,
    arguments: Value,
) -> Outcome {
    match attempt(env, &context, arguments).await {
        Ok(outcome) => outcome,
        Err(failure @ (Failure::Refused(_) | Failure::Invalid { .. })) => Outcome {
            output: VerbOutput::error(format!(
                "continue_session refused: {}. Nothing was created; this session goes on.",
                failure.why()
            )),
            successor_to_start: None,
        },
        Err(Failure::Store(error)) => Outcome {
            output: VerbOutput::error(format!(
                "continue_session failed: {error}. Nothing was created; this session goes on."
            )),
            successor_to_start: None,
        },
    }
}

async fn attempt(
    env: &RunEnv,
    context: &VerbContext,
    arguments: Value,
) -> Result<Outcome, Failure> {
    let store = &env.store;
    let predecessor_id = context.session_id;

    // Replay: this call already made its successor.
    if let Some(edge) = store
        .find_continuation(predecessor_id, &context.tool_call_id)
        .await?
    {
        return replay(env, &edge).await;
    }

    let Prepared {
        input,
        predecessor,
        initiating,
        plan,
    } = prepare(
        store,
        context.account_id,
        predecessor_id,
        Some(context.run_id),
        arguments,
    )
    .await?;

    let projection = project(store, &predecessor, &initiating, &input, plan).await?;
    // On the continuation's span, when traces are exported (`crate::succession`).
    tracing::Span::current().record(
        "seed.continuation.projection_bytes",
        seed_durable::spans::count(projection.text.len()),
    );

    let now = (env.clock)();
    let successor = new_successor(
        &predecessor,
        &initiating,
        &input,
        plan,
        projection,
        context.tool_call_id.clone(),
        now,
    );
    let successor_id = successor.session.id;

    env.settings
        .crash_points
        .reach(points::CONTINUATION_BEFORE_CREATE)
        .await;
    let created = match store.create_successor(successor).await {
        Ok(created) => created,
        Err(seed_store::Error::Refused {
            reason: Refusal::Duplicate { .. },
            ..
        }) => {
            // The same call made its successor meanwhile: answer as a replay.
            if let Some(edge) = store
                .find_continuation(predecessor_id, &context.tool_call_id)
                .await?
            {
                return replay(env, &edge).await;
            }
            return refuse("a session with this id already exists; call again");
        }
        Err(error) => return Err(error.into()),
    };
    env.settings
        .crash_points
        .reach(points::CONTINUATION_AFTER_CREATE)
        .await;

    let started = start_successor_run(env, successor_id, created.message.id).await;
    env.settings
        .crash_points
        .reach(points::CONTINUATION_AFTER_ENQUEUE)
        .await;

    announce(env, &predecessor, successor_id, &created);
    Ok(Outcome {
        output: continued_output(successor_id, &input.title),
        successor_to_start: started.then_some(successor_id),
    })
}

/// The successor's session, edge and first two events for `projection`, keyed by
/// `tool_call_id` (the call's id; a person's request has one of its own).
fn new_successor(
    predecessor: &SessionRow,
    initiating: &SessionEvent,
    input: &ContinueSessionInput,
    plan: PlanTransfer,
    projection: Projection,
    tool_call_id: String,
    now: i64,
) -> NewSuccessor {
    let continuation_id = ContinuationId::new_v7();
    let successor_id = SessionId::new_v7();
    let mut session = NewSession::new(successor_id, predecessor.account_id, now);
    session.title = input.title.clone();
    session.description = input.description.clone();
    session.title_source = TitleSource::Agent;
    session.model_override = predecessor.model_override.clone();
    session.reasoning_level = predecessor.reasoning_level.clone();
    session.plan = (plan == PlanTransfer::Carry)
        .then(|| predecessor.plan.clone())
        .flatten();
    let mut projection_event = NewEvent::new(
        MessageBody::text(projection.text),
        EventRole::User,
        "system",
        now,
    );
    projection_event.meta = json!({
        "continuation": {
            "continuation_id": continuation_id,
            "predecessor_session_id": predecessor.id,
        }
    });
    NewSuccessor {
        session,
        edge: NewContinuation {
            id: continuation_id,
            predecessor_session_id: predecessor.id,
            successor_session_id: successor_id,
            origin_session_id: projection.manifest.origin_session_id,
            tool_call_id,
            initiating_event_id: initiating.id,
            reason: input.reason.clone(),
            manifest_cbor: projection.manifest.to_cbor(),
            created_at_ms: now,
        },
        projection: projection_event,
        message: copy_of(initiating, now),
        attachment_ids: seed_events::message_attachments(&initiating.content)
            .into_iter()
            .map(|named| named.id)
            .collect(),
        close_predecessor_plan: plan == PlanTransfer::Close,
    }
}

/// Tells both sessions and the account that `successor_id` continues `predecessor`.
fn announce(
    env: &RunEnv,
    predecessor: &SessionRow,
    successor_id: SessionId,
    created: &seed_store::CreatedSuccessor,
) {
    let publisher = &env.publisher;
    publisher.publish(Notification::SessionChanged {
        session_id: predecessor.id,
        reason: "continued",
        seqs: None,
    });
    publisher.publish(Notification::SessionChanged {
        session_id: successor_id,
        reason: "continued-from",
        seqs: Some(SeqRange {
            from: created.projection.seq,
            to: created.message.seq,
        }),
    });
    publisher.publish(Notification::AccountChanged {
        account_id: predecessor.account_id,
        reasons: vec!["session-updated", "session-continued"],
    });
}

/// A call's arguments checked and what they continue: the refusals continue_session and its
/// preview share.
struct Prepared {
    input: ContinueSessionInput,
    predecessor: SessionRow,
    /// The message the successor gets copied word for word.
    initiating: SessionEvent,
    plan: PlanTransfer,
}

/// Checks a call's arguments and the session it would continue, in the order continue_session
/// refuses: the arguments, the session, the run (`run_id`: the calling run; `None` for a
/// person, who has none and no children waiting), the successors already made, the message
/// to carry, and the sources (`account_id`'s own).
async fn prepare(
    store: &Store,
    account_id: AccountId,
    predecessor_id: SessionId,
    run_id: Option<RunId>,
    arguments: Value,
) -> Result<Prepared, Failure> {
    let arguments = normalize_input(arguments);
    let input = match parse_input(&arguments, predecessor_id) {
        Ok(input) => input,
        Err(problem) => {
            let field = problem.split(':').next().unwrap_or_default();
            return invalid(field, format!("invalid arguments: {problem}"));
        }
    };
    let Some(predecessor) = store.get_session(predecessor_id).await? else {
        return refuse("this session no longer exists");
    };
    let run = match run_id {
        Some(run_id) => store.get_run(run_id).await?,
        None => None,
    };
    if predecessor.parent_session_id.is_some()
        || run.as_ref().is_some_and(|run| run.parent_run_id.is_some())
    {
        return refuse(
            "a delegated child cannot continue; finish the task and let the parent decide",
        );
    }
    if run.as_ref().is_some_and(|run| run.typed) {
        return refuse("a typed child cannot continue; end the task with return_result");
    }
    // A run's call needs its run; a person's needs none.
    if run_id.is_some() && run.is_none() {
        return refuse("continuing needs a run in flight");
    }
    let open_children = match run_id {
        Some(run_id) => store
            .child_runs(run_id)
            .await?
            .into_iter()
            .filter(|child| !child.status.is_terminal())
            .count(),
        None => 0,
    };
    if open_children > 0 {
        return refuse(format!(
            "{open_children} delegated child run(s) started this turn are still running; wait \
             for their results before continuing"
        ));
    }
    let n_successors = store.count_successors(predecessor_id).await?;
    if n_successors >= MAX_SESSION_CONTINUATIONS_PER_SESSION {
        return refuse(format!(
            "this session has already been continued {n_successors} times, the most allowed"
        ));
    }
    // The message this turn answers: the newest a person wrote up to the run's own. One that
    // arrived after it is not in this turn's context (the import left it out) and belongs to
    // a run still waiting its turn, which answers it here; copying it instead would leave the
    // run's own message behind and have the later one answered twice.
    let own_newest = run
        .as_ref()
        .and_then(|run| run.user_event_ids.iter().max().copied());
    let Some(initiating) = store
        .newest_person_message(predecessor_id, own_newest)
        .await?
    else {
        return refuse("there is no user message to carry into a successor");
    };
    if initiating.meta.get(CONTINUED_FROM_META).is_some() {
        return refuse(
            "this session was just continued and nobody has said anything new since; \
             continuing again would loop. Answer the message here",
        );
    }
    if let Some(edge) = store
        .edge_from_message(predecessor_id, initiating.id)
        .await?
    {
        return refuse(format!(
            "the user's message was already carried into thread:{}; nothing new has been said \
             here since",
            edge.successor_session_id
        ));
    }
    check_sources(store, account_id, &input.sources).await?;
    let plan = plan_transfer(input.plan, predecessor.plan.as_ref());
    Ok(Prepared {
        input,
        predecessor,
        initiating,
        plan,
    })
}

/// Reads what a projection is built from and compiles it (`gather`, then
/// `Gathered::compile`).
pub async fn project(
    store: &Store,
    predecessor: &SessionRow,
    initiating: &SessionEvent,
    input: &ContinueSessionInput,
    plan: PlanTransfer,
) -> Result<Projection, seed_store::Error> {
    Ok(gather(store, predecessor, initiating, input)
        .await?
        .compile(input, initiating, plan))
}

/// The rows a projection is compiled from, as [`gather`] read them.
pub(crate) struct Gathered {
    predecessor_last_seq: i64,
    /// This thread's cited ranges with their events, in the order of the sources.
    cited: Vec<(seed_events::continuation::SeqRange, Vec<SessionEvent>)>,
    /// The events right before the initiating message.
    recent: Vec<SessionEvent>,
    lineage: Vec<ThreadRef>,
    origin_session_id: SessionId,
    recalled: Vec<seed_projections::continuation::recall::RecalledExcerpt>,
}

/// Reads what a projection is built from — the cited ranges and the recent tail before the
/// initiating message, by index, the lineage, and the ranges recalled repeatedly. Its cost
/// follows the cited ranges and the budget, never the transcript's length.
pub(crate) async fn gather(
    store: &Store,
    predecessor: &SessionRow,
    initiating: &SessionEvent,
    input: &ContinueSessionInput,
) -> Result<Gathered, seed_store::Error> {
    let predecessor_last_seq = store.last_seq(predecessor.id).await?;
    let mut cited = Vec::new();
    // Only this thread's ranges are loaded as excerpts; another thread's stays a source.
    let this_thread = |range: &seed_events::continuation::SeqRange| range.thread == predecessor.id;
    for range in input
        .sources
        .iter()
        .filter_map(Source::range)
        .filter(this_thread)
    {
        let events = store
            .read_events(
                range.thread,
                range.from_seq,
                range.to_seq,
                EXCERPT_EVENTS_MAX,
            )
            .await?;
        cited.push((range, events));
    }
    let recent_from = (initiating.seq - RECENT_EXCHANGES_EVENTS_MAX as i64).max(1);
    let recent = store
        .read_events(
            predecessor.id,
            recent_from,
            initiating.seq - 1,
            RECENT_EXCHANGES_EVENTS_MAX,
        )
        .await?;
    let (lineage, origin_session_id) = lineage(store, predecessor.id, &predecessor.title).await?;
    let recalled = crate::recalls::recalled_excerpts(store, predecessor.id).await?;
    Ok(Gathered {
        predecessor_last_seq,
        cited,
        recent,
        lineage,
        origin_session_id,
        recalled,
    })
}

impl Gathered {
    /// The projection of these rows (pure: `compile_projection_recalling`).
    pub(crate) fn compile(
        &self,
        input: &ContinueSessionInput,
        initiating: &SessionEvent,
        plan: PlanTransfer,
    ) -> Projection {
        compile_projection_recalling(
            &ProjectionInput {
                input,
                plan,
                lineage: &self.lineage,
                origin_session_id: self.origin_session_id,
                initiating,
                predecessor_last_seq: self.predecessor_last_seq,
                cited: &self.cited,
                recent: &self.recent,
                budget_bytes: CONTINUATION_PROJECTION_BUDGET_BYTES,
            },
            &self.recalled,
        )
    }
}

/// The answer to a call whose successor exists. When the successor never got its run (a crash
/// came between the creation and the queueing), it gets it now.
async fn replay(env: &RunEnv, edge: &ContinuationRow) -> Result<Outcome, Failure> {
    let store = &env.store;
    let successor_id = edge.successor_session_id;
    let Some(successor) = store.get_session(successor_id).await? else {
        return refuse("the successor this call made has been deleted");
    };
    let mut started = false;
    if store.list_session_runs(successor_id).await?.is_empty()
        && let Some(copied) = copied_message(store, successor_id).await?
    {
        started = start_successor_run(env, successor_id, copied.id).await;
    }
    Ok(Outcome {
        output: continued_output(successor_id, &successor.title),
        successor_to_start: started.then_some(successor_id),
    })
}

/// A successor's copy of the message it answers (the one of its first events that carries
/// `meta.continued_from`).
pub async fn copied_message(
    store: &Store,
    successor_id: SessionId,
) -> Result<Option<SessionEvent>, seed_store::Error> {
    Ok(store
        .read_events(successor_id, 1, 4, 4)
        .await?
        .into_iter()
        .find(|event| event.meta.get(CONTINUED_FROM_META).is_some()))
}

/// Queues a successor's run, on the interactive queue, for its copied message `message_id`.
/// The run continues the trace of the span current here (the continuation's, or the request's
/// of a person who continued by hand), when `traces` are given and on.
pub async fn queue_successor_run(
    store: &Store,
    traces: Option<&crate::traces::Traces>,
    successor_id: SessionId,
    message_id: seed_events::EventId,
    now_ms: i64,
) -> Result<(), seed_store::Error> {
    let run_id = RunId::new_v7();
    if let Some(traces) = traces {
        traces.continue_here(run_id);
    }
    let queued = store
        .enqueue_run(NewRun {
            id: run_id,
            session_id: successor_id,
            queue: Queue::Interactive,
            user_event_ids: vec![message_id],
            parent_run_id: None,
            typed: false,
            created_at_ms: now_ms,
        })
        .await;
    if let (Err(_), Some(traces)) = (&queued, traces) {
        traces.forget(run_id);
    }
    queued
}

/// Queues the successor's run for its copied message; false when that failed (the successor
/// is then a normal session whose message can be retried).
async fn start_successor_run(
    env: &RunEnv,
    successor_id: SessionId,
    message_id: seed_events::EventId,
) -> bool {
    let traces = Some(&env.settings.traces);
    match queue_successor_run(&env.store, traces, successor_id, message_id, (env.clock)()).await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%successor_id, %error, "could not queue a successor's run");
            false
        }
    }
}

fn continued_output(successor_id: SessionId, title: &str) -> VerbOutput {
    VerbOutput {
        content: format!(
            "Continued in session {successor_id} (\u{201c}{title}\u{201d}). This turn ends here: \
             the successor answers the user's message, starting from your handoff."
        ),
        is_error: false,
        ends_turn: true,
        placeholder: false,
        images: Vec::new(),
    }
}

/// The initiating message, copied word for word, with where it came from in its meta.
fn copy_of(initiating: &SessionEvent, now_ms: i64) -> NewEvent {
    let mut meta = match &initiating.meta {
        Value::Object(fields) => fields.clone(),
        _ => serde_json::Map::new(),
    };
    let from = ContinuedFrom {
        session_id: initiating.session_id,
        event_id: initiating.id,
        seq: initiating.seq,
    };
    meta.insert(
        CONTINUED_FROM_META.to_owned(),
        serde_json::to_value(from).unwrap_or(Value::Null),
    );
    NewEvent {
        kind: initiating.kind.clone(),
        role: initiating.role,
        actor: initiating.actor.clone(),
        content: initiating.content.clone(),
        meta: Value::Object(meta),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: now_ms,
    }
}

/// Checks every source against the database: a memory file exists; a thread is the agent's own
/// and holds the cited seqs.
async fn check_sources(
    store: &Store,
    account_id: AccountId,
    sources: &[Source],
) -> Result<(), Failure> {
    for (idx, source) in sources.iter().enumerate() {
        match source {
            Source::Resource { .. } => {}
            Source::Memory { path } => match store.read_memory(account_id, path).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return invalid(
                        &format!("sources[{idx}]"),
                        format!("sources[{idx}]: no such file: {path}"),
                    );
                }
                Err(error @ seed_store::Error::InvalidPath { .. }) => {
                    return invalid(
                        &format!("sources[{idx}]"),
                        format!("sources[{idx}]: {error}"),
                    );
                }
                Err(error) => return Err(error.into()),
            },
            Source::SessionEvents { .. } | Source::SessionEvent { .. } => {
                let Some(range) = source.range() else {
                    continue;
                };
                let own = store
                    .get_session(range.thread)
                    .await?
                    .is_some_and(|thread| thread.account_id == account_id);
                if !own {
                    return invalid(
                        &format!("sources[{idx}]"),
                        format!("sources[{idx}]: thread:{} not found", range.thread),
                    );
                }
                let last_seq = store.last_seq(range.thread).await?;
                if let Err(problem) = check_range(&range, last_seq) {
                    return invalid(
                        &format!("sources[{idx}]"),
                        format!("sources[{idx}]: {problem}"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// The chain behind the predecessor, oldest first and ending with it, and the chain's origin.
async fn lineage(
    store: &Store,
    predecessor: SessionId,
    predecessor_title: &str,
) -> Result<(Vec<ThreadRef>, SessionId), seed_store::Error> {
    let mut chain = vec![ThreadRef {
        session_id: predecessor,
        title: predecessor_title.to_owned(),
    }];
    let mut origin = predecessor;
    let mut current = predecessor;
    while let Some(edge) = store.edge_to(current).await? {
        origin = edge.origin_session_id;
        if chain.len() >= LINEAGE_MAX {
            break;
        }
        let title = store
            .get_session(edge.predecessor_session_id)
            .await?
            .map(|session| session.title)
            .unwrap_or_default();
        chain.push(ThreadRef {
            session_id: edge.predecessor_session_id,
            title,
        });
        current = edge.predecessor_session_id;
    }
    chain.reverse();
    Ok((chain, origin))
}
