//! continue_session's refusals, over a real SQLite file: a loop (a session continued a moment
//! ago, nothing new said), bad shapes and sources (the field named), a delegated or typed
//! child, children of this turn still running, the cap, no user message. A refused call creates
//! nothing; the model reads why and goes on.

use crate::common::continuing::{
    CONTINUE, Setup, good_arguments, n_sessions, new_message, parked_call_site, say, setup,
    successor_run,
};
use crate::common::{account, session};
use seed_actors::verbs::continue_session::ContinueSession;
use seed_actors::{Verb, VerbOutput};
use seed_events::{AccountId, EventRole, NewEvent, Queue, RunId, RunStatus, SessionId};
use seed_projections::continuation::MAX_SESSION_CONTINUATIONS_PER_SESSION;
use seed_store::{NewRun, NewSession};
use serde_json::{Value, json};

#[actix::test]
async fn a_second_continuation_of_a_freshly_continued_session_is_refused_as_a_loop()
-> anyhow::Result<()> {
    let setup = setup().await?;
    say(&setup, session(0), "hello").await?;
    let run = say(&setup, session(0), CONTINUE).await?;
    let successor = run.continued_to_session_id().expect("continued");
    let successor_run = successor_run(&setup, successor).await?;
    let before = n_sessions(&setup.store).await?;
    let context = setup
        .runtime
        .verb_context(successor, successor_run.id, "again")
        .await?;
    let output = ContinueSession.call(context, good_arguments()).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("just continued"),
        "{}",
        output.content
    );
    assert!(!output.ends_turn, "a refusal does not end the turn");
    assert_eq!(n_sessions(&setup.store).await?, before);
    assert_eq!(setup.store.count_successors(successor).await?, 0);

    // The predecessor cannot carry the same message into a second successor either.
    let context = setup
        .runtime
        .verb_context(session(0), run.id, "second-call")
        .await?;
    let output = ContinueSession.call(context, good_arguments()).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("already carried into"),
        "{}",
        output.content
    );
    assert_eq!(setup.store.count_successors(session(0)).await?, 1);

    // Once somebody says something new there, the run that answers it may continue again.
    let new_run = say(&setup, successor, "now about restaurants").await?;
    let context = setup
        .runtime
        .verb_context(successor, new_run.id, "again-2")
        .await?;
    let output = ContinueSession.call(context, good_arguments()).await;
    assert!(!output.is_error, "{}", output.content);
    Ok(())
}

/// Calls continue_session in session 0's run `run_id` and checks it was refused with `why`
/// and created nothing.
async fn assert_refused(
    setup: &Setup,
    session_id: SessionId,
    run_id: RunId,
    arguments: Value,
    why: &str,
) -> anyhow::Result<()> {
    let before = n_sessions(&setup.store).await?;
    let context = setup
        .runtime
        .verb_context(session_id, run_id, "c-refused")
        .await?;
    let output: VerbOutput = ContinueSession.call(context, arguments).await;
    assert!(output.is_error, "refused: {}", output.content);
    assert!(
        output.content.contains(why),
        "expected {why:?} in {:?}",
        output.content
    );
    assert!(!output.ends_turn);
    assert_eq!(n_sessions(&setup.store).await?, before, "nothing created");
    assert_eq!(setup.store.count_successors(session_id).await?, 0);
    assert_eq!(
        setup
            .store
            .find_continuation(session_id, "c-refused")
            .await?,
        None
    );
    Ok(())
}

#[actix::test]
async fn bad_shapes_are_refused_naming_the_field() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    let mut without_title = good_arguments();
    without_title
        .as_object_mut()
        .map(|fields| fields.remove("title"));
    assert_refused(&setup, session(0), run_id, without_title, "title: required").await?;
    let mut empty_handoff = good_arguments();
    empty_handoff["handoff"] = json!({});
    assert_refused(&setup, session(0), run_id, empty_handoff, "handoff: empty").await?;
    // A section of any shape is kept as text; a handoff that is no object is refused.
    let mut not_sections = good_arguments();
    not_sections["handoff"] = json!("just go on");
    assert_refused(
        &setup,
        session(0),
        run_id,
        not_sections,
        "handoff: expected an object of sections",
    )
    .await?;
    let mut bad_plan = good_arguments();
    bad_plan["transfer"] = json!({"plan": "keep"});
    assert_refused(&setup, session(0), run_id, bad_plan, "transfer.plan").await?;
    assert_refused(
        &setup,
        session(0),
        run_id,
        json!("continue"),
        "expected an object",
    )
    .await?;
    Ok(())
}

#[actix::test]
async fn bad_sources_are_refused() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    let other_account = AccountId::from_u128(0xb0b);
    setup
        .store
        .create_account(other_account, vec![2], 0)
        .await?;
    let theirs = SessionId::from_u128(0xb0b5);
    setup
        .store
        .create_session(NewSession::new(theirs, other_account, 0))
        .await?;
    setup
        .store
        .append_events(
            theirs,
            vec![NewEvent::message(
                EventRole::User,
                "user",
                json!({"text": "secret"}),
                1,
            )],
        )
        .await?;
    for (source, why) in [
        (
            json!({"type": "memory", "path": "~/memory/missing.md"}),
            "no such file",
        ),
        (
            json!({"type": "session_events", "fromSeq": 1, "toSeq": 99}),
            "before toSeq 99",
        ),
        (json!({"type": "session_event", "seq": 50}), "has no seq 50"),
        (
            json!({"type": "session_events", "thread": format!("thread:{theirs}"), "fromSeq": 1, "toSeq": 1}),
            "not found",
        ),
        (json!("ftp://example.org/x"), "not a resource address"),
        (
            json!({"type": "session_events", "fromSeq": 3, "toSeq": 2}),
            "is before fromSeq",
        ),
    ] {
        let mut arguments = good_arguments();
        arguments["sources"] = json!([source]);
        assert_refused(&setup, session(0), run_id, arguments, why).await?;
    }
    Ok(())
}

