//! The import tests' notation (see `import.rs`'s doc): a log and a store read from text, a
//! plan checked against the text it renders to.

use std::collections::BTreeSet;

use seed_durable::record::{TURN_DOCUMENT, TurnDocument, TurnState};
use seed_durable::{Batch, EntryBody, EntryId, StoreState};
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_projections::import::{
    AttachedFiles, ImportPlan, NO_FILES, RunView, SyncDocument, plan_import,
};
use seed_providers::{
    AssistantBlock, AssistantMessage, Message, ToolCall, ToolResultMessage, Usage, UserMessage,
    UserPart, text_response, tool_response,
};
use serde_json::json;

/// A log written as text (see the module doc), with the mark and the run it is imported for.
#[derive(Default)]
pub(crate) struct Given {
    pub(crate) log: Vec<SessionEvent>,
    pub(crate) sync: SyncDocument,
    pub(crate) own: Vec<EventId>,
    pub(crate) waiting: BTreeSet<EventId>,
}

pub(crate) fn given(text: &str) -> Given {
    use EventRole::{Assistant, System, Tool, User};
    let mut given = Given::default();
    for line in text.lines().map(str::trim).filter(|line| !line.is_empty()) {
        if line == "--- mark" {
            given.sync.mark = given.log.last().map_or(0, |event| event.seq);
            continue;
        }
        let (mut rest, mut tags) = (line, Vec::new());
        while let Some(inner) = rest.strip_suffix(']') {
            let open = inner.rfind('[').expect("a tag opens");
            tags.push(&inner[open + 1..]);
            rest = inner[..open].trim_end();
        }
        let (seq, rest) = rest.split_once(' ').expect("a seq and a kind");
        let seq: i64 = seq.parse().expect("a seq");
        let (kind, text) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut words = text.splitn(3, ' ');
        let mut word = || words.next().expect("an id and a name").to_owned();
        let said = json!({ "text": text });
        let (kind, role, actor, content) = match kind {
            "user" => ("message", User, "user", said),
            "assistant" => ("message", Assistant, "agent", said),
            "notice" => ("notice", System, "system", said),
            "action" => ("action", User, "user", said),
            "call" => {
                let call = json!({ "id": word(), "name": word(), "arguments": {} });
                ("tool_call", Assistant, "agent", call)
            }
            "result" => {
                let (id, name, content) = (word(), word(), word());
                let result = json!({
                    "tool_call_id": id, "tool_name": name, "content": content, "is_error": false,
                });
                ("tool_result", Tool, "runtime", result)
            }
            other => panic!("no event kind {other:?} in {line:?}"),
        };
        let mut event = SessionEvent {
            id: EventId(seq + 100),
            session_id: SessionId::from_u128(1),
            seq,
            kind: kind.to_owned(),
            role: Some(role),
            actor: Some(actor.to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            pi_entry_id: None,
            created_at_ms: seq,
        };
        for tag in tags {
            match tag {
                "own" => given.own.push(event.id),
                "waiting" => _ = given.waiting.insert(event.id),
                "left out" => given.sync.left_out.push(seq),
                _ => {
                    let entry = tag.strip_prefix("entry ").expect("a known tag");
                    event.pi_entry_id = Some(entry.parse().expect("an entry id"));
                }
            }
        }
        given.log.push(event);
    }
    given
}

pub(super) fn plan(
    store: &StoreState,
    given: &Given,
    attached: &AttachedFiles,
    rebuild: bool,
) -> ImportPlan {
    let (own_event_ids, waiting_event_ids) = (&given.own[..], &given.waiting);
    let run = RunView {
        own_event_ids,
        waiting_event_ids,
        attached,
    };
    plan_import(&given.log, store, &given.sync, run, rebuild)
}

/// Plans the import of the log before `=>` in `case` and checks that the plan reads as what
/// follows it (each line trimmed).
pub(super) fn try_check(store: &StoreState, case: &str) -> Result<ImportPlan, String> {
    let (log, expected) = case.split_once("=>").expect("a log, `=>` and a plan");
    let planned = plan(store, &given(log), &NO_FILES, false);
    expect(&planned, expected)?;
    Ok(planned)
}

pub(super) fn check(store: &StoreState, case: &str) -> ImportPlan {
    try_check(store, case).unwrap_or_else(|failure| panic!("{failure}"))
}

pub(super) fn assert_reads(planned: &ImportPlan, expected: &str) {
    expect(planned, expected).unwrap_or_else(|failure| panic!("{failure}"));
}

fn expect(planned: &ImportPlan, expected: &str) -> Result<(), String> {
    let lines = |text: &str| {
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (actual, expected) = (render(planned), lines(expected));
    match lines(&actual) == expected {
        true => Ok(()),
        false => Err(format!("expected:\n{expected}\nplanned:\n{actual}")),
    }
}

/// The plan as text: its mode, an entry a line, the input and its parts, and the sync document.
fn render(plan: &ImportPlan) -> String {
    let mut text = format!("{:?}", plan.mode);
    for entry in &plan.entries {
        text.push_str(&match entry {
            EntryBody::Reset {} => "\nreset".to_owned(),
            EntryBody::Replay { message } => format!("\nreplay {}", render_message(message)),
            EntryBody::Edit { target, message } => {
                format!("\nedit {target} {}", render_message(message))
            }
            other => format!("\n{other:?}"),
        });
    }
    let SyncDocument {
        mark,
        left_out,
        input_event_id,
    } = &plan.sync;
    let input_event = input_event_id.map_or("none".to_owned(), |id| (id.0 - 100).to_string());
    let input = render_user(&plan.input);
    text + &format!(
        "\ninput {input}\nsync mark {mark}, left out {left_out:?}, input event {input_event}"
    )
}

fn render_message(message: &Message) -> String {
    match message {
        Message::User(user) => format!("user {}", render_user(user)),
        Message::ToolResult(ToolResultMessage {
            tool_call_id,
            tool_name,
            content,
            is_error,
            images,
        }) => {
            let error = if *is_error { " (error)" } else { "" };
            let mut text = format!("result {tool_call_id} {tool_name} {content:?}{error}");
            for image in images {
                let id = image.attachment_id.as_deref().unwrap_or("?");
                text += &format!("\n  + image {} {} ({id})", image.media_type, image.data);
            }
            text
        }
        Message::Assistant(AssistantMessage {
            content,
            usage,
            stop_reason,
            model,
            error_message,
        }) => {
            let blocks: Vec<String> = (content.iter())
                .map(|block| match block {
                    AssistantBlock::Text { text } => format!("{text:?}"),
                    AssistantBlock::ToolCall(ToolCall {
                        id,
                        name,
                        arguments,
                    }) => format!("call {id} {name} {arguments}"),
                    other => format!("{other:?}"),
                })
                .collect();
            let mut text = format!("assistant[{stop_reason:?}] {}", blocks.join(", "));
            if model != "seed.replay" {
                text.push_str(&format!(" model {model:?}"));
            }
            if *usage != Usage::default() {
                text.push_str(&format!(" usage {usage:?}"));
            }
            if let Some(error) = error_message {
                text.push_str(&format!(" error {error:?}"));
            }
            text
        }
    }
}

fn render_user(user: &UserMessage) -> String {
    let mut text = format!("{:?}", user.text);
    for part in &user.parts {
        text.push_str(&match part {
            UserPart::Text { text: part } => format!("\n  + text {part:?}"),
            UserPart::Image { media_type, data } => format!("\n  + image {media_type} {data}"),
        });
    }
    text
}

/// A store by name: `answered` ("hi", then "hello"), `parked` ("research it", a delegate call
/// answered with a placeholder, entry 3), `parked, reset`, `cut off` ("send it", then "sending"
/// and a call with no result) or `empty`; its turns' request id `r-old`.
pub(crate) fn store(fixture: &str) -> StoreState {
    let user = |text: &str| EntryBody::User {
        request_id: "r-old".to_owned(),
        message: UserMessage::new(text.to_owned()),
    };
    let answer = |message| EntryBody::Assistant {
        request_id: "r-old".to_owned(),
        message,
    };
    let call = |id: &str, name: &str| {
        vec![ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: json!({}),
        }]
    };
    let placeholder = EntryBody::ToolResult {
        request_id: "r-old".to_owned(),
        message: ToolResultMessage {
            tool_call_id: "d1".to_owned(),
            tool_name: "delegate".to_owned(),
            content: "the child is still running".to_owned(),
            is_error: false,
            images: Vec::new(),
        },
        ends_turn: true,
        placeholder: true,
    };
    let parked = [
        user("research it"),
        answer(tool_response("", call("d1", "delegate"))),
        placeholder,
    ];
    entries(match fixture {
        "answered" => vec![user("hi"), answer(text_response("hello"))],
        "parked" => parked.to_vec(),
        "parked, reset" => [&parked[..], &[EntryBody::Reset {}]].concat(),
        "cut off" => vec![
            user("send it"),
            answer(tool_response("sending", call("m1", "memory"))),
        ],
        "empty" => vec![],
        other => panic!("no store {other:?}"),
    })
}

fn entries(bodies: Vec<EntryBody>) -> StoreState {
    let mut state = StoreState::default();
    let mut batch = Batch::new(&state);
    for body in bodies {
        batch.entry(body);
    }
    state.apply(batch);
    state
}

/// `state` with its current turn, of `request_id`, in `turn_state`: its input entry
/// `input_entry_id`, its answer (for an answered turn) the newest entry.
pub(super) fn with_turn(
    mut state: StoreState,
    request_id: &str,
    input_entry_id: EntryId,
    turn_state: TurnState,
) -> StoreState {
    let answered = turn_state == TurnState::Answered;
    let answer_entry_id = state
        .entries
        .last()
        .map(|entry| entry.id)
        .filter(|_| answered);
    let request_id = request_id.to_owned();
    let turn = TurnDocument {
        request_id,
        input_entry_id,
        state: turn_state,
        answer_entry_id,
        reason: None,
    };
    let mut batch = Batch::new(&state);
    batch.document(TURN_DOCUMENT, Some(&turn));
    state.apply(batch);
    state
}

/// `state` after the turn `theirs#0` committed `plan` and its input, answered `answer` and
/// settled in `turn_state`.
pub(super) fn after_their_turn(
    state: &StoreState,
    plan: &ImportPlan,
    answer: &str,
    turn_state: TurnState,
) -> StoreState {
    let request_id = || "theirs#0".to_owned();
    let mut bodies: Vec<EntryBody> = state
        .entries
        .iter()
        .map(|entry| entry.body.clone())
        .collect();
    bodies.extend(plan.entries.clone());
    bodies.push(EntryBody::User {
        request_id: request_id(),
        message: plan.input.clone(),
    });
    let input_entry_id = bodies.len() as EntryId;
    bodies.push(EntryBody::Assistant {
        request_id: request_id(),
        message: text_response(answer),
    });
    with_turn(entries(bodies), "theirs#0", input_entry_id, turn_state)
}
