//! Continuation end to end, over a real SQLite file and the scripted model: the successor and
//! its first request, the edge and its manifest, the predecessor's log, the links, the
//! notifications, replay, the plan transfer, attachments, and the per-turn `<context_usage>`
//! guidance. The refusals are in `continuation_refusals.rs`.

use crate::common;

use std::sync::Arc;

use crate::common::continuing::{
    CALL_ID, CONTINUE, good_arguments, input_of, is_projection, n_sessions, new_message,
    parked_call_site, say, setup, successor_run,
};
use crate::common::{account, log, session, test_clock, within};
use futures::StreamExt;
use seed_actors::bus::SeqRange;
use seed_actors::verbs::continue_session::ContinueSession;
use seed_actors::verbs::read::Read;
use seed_actors::{Notification, Runtime, RuntimeSettings, Verb};
use seed_events::continuation::CONTINUED_FROM_META;
use seed_events::{EventRole, NewEvent, Queue, RunId, RunStatus, SessionContinuationManifest};
use seed_providers::text_response;
use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, Usage, UserPart};
use seed_store::{Config, NewAttachment, NewSession, Store};
use serde_json::{Value, json};

#[actix::test]
async fn the_successor_starts_from_the_projection_and_the_copied_message() -> anyhow::Result<()> {
    let setup = setup().await?;
    let mut bus = setup
        .runtime
        .publisher()
        .subscribe()
        .await
        .expect("the bus");
    say(&setup, session(0), "hello").await?;
    let run = say(&setup, session(0), CONTINUE).await?;

    // The run succeeded with where the answer went.
    assert_eq!(run.status, RunStatus::Succeeded);
    let successor = run
        .continued_to_session_id()
        .expect("continued_to_session_id");
    let edge = setup
        .store
        .find_continuation(session(0), CALL_ID)
        .await?
        .expect("the edge");
    assert_eq!(edge.successor_session_id, successor);
    assert_eq!(
        run.result.as_ref().and_then(|r| r.get("continuation_id")),
        Some(&json!(edge.id))
    );
    let successor_run = successor_run(&setup, successor).await?;
    assert_eq!(successor_run.status, RunStatus::Succeeded);
    assert_eq!(successor_run.queue, Queue::Interactive);

    // The successor: title and description from the call, named by the agent, model copied.
    let row = setup
        .store
        .get_session(successor)
        .await?
        .expect("successor");
    assert_eq!(row.title, "Lisbon hotels");
    assert_eq!(row.description, "Comparing three hotels");
    assert_eq!(row.title_source, seed_store::TitleSource::Agent);
    assert_eq!(row.model_override.as_deref(), Some("big-model"));
    assert_eq!(row.parent_session_id, None);

    // Its log: the projection (user, actor system), the copied message, then its answer.
    let predecessor_log = log(&setup.store, session(0)).await?;
    let initiating = predecessor_log
        .iter()
        .rfind(|event| event.content.get("text") == Some(&json!(CONTINUE)))
        .expect("the initiating message")
        .clone();
    let successor_log = log(&setup.store, successor).await?;
    let projection = &successor_log[0];
    assert_eq!(
        (
            projection.kind.as_str(),
            projection.role,
            projection.actor.as_deref()
        ),
        ("message", Some(EventRole::User), Some("system"))
    );
    let copied = &successor_log[1];
    assert_eq!(copied.content, initiating.content);
    assert_eq!(
        (copied.role, copied.actor.as_deref()),
        (Some(EventRole::User), Some("user"))
    );
    assert_eq!(
        copied.meta.get(CONTINUED_FROM_META),
        Some(&json!({
            "session_id": session(0),
            "event_id": initiating.id,
            "seq": initiating.seq,
        }))
    );
    assert_eq!(successor_run.user_event_ids, vec![copied.id]);
    assert_eq!(
        successor_log[2].content.get("text"),
        Some(&json!(format!("successor answers: {CONTINUE}")))
    );
    assert_eq!(successor_log.len(), 3);

    // The manifest records what the projection was built from.
    let manifest = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
    assert_eq!(manifest.predecessor_session_id, session(0));
    assert_eq!(manifest.origin_session_id, session(0));
    assert_eq!(manifest.initiating_event.seq, initiating.seq);
    assert_eq!(manifest.excerpts.len(), 1);
    assert_eq!(
        manifest.handoff.extra.get("riskRegister").map(Vec::len),
        Some(1)
    );
    assert_eq!(
        manifest.projection_bytes as usize,
        projection.content["text"].as_str().map_or(0, str::len)
    );
    assert_eq!(edge.initiating_event_id, initiating.id);
    assert_eq!(edge.reason, "topic change");

    // The successor's first request: the projection, then the copied message as the input.
    let requests = setup.model.requests();
    let first = requests
        .iter()
        .find(|request| request.messages.iter().any(|m| is_projection(m)))
        .expect("a successor request");
    assert_eq!(
        first.model, "big-model",
        "the successor asks the copied model"
    );
    assert_eq!(
        first.session_id.as_deref(),
        Some(successor.to_string().as_str())
    );
    let Message::User(head) = first.messages[0].as_ref() else {
        panic!("the projection comes first");
    };
    assert_eq!(
        head.text,
        projection.content["text"].as_str().unwrap_or_default()
    );
    assert!(
        head.text
            .contains("## Purpose\nBook a hotel in Lisbon for May")
    );
    assert!(head.text.contains("## riskRegister\nPrices rise in June"));
    assert!(head.text.contains("[1] user: hello"), "{}", head.text);
    assert!(
        matches!(first.messages[1].as_ref(), Message::User(user) if user.text == CONTINUE),
        "the copied message is the input"
    );

    // The predecessor's log gained only the call and its result (the response that carries
    // the call says nothing else, so it writes no message of its own); no request after the
    // call.
    let after: Vec<_> = predecessor_log
        .iter()
        .filter(|event| event.seq > initiating.seq)
        .collect();
    let kinds: Vec<(&str, Option<EventRole>)> = after
        .iter()
        .map(|event| (event.kind.as_str(), event.role))
        .collect();
    assert_eq!(
        kinds,
        [
            ("tool_call", Some(EventRole::Assistant)),
            ("tool_result", Some(EventRole::Tool)),
        ]
    );
    assert_eq!(after[0].content["name"], json!("continue_session"));
    assert_eq!(after[1].content["tool_name"], json!("continue_session"));
    let asked_to_continue = requests
        .iter()
        .filter(|request| {
            !request.messages.iter().any(|m| is_projection(m)) && input_of(request) == CONTINUE
        })
        .count();
    assert_eq!(
        asked_to_continue, 1,
        "the request after the call never left"
    );

    // The links, both ways, with the other side's title.
    let (from, to) = setup.store.continuation_links(session(0)).await?;
    assert_eq!(from, None);
    let to = to.expect("continued_to");
    assert_eq!(
        (to.session_id, to.title.as_str()),
        (successor, "Lisbon hotels")
    );
    let (from, to) = setup.store.continuation_links(successor).await?;
    assert_eq!(to, None);
    let from = from.expect("continued_from");
    assert_eq!(
        (from.session_id, from.title.as_str()),
        (session(0), "Trip to Lisbon")
    );
    assert_eq!(from.continuation_id, edge.id);

    // The API's view of both sessions: the links and the model's context window.
    let info = setup.runtime.session_info(successor).await?.expect("info");
    assert_eq!(
        info.continued_from.map(|link| link.session_id),
        Some(session(0))
    );
    assert_eq!(info.model, "big-model", "the model override was copied");
    assert_eq!(info.context_window, Some(200_000));
    let info = setup.runtime.session_info(session(0)).await?.expect("info");
    assert_eq!(
        info.continued_to.map(|link| link.session_id),
        Some(successor)
    );

    // read thread: reports the links.
    let context = setup
        .runtime
        .verb_context(successor, successor_run.id, "r1")
        .await?;
    let read = Read
        .call(context, json!({"target": format!("thread:{}", session(0))}))
        .await;
    assert!(
        read.content.contains(&format!(
            "continued to thread:{successor} \"Lisbon hotels\""
        )),
        "{}",
        read.content
    );

    // Notifications: session-change for both (the successor's with its two first events),
    // one account-change with both reasons.
    let mut seen = Vec::new();
    within("the notifications", async {
        while let Some(notification) = bus.next().await {
            let done = matches!(&notification,
                Notification::RunFinished { run_id, .. } if *run_id == successor_run.id);
            seen.push(notification);
            if done {
                break;
            }
        }
    })
    .await;
    for expected in [
        Notification::SessionChanged {
            session_id: session(0),
            reason: "continued",
            seqs: None,
        },
        Notification::SessionChanged {
            session_id: successor,
            reason: "continued-from",
            seqs: Some(SeqRange { from: 1, to: 2 }),
        },
        Notification::AccountChanged {
            account_id: account(),
            reasons: vec!["session-updated", "session-continued"],
        },
    ] {
        assert!(seen.contains(&expected), "{expected:?} in {seen:?}");
    }
    let n_account_changes = seen
        .iter()
        .filter(|notification| matches!(notification, Notification::AccountChanged { .. }))
        .count();
    assert_eq!(
        n_account_changes, 1,
        "one change, one notification: {seen:?}"
    );
    Ok(())
}

