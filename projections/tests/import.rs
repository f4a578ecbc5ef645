//! One test per import rule: a small hand-written log and store, and the exact entries, input,
//! mark and left-out list the import plans.

use std::collections::BTreeSet;

use seed_durable::{Batch, EntryBody, StoreState};
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_projections::import::{
    BACKGROUND_WORK_UPDATE, ImportMode, ImportPlan, RunView, SyncDocument, answered_already,
    delegated_in_turn, plan_import,
};
use seed_providers::{
    AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, ToolResultMessage, Usage,
    UserMessage, text_response, tool_response,
};
use serde_json::json;

fn session() -> SessionId {
    SessionId::from_u128(1)
}

/// Event ids are seq + 100, so a test can tell them apart.
fn event(
    seq: i64,
    kind: &str,
    role: EventRole,
    actor: &str,
    content: serde_json::Value,
) -> SessionEvent {
    SessionEvent {
        id: EventId(seq + 100),
        session_id: session(),
        seq,
        kind: kind.to_owned(),
        role: Some(role),
        actor: Some(actor.to_owned()),
        content,
        meta: json!({}),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: seq,
    }
}

fn user(seq: i64, text: &str) -> SessionEvent {
    event(
        seq,
        "message",
        EventRole::User,
        "user",
        json!({ "text": text }),
    )
}

fn from_store(mut event: SessionEvent, entry_id: i64) -> SessionEvent {
    event.pi_entry_id = Some(entry_id);
    event
}

fn assistant_event(seq: i64, text: &str) -> SessionEvent {
    event(
        seq,
        "message",
        EventRole::Assistant,
        "agent",
        json!({ "text": text }),
    )
}

fn call_event(seq: i64, id: &str, name: &str) -> SessionEvent {
    event(
        seq,
        "tool_call",
        EventRole::Assistant,
        "agent",
        json!({ "id": id, "name": name, "arguments": {} }),
    )
}

fn result_event(seq: i64, id: &str, name: &str, content: &str) -> SessionEvent {
    event(
        seq,
        "tool_result",
        EventRole::Tool,
        "runtime",
        json!({ "tool_call_id": id, "tool_name": name, "content": content, "is_error": false }),
    )
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments: json!({}),
    }
}

fn store(bodies: Vec<EntryBody>) -> StoreState {
    let mut state = StoreState::default();
    let mut batch = Batch::new(&state);
    for body in bodies {
        batch.entry(body);
    }
    state.apply(batch);
    state
}

fn input_entry(text: &str) -> EntryBody {
    EntryBody::User {
        request_id: "r-old".to_owned(),
        message: UserMessage::new(text.to_owned()),
    }
}

fn answer_entry(message: AssistantMessage) -> EntryBody {
    EntryBody::Assistant {
        request_id: "r-old".to_owned(),
        message,
    }
}

fn replay_user(text: &str) -> EntryBody {
    EntryBody::Replay {
        message: Message::User(UserMessage::new(text.to_owned())),
    }
}

fn replay_assistant(text: &str, calls: Vec<ToolCall>) -> EntryBody {
    let mut content = Vec::new();
    if !text.is_empty() {
        content.push(AssistantBlock::Text {
            text: text.to_owned(),
        });
    }
    let stop_reason = if calls.is_empty() {
        StopReason::Stop
    } else {
        StopReason::ToolUse
    };
    content.extend(calls.into_iter().map(AssistantBlock::ToolCall));
    EntryBody::Replay {
        message: Message::Assistant(AssistantMessage {
            content,
            usage: Usage::default(),
            stop_reason,
            model: "seed.replay".to_owned(),
            error_message: None,
        }),
    }
}

fn replay_result(id: &str, name: &str, content: &str) -> EntryBody {
    EntryBody::Replay {
        message: Message::ToolResult(ToolResultMessage {
            tool_call_id: id.to_owned(),
            tool_name: name.to_owned(),
            content: content.to_owned(),
            is_error: false,
        }),
    }
}