#[actix::test]
async fn a_delegated_child_cannot_continue() -> anyhow::Result<()> {
    let setup = setup().await?;
    let parent_run = parked_call_site(&setup).await?;
    let child = SessionId::from_u128(0xc41d);
    let mut child_session = NewSession::new(child, account(), 0);
    child_session.parent_session_id = Some(session(0));
    let task = NewEvent::message(EventRole::User, "trigger", json!({"text": "a task"}), 7);
    let run_id = RunId::new_v7();
    setup
        .store
        .start_child(
            child_session,
            task,
            NewRun {
                id: run_id,
                session_id: child,
                queue: Queue::Background,
                user_event_ids: Vec::new(),
                parent_run_id: Some(parent_run),
                typed: false,
                created_at_ms: 7,
            },
        )
        .await?;
    setup
        .store
        .set_run_status(run_id, RunStatus::Running, None, 8)
        .await?;
    assert_refused(&setup, child, run_id, good_arguments(), "delegated child").await
}

/// A typed run is refused for being typed: here it runs in a top-level session with no parent
/// run, so nothing else would refuse it (without the typed check it would continue).
#[actix::test]
async fn a_typed_child_cannot_continue() -> anyhow::Result<()> {
    let setup = setup().await?;
    // Session 0 has a user message to continue from, and a typed run to call the verb in.
    parked_call_site(&setup).await?;
    let run_id = RunId::new_v7();
    setup
        .store
        .enqueue_run(NewRun {
            id: run_id,
            session_id: session(0),
            queue: Queue::Background,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: true,
            created_at_ms: 9,
        })
        .await?;
    setup
        .store
        .set_run_status(run_id, RunStatus::Running, None, 10)
        .await?;
    assert_refused(&setup, session(0), run_id, good_arguments(), "typed child").await
}

#[actix::test]
async fn continuing_while_children_of_this_turn_run_is_refused() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    let child_id = SessionId::from_u128(0xc41d);
    let mut child = NewSession::new(child_id, account(), 0);
    child.parent_session_id = Some(session(0));
    let child_run = RunId::new_v7();
    setup
        .store
        .start_child(
            child,
            NewEvent::message(EventRole::User, "trigger", json!({"text": "a task"}), 7),
            NewRun {
                id: child_run,
                session_id: child_id,
                queue: Queue::Background,
                user_event_ids: Vec::new(),
                parent_run_id: Some(run_id),
                typed: false,
                created_at_ms: 7,
            },
        )
        .await?;
    setup
        .store
        .set_run_status(child_run, RunStatus::Running, None, 8)
        .await?;
    assert_refused(
        &setup,
        session(0),
        run_id,
        good_arguments(),
        "still running",
    )
    .await?;
    // Once the child has ended, continuing is possible.
    setup
        .store
        .finish_run(child_run, RunStatus::Succeeded, None, 9)
        .await?;
    let context = setup
        .runtime
        .verb_context(session(0), run_id, "c-ok")
        .await?;
    let output = ContinueSession.call(context, good_arguments()).await;
    assert!(!output.is_error, "{}", output.content);
    Ok(())
}

#[actix::test]
async fn past_the_cap_continuing_is_refused() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = parked_call_site(&setup).await?;
    for idx in 0..MAX_SESSION_CONTINUATIONS_PER_SESSION {
        // Each continuation carries a new message (the same one cannot be carried twice).
        new_message(&setup, &format!("and now part {idx}")).await?;
        let context = setup
            .runtime
            .verb_context(session(0), run_id, &format!("c-{idx}"))
            .await?;
        let output = ContinueSession.call(context, good_arguments()).await;
        assert!(!output.is_error, "call {idx}: {}", output.content);
    }
    let context = setup
        .runtime
        .verb_context(session(0), run_id, "c-over")
        .await?;
    let before = n_sessions(&setup.store).await?;
    let output = ContinueSession.call(context, good_arguments()).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("the most allowed"),
        "{}",
        output.content
    );
    assert_eq!(n_sessions(&setup.store).await?, before);
    assert_eq!(
        setup.store.count_successors(session(0)).await?,
        MAX_SESSION_CONTINUATIONS_PER_SESSION
    );
    // continued_to shows the newest of the successors.
    let newest = setup
        .store
        .find_continuation(
            session(0),
            &format!("c-{}", MAX_SESSION_CONTINUATIONS_PER_SESSION - 1),
        )
        .await?
        .expect("the newest edge");
    let (_, to) = setup.store.continuation_links(session(0)).await?;
    assert_eq!(
        to.map(|link| link.session_id),
        Some(newest.successor_session_id)
    );
    Ok(())
}

#[actix::test]
async fn with_no_user_message_continuing_is_refused() -> anyhow::Result<()> {
    let setup = setup().await?;
    let run_id = RunId::new_v7();
    setup
        .store
        .enqueue_run(NewRun {
            id: run_id,
            session_id: session(0),
            queue: Queue::Background,
            user_event_ids: Vec::new(),
            parent_run_id: None,
            typed: false,
            created_at_ms: 5,
        })
        .await?;
    setup
        .store
        .set_run_status(run_id, RunStatus::Running, None, 6)
        .await?;
    assert_refused(
        &setup,
        session(0),
        run_id,
        good_arguments(),
        "no user message",
    )
    .await
}