#[actix::test]
async fn a_message_that_arrived_after_the_continuing_one_stays_with_its_own_run()
-> anyhow::Result<()> {
    let setup = setup().await?;
    say(&setup, session(0), "hello").await?;
    // Both messages are in before the first of their runs starts: the later one waits its
    // turn, and the continuing turn does not see it.
    let (continuing, later) = (RunId::new_v7(), RunId::new_v7());
    let later_text = "and one more thing";
    for (text, run_id) in [(CONTINUE, continuing), (later_text, later)] {
        let event = NewEvent::message(EventRole::User, "user", json!({ "text": text }), 5);
        setup
            .store
            .send_user_message(session(0), event, run_id, Queue::Interactive, 5, None)
            .await?;
    }
    setup.runtime.wake();
    let run = within("the continuing run", setup.runtime.wait_for_run(continuing)).await?;
    let successor = run
        .continued_to_session_id()
        .expect("continued_to_session_id");
    let later_run = within("the later run", setup.runtime.wait_for_run(later)).await?;
    assert_eq!(later_run.status, RunStatus::Succeeded);
    successor_run(&setup, successor).await?;

    // The successor carries the message that asked to continue, word for word; not the later
    // one, which its own run answers where it was written, once.
    let copied = seed_actors::continuation::copied_message(&setup.store, successor)
        .await?
        .expect("the copied message");
    assert_eq!(copied.content["text"], json!(CONTINUE));
    let successor_log = log(&setup.store, successor).await?;
    assert!(
        !successor_log
            .iter()
            .any(|event| event.content.get("text") == Some(&json!(later_text))),
        "the later message is not carried over"
    );
    let predecessor_log = log(&setup.store, session(0)).await?;
    let answers = predecessor_log
        .iter()
        .filter(|event| event.content.get("text") == Some(&json!(format!("answer: {later_text}"))))
        .count();
    assert_eq!(answers, 1, "the later message is answered once, in place");
    Ok(())
}