fn plan(
    log: &[SessionEvent],
    store: &StoreState,
    sync: SyncDocument,
    own: &[i64],
    waiting: &[i64],
) -> ImportPlan {
    let own: Vec<EventId> = own.iter().map(|seq| EventId(seq + 100)).collect();
    let waiting: BTreeSet<EventId> = waiting.iter().map(|seq| EventId(seq + 100)).collect();
    plan_import(
        log,
        store,
        &sync,
        RunView {
            own_event_ids: &own,
            waiting_event_ids: &waiting,
            attached: &seed_projections::import::NO_FILES,
        },
        false,
    )
}

fn sync(mark: i64, left_out: &[i64]) -> SyncDocument {
    SyncDocument {
        mark,
        left_out: left_out.to_vec(),
        input_event_id: None,
    }
}

fn input(text: &str) -> UserMessage {
    UserMessage::new(text.to_owned())
}

/// A store that answered "hi" with "hello", and the log that says so.
fn answered_turn() -> (StoreState, Vec<SessionEvent>) {
    let store = store(vec![
        input_entry("hi"),
        answer_entry(text_response("hello")),
    ]);
    let log = vec![user(1, "hi"), from_store(assistant_event(2, "hello"), 2)];
    (store, log)
}

#[test]
fn append_makes_the_runs_newest_message_the_input() {
    let (store, mut log) = answered_turn();
    log.push(user(3, "and then?"));
    let planned = plan(&log, &store, sync(1, &[]), &[3], &[]);
    assert_eq!(planned.mode, ImportMode::Append);
    assert_eq!(planned.entries, []);
    assert_eq!(planned.input, input("and then?"));
    assert_eq!(planned.sync.mark, 3);
    assert_eq!(planned.sync.left_out, Vec::<i64>::new());
    assert_eq!(planned.sync.input_event_id, Some(EventId(103)));
}

#[test]
fn a_message_sent_while_the_answer_streamed_follows_that_answer() {
    // "wait" arrived (seq 2) before the answer's events were written (seq 3): the store holds
    // the answer, so importing "wait" now puts it behind the answer.
    let store = store(vec![
        input_entry("hi"),
        answer_entry(text_response("hello")),
    ]);
    let log = vec![
        user(1, "hi"),
        user(2, "wait"),
        from_store(assistant_event(3, "hello"), 2),
    ];
    let planned = plan(&log, &store, sync(1, &[]), &[2], &[]);
    assert_eq!(planned.mode, ImportMode::Append);
    assert_eq!(planned.entries, []);
    assert_eq!(planned.input, input("wait"));
    assert_eq!(planned.sync.mark, 3);
}

#[test]
fn append_replays_notices_actions_and_text_seed_wrote_before_the_input() {
    let (store, mut log) = answered_turn();
    // A stopped response's text, written by Seed; a notice (framed, so the model never takes
    // it for the person's words); a verb the user ran; two messages of the run: the older is
    // replayed, the newest is the input.
    log.push(assistant_event(3, "I was about to say"));
    log.push(event(
        4,
        "notice",
        EventRole::System,
        "system",
        json!({ "text": "the plan has open steps" }),
    ));
    log.push(event(
        5,
        "action",
        EventRole::User,
        "user",
        json!({ "text": "[status] title set to Trip" }),
    ));
    log.push(user(6, "first"));
    log.push(user(7, "second"));
    let planned = plan(&log, &store, sync(2, &[]), &[6, 7], &[]);
    assert_eq!(planned.mode, ImportMode::Append);
    assert_eq!(
        planned.entries,
        [
            replay_assistant("I was about to say", vec![]),
            replay_user("<notice>the plan has open steps</notice>"),
            replay_user("[status] title set to Trip"),
            replay_user("first"),
        ]
    );
    assert_eq!(planned.input, input("second"));
    assert_eq!(planned.sync.mark, 7);
}

