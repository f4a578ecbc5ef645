//! A person's fork: the fork's log is the predecessor's conversation up to the seq given, its
//! edge has the kind `fork` and its manifest the point, and its next turn puts exactly that
//! conversation (and the new message) to the model; a seq that is not a whole conversation's
//! end is refused with nothing written; and a crash at each point of the creation leaves
//! nothing or the whole fork.

use std::sync::Arc;

use crate::common::{
    Echo, Fixture, account, assert_log_agrees_with_store, conversation, crash_once_at,
    echo_then_answer, in_process, log, open_store_with_sessions, session, start_with_crash_points,
    summary, within,
};
use seed_actors::crash::points;
use seed_actors::fork::{ForkOutcome, ForkRefusal, ForkRequest};
use seed_actors::{CrashPoints, Runtime};
use seed_events::{AccountId, EdgeKind, RunStatus, SessionContinuationManifest, SessionId};
use seed_projections::fork::ForkPointError;
use seed_providers::ScriptedProvider;
use seed_store::{Config, Store};

fn request(session_id: SessionId, seq: i64) -> ForkRequest {
    ForkRequest {
        account_id: account(),
        session_id,
        seq,
        title: None,
        nonce: None,
    }
}

/// Two turns of the echo model: each is a person's message (seqs 1 and 5), the echo call (2,
/// 6), its result (3, 7) and the answer (4, 8).
async fn two_turns(runtime: &Runtime, session_id: SessionId) -> anyhow::Result<()> {
    for text in ["first", "second"] {
        let (_, run_id) = runtime.send_message(session_id, text).await?;
        let run = within("a turn", runtime.wait_for_run(run_id)).await?;
        assert_eq!(run.status, RunStatus::Succeeded);
    }
    Ok(())
}

fn forked(outcome: ForkOutcome) -> SessionId {
    match outcome {
        ForkOutcome::Forked { session_id, .. } => session_id,
        other => panic!("not forked: {other:?}"),
    }
}

#[actix::test]
async fn a_fork_holds_exactly_the_conversation_up_to_its_seq_and_its_turn_is_put_it()
-> anyhow::Result<()> {
    let fixture = Fixture::new(1).await?;
    let provider = echo_then_answer();
    let runtime = fixture.start(provider.clone(), "boot-1").await?;
    let predecessor = session(0);
    two_turns(&runtime, predecessor).await?;
    let predecessor_log = log(&fixture.store, predecessor).await?;
    assert_eq!(predecessor_log.len(), 8);
    // The request the predecessor's second turn began with: its conversation up to seq 4, then
    // "second".
    let second_turn = provider
        .requests()
        .into_iter()
        .find(|request| {
            summary(&conversation(request)).last().map(String::as_str) == Some("user: second")
        })
        .expect("the second turn's first request");

    let fork = forked(runtime.fork_session(request(predecessor, 4)).await?);

    // Its log: the predecessor's first four events, as they were.
    let fork_log = log(&fixture.store, fork).await?;
    assert_eq!(fork_log.len(), 4);
    for (copy, original) in fork_log.iter().zip(&predecessor_log) {
        assert_eq!(copy.seq, original.seq);
        assert_eq!(
            (&copy.kind, copy.role, &copy.actor, &copy.content),
            (
                &original.kind,
                original.role,
                &original.actor,
                &original.content
            )
        );
        assert_eq!(copy.pi_entry_id, None);
    }
    // Its own edge, of kind fork, with its manifest; the predecessor's continuation links do
    // not name it.
    let store = &fixture.store;
    assert_eq!(store.edge_kind(fork).await?, Some(EdgeKind::Fork));
    let edge = store.edge_to(fork).await?.expect("the fork's edge");
    assert_eq!(edge.predecessor_session_id, predecessor);
    assert_eq!(edge.initiating_event_id, predecessor_log[3].id);
    let manifest = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
    let point = manifest.fork.expect("a fork's manifest names its point");
    assert_eq!((point.seq, point.event_id), (4, predecessor_log[3].id));
    assert_eq!(manifest.predecessor_last_seq, 8);
    assert_eq!(store.continuation_links(predecessor).await?, (None, None));
    assert!(
        store.list_session_runs(fork).await?.is_empty(),
        "a fork waits for a person"
    );

    // Its next turn: the model is put the predecessor's conversation up to seq 4 — what the
    // predecessor's own second turn was put before "second" — and the new message.
    let n_before = provider.requests().len();
    let (_, run_id) = runtime.send_message(fork, "other").await?;
    let run = within("the fork's turn", runtime.wait_for_run(run_id)).await?;
    assert_eq!(run.status, RunStatus::Succeeded);
    let first = &provider.requests()[n_before];
    let mut expected = summary(&conversation(&second_turn));
    expected.pop();
    expected.push("user: other".to_owned());
    assert_eq!(summary(&conversation(first)), expected);
    assert_eq!(
        expected,
        [
            "user: first",
            "assistant:  [call echo]",
            "result: echo: first",
            "assistant: answer: first",
            "user: other",
        ]
    );
    assert_log_agrees_with_store(store, fork).await?;
    // The predecessor is as it was.
    assert_eq!(log(store, predecessor).await?, predecessor_log);
    Ok(())
}