#[actix::test]
async fn replaying_the_same_call_gives_the_same_successor_and_one_edge() -> anyhow::Result<()> {
    let setup = setup().await?;
    say(&setup, session(0), "hello").await?;
    let run = say(&setup, session(0), CONTINUE).await?;
    let successor = run.continued_to_session_id().expect("continued");
    successor_run(&setup, successor).await?;
    let before = n_sessions(&setup.store).await?;
    let context = setup
        .runtime
        .verb_context(session(0), run.id, CALL_ID)
        .await?;
    // Even with other arguments: the call id is the key.
    let output = ContinueSession
        .call(context, json!({"reason": "x", "title": "Other", "description": "y", "handoff": {"purpose": "z"}}))
        .await;
    assert!(!output.is_error, "{}", output.content);
    assert!(output.ends_turn);
    assert!(output.content.contains(&successor.to_string()));
    assert_eq!(setup.store.count_successors(session(0)).await?, 1);
    assert_eq!(n_sessions(&setup.store).await?, before);
    assert_eq!(
        setup.store.list_session_runs(successor).await?.len(),
        1,
        "no second run"
    );
    Ok(())
}

#[actix::test]
async fn nested_sources_transfer_and_description_are_hoisted() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    let arguments = json!({
        "reason": "phase change",
        "title": "Hotels",
        "handoff": {
            "purpose": "Book a hotel",
            "description": "Nested description",
            "sources": [{"type": "session_event", "seq": 1}],
            "transfer": {"plan": "omit"}
        }
    });
    let context = setup
        .runtime
        .verb_context(session(0), run_id, "c-nested")
        .await?;
    let output = ContinueSession.call(context, arguments).await;
    assert!(!output.is_error, "{}", output.content);
    let edge = setup
        .store
        .find_continuation(session(0), "c-nested")
        .await?
        .expect("edge");
    let manifest = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
    assert_eq!(manifest.description, "Nested description");
    assert_eq!(manifest.sources.len(), 1);
    assert_eq!(manifest.plan, seed_events::PlanTransfer::Omit);
    assert!(
        manifest.handoff.extra.is_empty(),
        "{:?}",
        manifest.handoff.extra
    );
    Ok(())
}