#[test]
fn a_message_after_the_runs_own_is_left_out_and_imported_by_its_own_run() {
    let (store, mut log) = answered_turn();
    log.push(user(3, "mine"));
    log.push(user(4, "next one"));
    let planned = plan(&log, &store, sync(2, &[]), &[3], &[4]);
    assert_eq!(planned.input, input("mine"));
    assert_eq!(planned.entries, []);
    assert_eq!(planned.sync.mark, 4);
    assert_eq!(planned.sync.left_out, [4]);

    // Later, the run queued for it imports it from the left-out list.
    let later = plan(&log, &store, planned.sync.clone(), &[4], &[]);
    assert_eq!(later.mode, ImportMode::Append);
    assert_eq!(later.input, input("next one"));
    assert_eq!(later.sync.mark, 4);
    assert_eq!(later.sync.left_out, Vec::<i64>::new());
}

/// A store whose run delegated: the call was answered with a placeholder.
fn parked_turn() -> StoreState {
    store(vec![
        input_entry("research it"),
        answer_entry(tool_response("", vec![call("d1", "delegate")])),
        EntryBody::ToolResult {
            request_id: "r-old".to_owned(),
            message: ToolResultMessage {
                tool_call_id: "d1".to_owned(),
                tool_name: "delegate".to_owned(),
                content: "the child is still running".to_owned(),
                is_error: false,
            },
            ends_turn: true,
            placeholder: true,
        },
    ])
}

fn parked_log() -> Vec<SessionEvent> {
    vec![
        user(1, "research it"),
        from_store(assistant_event(2, ""), 2),
        from_store(call_event(3, "d1", "delegate"), 2),
    ]
}

#[test]
fn a_childs_result_edits_its_placeholder_and_the_input_is_a_background_update() {
    let store = parked_turn();
    let mut log = parked_log();
    // A message for another run, still waiting, and the child's result.
    log.push(user(4, "unrelated"));
    log.push(result_event(5, "d1", "delegate", "the answer is 42"));
    // The parked run takes its later pass: its own message was read long ago.
    let planned = plan(&log, &store, sync(3, &[]), &[1], &[4]);
    assert_eq!(planned.mode, ImportMode::Edit);
    assert_eq!(
        planned.entries,
        [EntryBody::Edit {
            target: 3,
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: "d1".to_owned(),
                tool_name: "delegate".to_owned(),
                content: "the answer is 42".to_owned(),
                is_error: false,
            }),
        }]
    );
    assert_eq!(planned.input, input(BACKGROUND_WORK_UPDATE));
    assert_eq!(planned.sync.mark, 5);
    assert_eq!(
        planned.sync.left_out,
        [4],
        "another run's message waits for it"
    );
    assert_eq!(planned.sync.input_event_id, None);
}

#[test]
fn a_parked_runs_message_is_not_waiting_its_turn() {
    let store = parked_turn();
    let mut log = parked_log();
    // seq 4 belongs to a run that is parked, not waiting: whoever imports next takes it in.
    log.push(user(4, "also consider this"));
    log.push(result_event(5, "d1", "delegate", "done"));
    let planned = plan(&log, &store, sync(3, &[]), &[], &[]);
    assert_eq!(planned.mode, ImportMode::Edit);
    assert_eq!(planned.entries.len(), 2);
    assert_eq!(planned.entries[0], replay_user("also consider this"));
    assert!(matches!(
        planned.entries[1],
        EntryBody::Edit { target: 3, .. }
    ));
    assert_eq!(planned.sync.left_out, Vec::<i64>::new());
}