#[actix::test]
async fn a_seq_that_ends_no_whole_conversation_is_refused_and_nothing_written() -> anyhow::Result<()>
{
    let fixture = Fixture::new(1).await?;
    let runtime = fixture.start(echo_then_answer(), "boot-1").await?;
    let predecessor = session(0);
    two_turns(&runtime, predecessor).await?;
    let refusals = [
        (
            0,
            ForkPointError::OutOfRange {
                seq: 0,
                last_seq: 8,
            },
        ),
        (
            9,
            ForkPointError::OutOfRange {
                seq: 9,
                last_seq: 8,
            },
        ),
        (
            2,
            ForkPointError::NotAMessage {
                seq: 2,
                what: "tool_call event (assistant)".to_owned(),
            },
        ),
        (
            3,
            ForkPointError::NotAMessage {
                seq: 3,
                what: "tool_result event (tool)".to_owned(),
            },
        ),
    ];
    for (seq, problem) in refusals {
        assert_eq!(
            runtime.fork_session(request(predecessor, seq)).await?,
            ForkOutcome::Refused(ForkRefusal::Point(problem)),
            "seq {seq}"
        );
    }
    let mut theirs = request(predecessor, 4);
    theirs.account_id = AccountId::from_u128(0xb0b);
    assert_eq!(
        runtime.fork_session(theirs).await?,
        ForkOutcome::Refused(ForkRefusal::NoSuchSession)
    );
    assert_eq!(fixture.store.list_sessions(account()).await?.len(), 1);
    assert_eq!(fixture.store.lineage(predecessor).await?.edges, []);
    Ok(())
}

/// Process 1: two turns, then a fork at seq 4 that crashes at `point`.
fn crash_at(path: &std::path::Path, point: &'static str) -> anyhow::Result<()> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = open_store_with_sessions(&path, 1).await?;
            let (crash_points, has_fired) = crash_once_at(point);
            let runtime = start_with_crash_points(
                store,
                Arc::new(echo_then_answer()),
                vec![Arc::new(Echo)],
                crash_points,
                "boot-1",
            )
            .await?;
            two_turns(&runtime, session(0)).await?;
            let fork = runtime.fork_session(request(session(0), 4));
            futures::pin_mut!(fork);
            match futures::future::select(fork, has_fired).await {
                futures::future::Either::Left((outcome, _)) => {
                    panic!("the fork ended before its crash point: {outcome:?}")
                }
                // The process dies at the point.
                futures::future::Either::Right(_) => Ok(()),
            }
        })
    })
}

/// Process 2: the restart on the same file. Returns the forks of session 0 it finds.
fn restart(path: &std::path::Path) -> anyhow::Result<Vec<SessionId>> {
    let path = path.to_owned();
    in_process(move || {
        Box::pin(async move {
            let store = Store::open(Config::new(&path))?;
            let provider: ScriptedProvider = echo_then_answer();
            let runtime = start_with_crash_points(
                store.clone(),
                Arc::new(provider),
                vec![Arc::new(Echo)],
                CrashPoints::default(),
                "boot-2",
            )
            .await?;
            let sessions = store.list_sessions(account()).await?;
            let forks: Vec<SessionId> = sessions
                .iter()
                .map(|session| session.id)
                .filter(|id| *id != session(0))
                .collect();
            let predecessor_log = log(&store, session(0)).await?;
            for &fork in &forks {
                // The whole fork: its log, its edge of kind fork with its manifest.
                let fork_log = log(&store, fork).await?;
                assert_eq!(fork_log.len(), 4);
                for (copy, original) in fork_log.iter().zip(&predecessor_log) {
                    assert_eq!(
                        (&copy.kind, &copy.content),
                        (&original.kind, &original.content)
                    );
                }
                assert_eq!(store.edge_kind(fork).await?, Some(EdgeKind::Fork));
                let edge = store.edge_to(fork).await?.expect("the fork's edge");
                let manifest = SessionContinuationManifest::from_cbor(&edge.manifest_cbor)?;
                assert_eq!(manifest.fork.map(|point| point.seq), Some(4));
                // And it works as a session: the boot sweep queued nothing for it, and a
                // message to it is answered.
                assert!(store.list_session_runs(fork).await?.is_empty());
                let (_, run_id) = runtime.send_message(fork, "again").await?;
                let run = within("the fork's turn", runtime.wait_for_run(run_id)).await?;
                assert_eq!(run.status, RunStatus::Succeeded);
                assert_log_agrees_with_store(&store, fork).await?;
            }
            if forks.is_empty() {
                // Nothing at all: no edge, no stray events.
                assert_eq!(store.lineage(session(0)).await?.edges, []);
            }
            Ok(forks)
        })
    })
}

#[test]
fn a_crash_before_the_creation_leaves_no_fork() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    crash_at(&path, points::FORK_BEFORE_CREATE)?;
    assert_eq!(restart(&path)?, []);
    Ok(())
}

#[test]
fn a_crash_after_the_creation_leaves_the_whole_fork() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("seed.db");
    crash_at(&path, points::FORK_AFTER_CREATE)?;
    assert_eq!(restart(&path)?.len(), 1);
    Ok(())
}

#[test]
fn every_fork_point_is_crash_tested() {
    // The two tests above, one per point: a point added to the fork's creation needs its own.
    assert_eq!(
        points::FORK,
        [points::FORK_BEFORE_CREATE, points::FORK_AFTER_CREATE]
    );
}