#[actix::test]
async fn the_plan_is_carried_closed_or_omitted() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    let plan = json!([{"step": "pick a hotel", "done": false}, {"step": "dates", "done": true}]);
    for (idx, (transfer, successor_plan, predecessor_plan)) in [
        (None, Some(plan.clone()), Some(plan.clone())),
        (Some("carry"), Some(plan.clone()), Some(plan.clone())),
        (Some("omit"), None, Some(plan.clone())),
        (Some("close"), None, None),
    ]
    .into_iter()
    .enumerate()
    {
        setup
            .store
            .set_session_plan(session(0), Some(plan.clone()), 10)
            .await?;
        new_message(&setup, &format!("plan case {idx}")).await?;
        let mut arguments = good_arguments();
        if let Some(transfer) = transfer {
            arguments["transfer"] = json!({ "plan": transfer });
        }
        let call_id = format!("c-plan-{idx}");
        let context = setup
            .runtime
            .verb_context(session(0), run_id, &call_id)
            .await?;
        let output = ContinueSession.call(context, arguments).await;
        assert!(!output.is_error, "{}", output.content);
        let edge = setup
            .store
            .find_continuation(session(0), &call_id)
            .await?
            .expect("edge");
        let successor = setup
            .store
            .get_session(edge.successor_session_id)
            .await?
            .expect("successor");
        assert_eq!(successor.plan, successor_plan, "{transfer:?}");
        let predecessor = setup
            .store
            .get_session(session(0))
            .await?
            .expect("predecessor");
        assert_eq!(predecessor.plan, predecessor_plan, "{transfer:?}");
    }
    // With every step done, the default is to leave the plan behind.
    let finished = json!([{"step": "pick a hotel", "done": true}]);
    setup
        .store
        .set_session_plan(session(0), Some(finished.clone()), 11)
        .await?;
    new_message(&setup, "plan done").await?;
    let context = setup
        .runtime
        .verb_context(session(0), run_id, "c-plan-done")
        .await?;
    assert!(
        !ContinueSession
            .call(context, good_arguments())
            .await
            .is_error
    );
    let edge = setup
        .store
        .find_continuation(session(0), "c-plan-done")
        .await?
        .expect("edge");
    let successor = setup
        .store
        .get_session(edge.successor_session_id)
        .await?
        .expect("successor");
    assert_eq!(successor.plan, None);
    Ok(())
}

#[actix::test]
async fn attachments_resolve_in_the_successor() -> anyhow::Result<()> {
    let setup = setup().await?;
    say(&setup, session(0), "hello").await?;
    let attachment = setup
        .store
        .add_attachment(NewAttachment {
            session_id: session(0),
            id: "att-1".to_owned(),
            name: "floorplan.png".to_owned(),
            media_type: "image/png".to_owned(),
            bytes: b"\x89PNG pretend".to_vec(),
            created_at_ms: 3,
        })
        .await?;
    setup
        .store
        .add_attachment(NewAttachment {
            session_id: session(0),
            id: "att-2".to_owned(),
            name: "notes.txt".to_owned(),
            media_type: "text/plain".to_owned(),
            bytes: b"rooms: 3".to_vec(),
            created_at_ms: 3,
        })
        .await?;
    let message = NewEvent::message(
        EventRole::User,
        "user",
        json!({"text": CONTINUE, "raw_markdown": "please **continue**", "attachments": [{"id": "att-1", "name": "floorplan.png"}, "att-2"]}),
        4,
    );
    let (_, run) = setup
        .store
        .send_user_message(
            session(0),
            message,
            RunId::new_v7(),
            Queue::Interactive,
            4,
            None,
        )
        .await?;
    setup.runtime.wake();
    let run = within("the run", setup.runtime.wait_for_run(run.id)).await?;
    let successor = run.continued_to_session_id().expect("continued");
    let copied = setup
        .store
        .read_events(successor, 2, 2, 1)
        .await?
        .pop()
        .expect("the copied message");
    assert_eq!(copied.content["raw_markdown"], json!("please **continue**"));
    let linked = setup
        .store
        .get_attachment(successor, "att-1")
        .await?
        .expect("attachment:att-1 resolves in the successor");
    assert_eq!(linked.name, "floorplan.png");
    let bytes = std::fs::read(setup.store.attachment_file(&linked))?;
    assert_eq!(bytes, b"\x89PNG pretend");
    use std::os::unix::fs::MetadataExt;
    let original = std::fs::metadata(setup.store.attachment_file(&attachment))?;
    let link = std::fs::metadata(setup.store.attachment_file(&linked))?;
    assert_eq!(original.ino(), link.ino(), "a hard link, not a copy");

    // The successor's model reads the copied message with its files, as the predecessor's did:
    // the image as an image, the text inline.
    successor_run(&setup, successor).await?;
    let expected = [
        UserPart::Text {
            text: "attachment:att-1 (floorplan.png, image/png, 12 bytes): the image follows"
                .to_owned(),
        },
        UserPart::Image {
            media_type: "image/png".to_owned(),
            data: "iVBORyBwcmV0ZW5k".to_owned(),
        },
        UserPart::Text {
            text: "attachment:att-2 (notes.txt, text/plain, 8 bytes):\n<attachment_text>\n\
                   rooms: 3\n</attachment_text>"
                .to_owned(),
        },
    ];
    let requests = setup.model.requests();
    let inputs: Vec<&seed_providers::UserMessage> = requests
        .iter()
        .filter_map(|request| {
            request
                .messages
                .iter()
                .rev()
                .find_map(|message| match message.as_ref() {
                    Message::User(user) if user.text == CONTINUE => Some(user),
                    _ => None,
                })
        })
        .collect();
    assert!(
        inputs.len() >= 2,
        "the predecessor's and the successor's: {inputs:?}"
    );
    let successor_request = requests
        .iter()
        .rfind(|request| request.session_id.as_deref() == Some(&successor.to_string()))
        .expect("the successor asked its model");
    let successor_input = successor_request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message.as_ref() {
            Message::User(user) if user.text == CONTINUE => Some(user),
            _ => None,
        })
        .expect("the copied message in the successor's request");
    assert_eq!(successor_input.parts, expected);
    assert!(
        inputs.iter().all(|input| input.parts == expected),
        "{inputs:?}"
    );
    Ok(())
}

