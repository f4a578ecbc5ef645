//! Elicitations: a call asks one question at a time; an answer is recorded once; the boot's
//! close leaves nothing pending.

use futures::executor::block_on;
use seed_events::{RunId, SessionId};
use seed_store::{AnswerOutcome, AskOutcome, ElicitationAnswer, ElicitationStatus, NewElicitation};

use crate::common::Fixture;

fn asked(session_id: SessionId, call: &str) -> NewElicitation {
    NewElicitation {
        session_id,
        run_id: RunId::new_v7(),
        tool_call_id: call.to_owned(),
        verb: "everything__ask".to_owned(),
        arguments: serde_json::json!({}),
        message: "your name?".to_owned(),
        requested_schema: serde_json::json!({"type": "object", "properties": {}}),
        deadline_at_ms: None,
    }
}

#[test]
fn an_elicitation_is_asked_once_at_a_time_answered_once_and_closed_at_boot() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let [session_id] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    let store = &fixture.store;
    let AskOutcome::Asked(first) = block_on(store.ask_elicitation(asked(session_id, "c1"), 10))?
    else {
        panic!("not asked")
    };
    assert_eq!((first.n, first.status), (1, ElicitationStatus::Pending));
    assert_eq!(
        block_on(store.ask_elicitation(asked(session_id, "c1"), 11))?,
        AskOutcome::Busy,
        "a call asks one question at a time"
    );
    let content = serde_json::json!({"name": "Ada"});
    let AnswerOutcome::Answered(answered) = block_on(store.answer_elicitation(
        session_id,
        "c1",
        ElicitationAnswer::Accept {
            content: content.clone(),
        },
        12,
    ))?
    else {
        panic!("not answered")
    };
    assert_eq!(answered.status, ElicitationStatus::Accepted);
    assert_eq!(answered.content, Some(content));
    assert!(matches!(
        block_on(store.answer_elicitation(session_id, "c1", ElicitationAnswer::Decline, 13))?,
        AnswerOutcome::NotPending(Some(row)) if row.status == ElicitationStatus::Accepted
    ));
    let AskOutcome::Asked(second) = block_on(store.ask_elicitation(asked(session_id, "c1"), 14))?
    else {
        panic!("not asked again")
    };
    assert_eq!(second.n, 2);
    block_on(store.ask_elicitation(asked(session_id, "c2"), 15))?;
    assert_eq!(
        block_on(store.close_pending_elicitations("the service restarted", 16))?,
        2
    );
    let statuses: Vec<(String, i64, &str)> = block_on(store.elicitations(session_id))?
        .into_iter()
        .map(|row| (row.tool_call_id, row.n, row.status.as_str()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("c1".to_owned(), 1, "accepted"),
            ("c1".to_owned(), 2, "closed"),
            ("c2".to_owned(), 1, "closed"),
        ]
    );
    Ok(())
}
