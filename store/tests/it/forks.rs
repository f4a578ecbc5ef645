//! Forks: created whole in one transaction with the request's nonce, or not at all; their edge
//! has the kind `fork` and does not count as a continuation; and the lineage around a session,
//! typed (continuation, fork, delegation) and bounded.

use futures::executor::block_on;
use seed_events::limits::{FORKS_PER_SESSION_MAX, LINEAGE_SESSIONS_MAX};
use seed_events::{
    AccountId, ContinuationId, EdgeKind, EventId, EventRole, LineageEdgeKind, NewEvent, SessionId,
};
use seed_store::{
    FORK_KEY_PREFIX, ForkCreation, NewContinuation, NewFork, NewSession, NewSuccessor,
    NonceOutcome, RequestNonce,
};
use serde_json::json;

use crate::common::{Fixture, account, session, user_message};

fn nonce(text: &str) -> Option<RequestNonce> {
    Some(RequestNonce {
        key_id: account(),
        nonce: text.to_owned(),
        expires_at_ms: i64::MAX,
    })
}

fn answer(text: &str) -> NewEvent {
    NewEvent::message(EventRole::Assistant, "agent", json!({ "text": text }), 4)
}

/// A fork of `predecessor` as `fork`, its log `events`.
fn fork_of(predecessor: SessionId, fork: SessionId, n: u128, events: Vec<NewEvent>) -> NewFork {
    let id = ContinuationId::from_u128(0xf0 + n);
    NewFork {
        session: NewSession::new(fork, account(), 30 + n as i64),
        edge: NewContinuation {
            id,
            predecessor_session_id: predecessor,
            successor_session_id: fork,
            origin_session_id: predecessor,
            tool_call_id: format!("{FORK_KEY_PREFIX}{id}"),
            initiating_event_id: EventId(2),
            reason: "branched from seq 2".to_owned(),
            manifest_cbor: vec![0xa0],
            created_at_ms: 30 + n as i64,
        },
        events,
        attachment_ids: Vec::new(),
    }
}

fn n_sessions(fixture: &Fixture) -> anyhow::Result<i64> {
    fixture.raw_i64("SELECT COUNT(*) FROM sessions", &[])
}

#[test]
fn a_fork_is_created_whole_with_its_kind_and_its_nonce() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let [predecessor] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    block_on(store.append_events(
        predecessor,
        vec![
            user_message("hello"),
            answer("hi"),
            user_message("and then"),
        ],
    ))?;
    let fork = session(9);
    let copies = vec![user_message("hello"), answer("hi")];
    let created = block_on(
        store.create_fork_signed(nonce("n1"), fork_of(predecessor, fork, 0, copies.clone())),
    )?;
    assert_eq!(created, NonceOutcome::Fresh(ForkCreation::Created));

    let log = block_on(store.read_events(fork, 1, i64::MAX, 100))?;
    assert_eq!(log.len(), 2);
    for (event, copy) in log.iter().zip(&copies) {
        assert_eq!((&event.kind, &event.content), (&copy.kind, &copy.content));
    }
    assert_eq!(block_on(store.edge_kind(fork))?, Some(EdgeKind::Fork));
    let edge = block_on(store.edge_to(fork))?.expect("the fork's edge");
    assert_eq!(edge.predecessor_session_id, predecessor);
    assert!(edge.tool_call_id.starts_with(FORK_KEY_PREFIX));
    // A fork is not a continuation: neither side's continuation links name it, and it does
    // not count against the continuations a session may have.
    assert_eq!(
        block_on(store.continuation_links(predecessor))?,
        (None, None)
    );
    assert_eq!(block_on(store.continuation_links(fork))?, (None, None));
    assert_eq!(block_on(store.count_successors(predecessor))?, 0);
    let link = block_on(store.fork_link(fork))?.expect("the fork's link");
    assert_eq!(link.session_id, predecessor);

    // The same request again writes nothing.
    let before = n_sessions(&fixture)?;
    let again = block_on(
        store.create_fork_signed(nonce("n1"), fork_of(predecessor, session(10), 1, copies)),
    )?;
    assert_eq!(again, NonceOutcome::Replayed);
    assert_eq!(n_sessions(&fixture)?, before);
    assert!(block_on(store.get_session(session(10)))?.is_none());
    Ok(())
}

#[test]
fn a_refused_fork_writes_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::with(|config| config.quotas.sessions_max = 3)?;
    let store = &fixture.store;
    let [predecessor] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    block_on(store.append_events(predecessor, vec![user_message("hello"), answer("hi")]))?;
    let other_account = AccountId::from_u128(0xb0b);
    block_on(store.create_account(other_account, vec![4, 5, 6], 0))?;
    let mut theirs = fork_of(predecessor, session(9), 0, vec![user_message("hello")]);
    theirs.session.account_id = other_account;
    assert_eq!(
        block_on(store.create_fork_signed(nonce("a"), theirs))?,
        NonceOutcome::Fresh(ForkCreation::NoSuchSession)
    );
    for n in 0..2 {
        let fork = fork_of(predecessor, session(10 + n), n, vec![user_message("hello")]);
        let created = block_on(store.create_fork_signed(None, fork))?;
        assert_eq!(created, NonceOutcome::Fresh(ForkCreation::Created));
    }
    let over = fork_of(predecessor, session(20), 5, vec![user_message("hello")]);
    assert_eq!(
        block_on(store.create_fork_signed(nonce("b"), over))?,
        NonceOutcome::Fresh(ForkCreation::SessionsFull)
    );
    assert_eq!(n_sessions(&fixture)?, 3);
    // Nothing of a refused fork was written, its nonce included: it can be sent again.
    assert_eq!(
        fixture.raw_i64("SELECT COUNT(*) FROM session_continuations", &[])?,
        2
    );
    assert_eq!(
        fixture.raw_i64(
            "SELECT COUNT(*) FROM request_nonces WHERE nonce = ?1 OR nonce = ?2",
            &["a", "b"]
        )?,
        0
    );
    Ok(())
}