/// A response whose usage says the prompt was `prompt` tokens.
fn with_prompt(text: &str, prompt: u64) -> seed_providers::AssistantMessage {
    let mut message = text_response(text);
    message.usage = Usage {
        input: prompt / 2,
        cache_read: prompt / 4,
        cache_write: prompt - prompt / 2 - prompt / 4,
        output: 5,
        estimated: false,
    };
    message
}

#[actix::test]
async fn context_usage_guidance_grows_at_70_and_85_percent() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    // The scripted model's window is 200,000 tokens: 50%, 75%, 90%.
    let model = ScriptedProvider::new(vec![
        ScriptedStep::Respond(with_prompt("one", 100_000)),
        ScriptedStep::Respond(with_prompt("two", 150_000)),
        ScriptedStep::Respond(with_prompt("three", 180_000)),
        ScriptedStep::Respond(with_prompt("four", 180_000)),
    ]);
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model.clone()),
        seed_actors::verbs::shipped(),
        RuntimeSettings::default(),
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    for text in ["a", "b", "c", "d"] {
        let (_, run_id) = runtime.send_message(session(0), text).await?;
        within("a run", runtime.wait_for_run(run_id)).await?;
    }
    let usage_blocks: Vec<Option<String>> = model
        .requests()
        .iter()
        .map(|request| {
            request.messages.iter().find_map(|m| match m.as_ref() {
                Message::User(user) if user.text.starts_with("<context_usage") => {
                    Some(user.text.clone())
                }
                _ => None,
            })
        })
        .collect();
    let block = |idx: usize| usage_blocks[idx].clone().unwrap_or_default();
    // Before the first answer no server has counted: the first request's size is estimated
    // (the system prompt and the verbs' schemas, a few thousand tokens), and says so.
    assert!(block(0).contains("estimated=\"true\""), "{}", block(0));
    assert!(block(0).contains("fits comfortably"), "{}", block(0));
    let first_tokens: u64 = block(0)
        .split("tokens=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|tokens| tokens.parse().ok())
        .expect("tokens");
    let first = &model.requests()[0];
    let sent = seed_providers::estimate::request_tokens(first);
    assert!(
        first_tokens <= sent && first_tokens + 200 > sent,
        "the estimate before the blocks ({first_tokens}) is the request's ({sent}) but for them"
    );
    // Counted usage is not marked.
    assert!(!block(1).contains("estimated"), "{}", block(1));
    assert!(block(1).contains("percent=\"50\""), "{}", block(1));
    assert!(block(1).contains("fits comfortably"));
    assert!(!block(1).contains("Turns left"), "{}", block(1));
    assert!(block(2).contains("percent=\"75\""), "{}", block(2));
    assert!(block(2).contains("consider continue_session"));
    // From 70% the advisor follows the guidance (continuation_advisor.rs has the details).
    assert!(block(2).contains("session.\nTurns left: "), "{}", block(2));
    assert!(block(3).contains("percent=\"90\""), "{}", block(3));
    assert!(block(3).contains("Call continue_session now"));
    assert!(
        block(3).contains("this turn.\nTurns left: "),
        "{}",
        block(3)
    );
    // The system prompt tells the agent about continuation, byte for byte the same each turn.
    let prompts: Vec<String> = model
        .requests()
        .iter()
        .map(|request| request.system_prompt.clone())
        .collect();
    assert!(prompts[0].contains("never compacted"));
    assert!(prompts[0].contains("read thread:<id>"));
    assert!(prompts.iter().all(|prompt| *prompt == prompts[0]));
    Ok(())
}