#[test]
fn a_result_the_runtime_wrote_for_a_cut_off_call_rebuilds_the_context() {
    // The store's turn made a call that has no result: a restart cut it off, and the runtime
    // wrote its result to the log.
    let store = store(vec![
        input_entry("send it"),
        answer_entry(tool_response("sending", vec![call("m1", "memory")])),
    ]);
    let log = vec![
        user(1, "send it"),
        from_store(assistant_event(2, "sending"), 2),
        from_store(call_event(3, "m1", "memory"), 2),
        result_event(4, "m1", "memory", "interrupted by a service restart"),
        user(5, "did it work?"),
    ];
    let planned = plan(&log, &store, sync(3, &[]), &[5], &[]);
    assert_eq!(planned.mode, ImportMode::Rebuild);
    assert_eq!(
        planned.entries,
        [
            EntryBody::Reset {},
            replay_user("send it"),
            replay_assistant("sending", vec![call("m1", "memory")]),
            replay_result("m1", "memory", "interrupted by a service restart"),
        ]
    );
    assert_eq!(planned.input, input("did it work?"));
    assert_eq!(planned.sync.mark, 5);
}

#[test]
fn a_late_result_whose_placeholder_left_the_context_rebuilds_it() {
    let mut bodies: Vec<EntryBody> = parked_turn()
        .entries
        .into_iter()
        .map(|entry| entry.body)
        .collect();
    bodies.push(EntryBody::Reset {});
    let store = store(bodies);
    let mut log = parked_log();
    log.push(result_event(4, "d1", "delegate", "finally"));
    let planned = plan(&log, &store, sync(3, &[]), &[], &[]);
    assert_eq!(planned.mode, ImportMode::Rebuild);
    assert_eq!(
        planned.entries,
        [
            EntryBody::Reset {},
            replay_user("research it"),
            replay_assistant("", vec![call("d1", "delegate")]),
            replay_result("d1", "delegate", "finally"),
        ]
    );
    assert_eq!(planned.input, input(BACKGROUND_WORK_UPDATE));
}

#[test]
fn a_session_with_no_store_rebuilds_from_the_whole_log() {
    let empty = StoreState::default();
    let log = vec![
        user(1, "hi"),
        from_store(assistant_event(2, "hello"), 2),
        user(3, "again"),
    ];
    let planned = plan(&log, &empty, SyncDocument::default(), &[3], &[]);
    assert_eq!(planned.mode, ImportMode::Rebuild);
    assert_eq!(
        planned.entries,
        [
            EntryBody::Reset {},
            replay_user("hi"),
            replay_assistant("hello", vec![])
        ]
    );
    assert_eq!(planned.input, input("again"));
    assert_eq!(planned.sync.mark, 3);

    // A brand-new session: only its first message, which is the input.
    let planned = plan(&log[..1], &empty, SyncDocument::default(), &[1], &[]);
    assert_eq!(planned.entries, [EntryBody::Reset {}]);
    assert_eq!(planned.input, input("hi"));
}

#[test]
fn a_rebuild_leaves_out_what_belongs_to_runs_still_waiting() {
    let empty = StoreState::default();
    let log = vec![user(1, "mine"), user(2, "theirs")];
    let planned = plan(&log, &empty, SyncDocument::default(), &[1], &[2]);
    assert_eq!(planned.entries, [EntryBody::Reset {}]);
    assert_eq!(planned.input, input("mine"));
    assert_eq!(planned.sync.left_out, [2]);
}

/// `state` with its current turn, of `request_id`, taking entry `input_entry_id` as its input.
fn with_turn(mut state: StoreState, request_id: &str, input_entry_id: u64) -> StoreState {
    use seed_durable::record::{TURN_DOCUMENT, TurnDocument, TurnState};
    let mut batch = Batch::new(&state);
    batch.document(
        TURN_DOCUMENT,
        Some(&TurnDocument {
            request_id: request_id.to_owned(),
            input_entry_id,
            state: TurnState::Ended,
            answer_entry_id: None,
            reason: None,
        }),
    );
    state.apply(batch);
    state
}