#[test]
fn a_session_has_at_most_its_forks() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let [predecessor] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    block_on(store.append_events(predecessor, vec![user_message("hello")]))?;
    for n in 0..FORKS_PER_SESSION_MAX as u128 {
        let fork = fork_of(
            predecessor,
            session(100 + n),
            n,
            vec![user_message("hello")],
        );
        assert_eq!(
            block_on(store.create_fork_signed(None, fork))?,
            NonceOutcome::Fresh(ForkCreation::Created)
        );
    }
    let n = FORKS_PER_SESSION_MAX as u128;
    let over = fork_of(
        predecessor,
        session(100 + n),
        n,
        vec![user_message("hello")],
    );
    assert_eq!(
        block_on(store.create_fork_signed(None, over))?,
        NonceOutcome::Fresh(ForkCreation::ForksFull)
    );
    Ok(())
}

/// A continuation of `predecessor` into `successor`.
fn successor(predecessor: SessionId, successor: SessionId) -> NewSuccessor {
    NewSuccessor {
        session: NewSession::new(successor, account(), 20),
        edge: NewContinuation {
            id: ContinuationId::from_u128(1),
            predecessor_session_id: predecessor,
            successor_session_id: successor,
            origin_session_id: predecessor,
            tool_call_id: "call-1".to_owned(),
            initiating_event_id: EventId(1),
            reason: "topic change".to_owned(),
            manifest_cbor: vec![0xa0],
            created_at_ms: 20,
        },
        projection: user_message("the projection"),
        message: user_message("next"),
        attachment_ids: Vec::new(),
        close_predecessor_plan: false,
    }
}

#[test]
fn the_lineage_is_the_typed_graph_around_a_session() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let [origin, unrelated] = fixture.create_sessions(2)?[..] else {
        unreachable!()
    };
    block_on(store.append_events(origin, vec![user_message("hello"), answer("hi")]))?;
    let (continued, forked, child) = (session(7), session(8), session(9));
    block_on(store.create_successor(successor(origin, continued)))?;
    block_on(store.create_fork_signed(
        None,
        fork_of(origin, forked, 0, vec![user_message("hello")]),
    ))?;
    let mut child_session = NewSession::new(child, account(), 40);
    child_session.parent_session_id = Some(continued);
    child_session.title = "the child".to_owned();
    block_on(store.create_session(child_session))?;

    // From any of them, the same graph: four sessions, three typed edges.
    for from in [origin, continued, forked, child] {
        let lineage = block_on(store.lineage(from))?;
        let nodes: Vec<SessionId> = lineage.nodes.iter().map(|node| node.session_id).collect();
        assert_eq!(nodes, [origin, continued, forked, child], "from {from}");
        let edges: Vec<(SessionId, SessionId, LineageEdgeKind)> = lineage
            .edges
            .iter()
            .map(|edge| (edge.from, edge.to, edge.kind))
            .collect();
        assert_eq!(
            edges,
            [
                (origin, continued, LineageEdgeKind::Continuation),
                (origin, forked, LineageEdgeKind::Fork),
                (continued, child, LineageEdgeKind::Delegation),
            ]
        );
        assert!(!lineage.truncated);
        assert_eq!(lineage.nodes[3].title, "the child");
    }
    // A session with no edge is a lineage of one; no session, none.
    let alone = block_on(store.lineage(unrelated))?;
    assert_eq!(alone.nodes.len(), 1);
    assert!(alone.edges.is_empty());
    assert!(block_on(store.lineage(session(99)))?.nodes.is_empty());
    Ok(())
}

#[test]
fn a_lineage_past_its_bound_keeps_the_nearest_sessions_and_says_so() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let [first] = fixture.create_sessions(1)?[..] else {
        unreachable!()
    };
    block_on(store.append_events(first, vec![user_message("hello")]))?;
    // A chain of forks, each of the one before, longer than a lineage shows.
    let mut previous = first;
    let n_forks = LINEAGE_SESSIONS_MAX as u128 + 4;
    for n in 0..n_forks {
        let fork = session(100 + n);
        block_on(store.create_fork_signed(
            None,
            fork_of(previous, fork, n, vec![user_message("hello")]),
        ))?;
        previous = fork;
    }
    let lineage = block_on(store.lineage(first))?;
    assert!(lineage.truncated);
    assert_eq!(lineage.nodes.len(), LINEAGE_SESSIONS_MAX);
    assert_eq!(lineage.nodes[0].session_id, first);
    assert_eq!(lineage.edges.len(), LINEAGE_SESSIONS_MAX - 1);
    Ok(())
}