#[actix::test]
async fn a_delegated_child_is_not_offered_continuation() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(Config::new(dir.path().join("seed.db")))?;
    store.create_account(account(), vec![1], 0).await?;
    store
        .create_session(NewSession::new(session(0), account(), 0))
        .await?;
    // The parent delegates; the child reads once (so its second request has a usage to report)
    // and answers; the parent then answers with the child's result.
    let model = ScriptedProvider::from_fn(|request: &Request, _| {
        let input = common::continuing::input_of(request);
        let has = |name: &str| {
            request.messages.iter().any(
                |m| matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == name),
            )
        };
        let call = |name: &str, arguments: Value| {
            ScriptedStep::Respond(seed_providers::tool_response(
                "",
                vec![seed_providers::ToolCall {
                    id: format!("{name}-1"),
                    name: name.to_owned(),
                    arguments,
                }],
            ))
        };
        match (input.as_str(), has("read"), has("delegate")) {
            ("child task", false, _) => call("read", json!({"target": "~/memory/notes.md"})),
            ("child task", true, _) => ScriptedStep::Respond(with_prompt("child done", 150_000)),
            (_, _, false) => call("delegate", json!({"task": "child task"})),
            _ => ScriptedStep::Respond(text_response("parent done")),
        }
    });
    let (runtime, _) = Runtime::start(
        store.clone(),
        Arc::new(model.clone()),
        seed_actors::verbs::shipped(),
        RuntimeSettings::default(),
        "boot-1".to_owned(),
        test_clock(),
    )
    .await?;
    let (_, run_id) = runtime.send_message(session(0), "delegate it").await?;
    let run = within("the parent", async {
        loop {
            let run = runtime.wait_for_run(run_id).await?;
            if run.status != RunStatus::Parked {
                return anyhow::Ok(run);
            }
            actix::clock::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await?;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.result);
    let requests = model.requests();
    let child_requests: Vec<&Request> = requests
        .iter()
        .filter(|request| common::continuing::input_of(request) == "child task")
        .collect();
    assert_eq!(child_requests.len(), 2);
    for request in &child_requests {
        assert!(
            !request
                .tools
                .iter()
                .any(|tool| tool.name == "continue_session"),
            "a child is not offered continue_session"
        );
        assert!(!request.system_prompt.contains("never compacted"));
        assert!(!request.messages.iter().any(
            |m| matches!(m.as_ref(), Message::User(user) if user.text.starts_with("<context_usage"))
        ));
    }
    let parent_first = &requests[0];
    assert!(
        parent_first
            .tools
            .iter()
            .any(|tool| tool.name == "continue_session")
    );
    assert!(parent_first.system_prompt.contains("never compacted"));
    Ok(())
}

#[test]
fn configured_context_windows_come_before_the_table() {
    let settings = RuntimeSettings {
        provider_name: "openai".to_owned(),
        context_windows: [("my-finetune".to_owned(), 32_768)].into_iter().collect(),
        context_window_default: Some(8_192),
        ..RuntimeSettings::default()
    };
    assert_eq!(settings.context_window("my-finetune"), Some(32_768));
    assert_eq!(settings.context_window("gpt-4o"), Some(128_000));
    assert_eq!(settings.context_window("unknown-model"), Some(8_192));
    let bare = RuntimeSettings {
        provider_name: "openai".to_owned(),
        ..RuntimeSettings::default()
    };
    assert_eq!(bare.context_window("unknown-model"), None);
}