#[test]
fn a_turn_delegated_when_it_answered_a_call_with_a_placeholder() {
    // The turn that answered the delegate call with a placeholder delegated.
    assert!(delegated_in_turn(
        &with_turn(parked_turn(), "r-old", 1),
        "r-old"
    ));
    // A turn of another request id (a later pass) did not, though the store has the placeholder.
    assert!(!delegated_in_turn(
        &with_turn(parked_turn(), "r-new", 1),
        "r-new"
    ));
    // Nor does a turn asked about under another id than its own.
    assert!(!delegated_in_turn(
        &with_turn(parked_turn(), "r-old", 1),
        "r-new"
    ));
    // A placeholder at or before the turn's input belongs to an earlier turn.
    assert!(!delegated_in_turn(
        &with_turn(parked_turn(), "r-old", 3),
        "r-old"
    ));
    // No turn, no delegation.
    assert!(!delegated_in_turn(&parked_turn(), "r-old"));
}

/// `state` with its current turn, of `request_id`, in `turn_state`: its input entry
/// `input_entry_id`, its answer (for an answered turn) the newest entry.
fn settled_turn(
    mut state: StoreState,
    request_id: &str,
    input_entry_id: u64,
    turn_state: seed_durable::record::TurnState,
) -> StoreState {
    use seed_durable::record::{TURN_DOCUMENT, TurnDocument, TurnState};
    let answer_entry_id = (turn_state == TurnState::Answered)
        .then(|| state.entries.last().map(|entry| entry.id))
        .flatten();
    let mut batch = Batch::new(&state);
    batch.document(
        TURN_DOCUMENT,
        Some(&TurnDocument {
            request_id: request_id.to_owned(),
            input_entry_id,
            state: turn_state,
            answer_entry_id,
            reason: None,
        }),
    );
    state.apply(batch);
    state
}

#[test]
fn a_parked_run_whose_childs_result_another_turn_answered_returns_that_answer() {
    use seed_durable::record::TurnState;
    // The parent parked on its child (entries 1-3). A message came while it waited; the
    // child's result arrived before that message's run imported, so that run took the result
    // in (an edit of the placeholder) with its message, and answered.
    let mut log = parked_log();
    log.push(user(4, "anything new?"));
    log.push(result_event(5, "d1", "delegate", "the answer is 42"));
    let theirs = plan(&log, &parked_turn(), sync(3, &[]), &[4], &[]);
    assert_eq!(theirs.mode, ImportMode::Edit);
    assert_eq!(theirs.sync.input_event_id, Some(EventId(104)));
    let mut bodies: Vec<EntryBody> = parked_turn()
        .entries
        .iter()
        .map(|e| e.body.clone())
        .collect();
    bodies.extend(theirs.entries.clone());
    bodies.push(EntryBody::User {
        request_id: "theirs#0".to_owned(),
        message: theirs.input.clone(),
    });
    bodies.push(EntryBody::Assistant {
        request_id: "theirs#0".to_owned(),
        message: text_response("it is 42"),
    });
    let answered = settled_turn(store(bodies.clone()), "theirs#0", 5, TurnState::Answered);
    log.push(from_store(assistant_event(6, "it is 42"), 6));

    // The parent's later pass finds nothing to take in and no message of its own: it returns
    // the answer the other turn gave, without asking the model.
    let later_pass = plan(&log, &answered, theirs.sync.clone(), &[1], &[]);
    assert_eq!(later_pass.entries, []);
    assert_eq!(later_pass.input, input(BACKGROUND_WORK_UPDATE));
    assert_eq!(
        answered_already(&later_pass, &answered, "parent#1"),
        Some((6, text_response("it is 42")))
    );

    // Had that turn failed (or ended without an answer), the model is asked.
    for unanswered in [TurnState::Failed, TurnState::Ended, TurnState::Stopped] {
        let state = settled_turn(store(bodies.clone()), "theirs#0", 5, unanswered);
        assert_eq!(answered_already(&later_pass, &state, "parent#1"), None);
    }
    // Had the result not been taken in, the parent's pass imports it and asks the model.
    let not_taken_in = plan(&log, &parked_turn(), sync(3, &[]), &[1], &[4]);
    assert_eq!(not_taken_in.mode, ImportMode::Edit);
    assert_eq!(answered_already(&not_taken_in, &answered, "parent#1"), None);
}

#[test]
fn a_run_whose_message_another_turn_took_in_and_answered_returns_that_answer() {
    use seed_durable::record::TurnState;
    // "mine" arrived just before "theirs", and its run was not yet waiting when the run of
    // "theirs" imported: that import took "mine" in ahead of its own message, and answered.
    let (first, mut log) = answered_turn();
    log.push(user(3, "mine"));
    log.push(user(4, "theirs"));
    let theirs = plan(&log, &first, sync(2, &[]), &[4], &[]);
    assert_eq!(theirs.entries, [replay_user("mine")]);
    assert_eq!(theirs.input, input("theirs"));
    let mut bodies: Vec<EntryBody> = first.entries.iter().map(|e| e.body.clone()).collect();
    bodies.extend(theirs.entries.clone());
    bodies.push(EntryBody::User {
        request_id: "theirs#0".to_owned(),
        message: theirs.input.clone(),
    });
    bodies.push(answer_entry(text_response("both answered")));
    let answered = settled_turn(store(bodies.clone()), "theirs#0", 4, TurnState::Answered);
    log.push(from_store(assistant_event(5, "both answered"), 5));

    let mine = plan(&log, &answered, theirs.sync.clone(), &[3], &[]);
    assert_eq!(mine.entries, []);
    assert_eq!(mine.sync.input_event_id, None);
    assert_eq!(
        answered_already(&mine, &answered, "mine#0"),
        Some((5, text_response("both answered")))
    );
    // The same turn coming back is the harness's to settle, not this rule's.
    assert_eq!(answered_already(&mine, &answered, "theirs#0"), None);
    // A message the run has not had answered yet is its input: the model is asked.
    log.push(user(6, "and now?"));
    let next = plan(&log, &answered, mine.sync.clone(), &[6], &[]);
    assert_eq!(next.input, input("and now?"));
    assert_eq!(answered_already(&next, &answered, "next#0"), None);
    // Something written after the answer (a notice) is taken in: the model is asked.
    let mut noticed = log[..6].to_vec();
    noticed.push(event(
        6,
        "notice",
        EventRole::System,
        "system",
        json!({ "text": "the plan has open steps" }),
    ));
    let with_notice = plan(&noticed, &answered, theirs.sync.clone(), &[3], &[]);
    assert_eq!(
        with_notice.entries,
        [replay_user("<notice>the plan has open steps</notice>")]
    );
    assert_eq!(answered_already(&with_notice, &answered, "mine#0"), None);
}

/// A response that only called tools has no message event: its calls, projected from one
/// entry, are replayed as one assistant message, and the calls of the next such response as
/// another.
#[test]
fn a_rebuild_replays_the_calls_of_one_silent_response_as_one_message() {
    let empty = StoreState::default();
    let log = vec![
        user(1, "hi"),
        from_store(call_event(2, "c1", "status"), 2),
        from_store(call_event(3, "c2", "plan"), 2),
        from_store(result_event(4, "c1", "status", "ok"), 3),
        from_store(result_event(5, "c2", "plan", "ok"), 4),
        from_store(call_event(6, "c3", "read"), 5),
        from_store(result_event(7, "c3", "read", "text"), 6),
        from_store(assistant_event(8, "done"), 7),
        user(9, "again"),
    ];
    let planned = plan(&log, &empty, SyncDocument::default(), &[9], &[]);
    assert_eq!(planned.mode, ImportMode::Rebuild);
    assert_eq!(
        planned.entries,
        [
            EntryBody::Reset {},
            replay_user("hi"),
            replay_assistant("", vec![call("c1", "status"), call("c2", "plan")]),
            replay_result("c1", "status", "ok"),
            replay_result("c2", "plan", "ok"),
            replay_assistant("", vec![call("c3", "read")]),
            replay_result("c3", "read", "text"),
            replay_assistant("done", vec![]),
        ]
    );
}

/// A message naming two files, and what the shell read of them.
fn attached_files() -> (SessionEvent, seed_projections::import::AttachedFiles) {
    use seed_projections::attachments::{AttachedContent, AttachedFile};
    let message = event(
        3,
        "message",
        EventRole::User,
        "user",
        json!({"text": "look", "attachments": [
            {"id": "a1", "name": "dot.png", "media_type": "image/png", "size_bytes": 3},
            "a2",
        ]}),
    );
    let files = [
        AttachedFile {
            id: "a1".to_owned(),
            name: "dot.png".to_owned(),
            media_type: "image/png".to_owned(),
            size_bytes: 3,
            content: AttachedContent::Image(vec![1, 2, 3]),
        },
        AttachedFile {
            id: "a2".to_owned(),
            name: "notes.txt".to_owned(),
            media_type: "text/plain".to_owned(),
            size_bytes: 5,
            content: AttachedContent::Text(b"hello".to_vec()),
        },
    ];
    (
        message,
        files
            .into_iter()
            .map(|file| (file.id.clone(), file))
            .collect(),
    )
}

#[test]
fn the_input_carries_the_files_its_message_names_as_the_model_reads_them() {
    use seed_providers::UserPart;
    let (store, mut log) = answered_turn();
    let (message, files) = attached_files();
    log.push(message);
    let own = [EventId(103)];
    let waiting = BTreeSet::new();
    let view = RunView {
        own_event_ids: &own,
        waiting_event_ids: &waiting,
        attached: &files,
    };
    let planned = plan_import(&log, &store, &sync(1, &[]), view, false);
    assert_eq!(planned.mode, ImportMode::Append);
    assert_eq!(
        planned.input.parts,
        [
            UserPart::Text {
                text: "attachment:a1 (dot.png, image/png, 3 bytes): the image follows".to_owned()
            },
            UserPart::Image {
                media_type: "image/png".to_owned(),
                data: "AQID".to_owned()
            },
            UserPart::Text {
                text: "attachment:a2 (notes.txt, text/plain, 5 bytes):\n<attachment_text>\nhello\n\
                       </attachment_text>"
                    .to_owned()
            },
        ]
    );
    assert_eq!(planned.input.text, "look");

    // A rebuild replays the message with the same parts; a file the shell could not read is
    // named as missing.
    log.push(user(4, "again"));
    let planned = plan_import(
        &log,
        &store,
        &sync(1, &[]),
        RunView {
            own_event_ids: &[EventId(104)],
            ..view
        },
        true,
    );
    assert_eq!(planned.mode, ImportMode::Rebuild);
    let replayed: Vec<&UserMessage> = planned
        .entries
        .iter()
        .filter_map(|entry| match entry {
            EntryBody::Replay {
                message: Message::User(user),
            } => Some(user),
            _ => None,
        })
        .collect();
    assert_eq!(replayed.len(), 2, "{:?}", planned.entries);
    assert_eq!(replayed[1].parts, input_with(&log[2], &files).parts);
    let no_files = seed_projections::import::NO_FILES.clone();
    let planned = plan_import(
        &log,
        &store,
        &sync(1, &[]),
        RunView {
            own_event_ids: &[EventId(104)],
            attached: &no_files,
            ..view
        },
        true,
    );
    let missing = planned.entries.iter().any(|entry| {
        matches!(entry, EntryBody::Replay { message: Message::User(user) }
            if user.parts.iter().any(|part| matches!(part, UserPart::Text { text }
                if text == "attachment:a1 (?, ?, 0 bytes): not shown (this session holds no such attachment)")))
    });
    assert!(missing, "{:?}", planned.entries);
}

/// The input `message` makes when it is its run's own.
fn input_with(
    message: &SessionEvent,
    files: &seed_projections::import::AttachedFiles,
) -> UserMessage {
    let waiting = BTreeSet::new();
    let (store, _) = answered_turn();
    plan_import(
        std::slice::from_ref(message),
        &store,
        &sync(1, &[]),
        RunView {
            own_event_ids: &[message.id],
            waiting_event_ids: &waiting,
            attached: files,
        },
        false,
    )
    .input
}
