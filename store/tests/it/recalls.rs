//! Recall telemetry in the store: a read's recalls recorded against their edge, a replayed read
//! counted once, the reader's recalls with the thread each read, the recalls of a session's
//! edges counted per range and reader, the lineage behind a session, and the rows going with
//! their edge. On either engine.

use crate::common::Fixture;
use futures::executor::block_on;
use seed_events::{ContinuationId, EventId, SessionId};
use seed_store::{NewContinuation, NewRecall, ReaderRecall, RecallSummary};

fn edge(predecessor: SessionId, successor: SessionId, id_bits: u128, at: i64) -> NewContinuation {
    NewContinuation {
        id: ContinuationId::from_u128(id_bits),
        predecessor_session_id: predecessor,
        successor_session_id: successor,
        origin_session_id: predecessor,
        tool_call_id: format!("continue-{id_bits}"),
        initiating_event_id: EventId(1),
        reason: "topic change".to_owned(),
        manifest_cbor: vec![0xa0],
        created_at_ms: at,
    }
}

fn recall(
    edge_bits: u128,
    reader: SessionId,
    call: &str,
    (from_seq, to_seq): (i64, i64),
    at: i64,
) -> NewRecall {
    NewRecall {
        continuation_id: ContinuationId::from_u128(edge_bits),
        reader_session_id: reader,
        tool_call_id: call.to_owned(),
        from_seq,
        to_seq,
        created_at_ms: at,
    }
}

#[test]
fn recalls_are_recorded_once_per_call_and_counted_per_edge_range_and_reader() -> anyhow::Result<()>
{
    let fixture = Fixture::new()?;
    let store = &fixture.store;
    let sessions = fixture.create_sessions(4)?;
    let (origin, middle, newest, other) = (sessions[0], sessions[1], sessions[2], sessions[3]);
    block_on(store.insert_continuation(edge(origin, middle, 1, 10)))?;
    block_on(store.insert_continuation(edge(middle, newest, 2, 20)))?;

    // The lineage behind the newest, newest edge first; none behind the origin.
    let lineage = block_on(store.lineage_edges(newest))?;
    let ids: Vec<u128> = lineage.iter().map(|edge| edge.id.0.as_u128()).collect();
    assert_eq!(ids, [2, 1]);
    assert!(block_on(store.lineage_edges(origin))?.is_empty());

    // The middle reads the origin twice (one call with two runs), the newest reads it once.
    let first = vec![
        recall(1, middle, "read-1", (3, 5), 30),
        recall(1, middle, "read-1", (8, 8), 30),
    ];
    assert_eq!(block_on(store.record_recalls(first.clone()))?, 2);
    // The same call again (a replay): nothing new.
    assert_eq!(block_on(store.record_recalls(first))?, 0);
    assert_eq!(
        block_on(store.record_recalls(vec![recall(1, middle, "read-2", (3, 5), 40)]))?,
        1
    );
    assert_eq!(
        block_on(store.record_recalls(vec![recall(1, newest, "read-9", (3, 5), 50)]))?,
        1
    );
    assert_eq!(
        block_on(store.record_recalls(vec![recall(2, newest, "read-9", (1, 2), 50)]))?,
        1
    );
    assert_eq!(block_on(store.record_recalls(Vec::new()))?, 0);
    assert_eq!(store.recalls_recorded(), 5);

    // The middle's own recalls, with the thread each read.
    let by_middle = block_on(store.recalls_by_reader(middle))?;
    let read = |call: &str, from_seq, to_seq| ReaderRecall {
        continuation_id: ContinuationId::from_u128(1),
        thread: origin,
        tool_call_id: call.to_owned(),
        from_seq,
        to_seq,
    };
    assert_eq!(
        by_middle,
        [
            read("read-1", 3, 5),
            read("read-1", 8, 8),
            read("read-2", 3, 5)
        ]
    );
    assert!(block_on(store.recalls_by_reader(other))?.is_empty());

    // The middle is on both edges: each edge's recalls, per range and reader.
    let summary = |edge_bits: u128,
                   (predecessor, successor): (SessionId, SessionId),
                   reader,
                   (from_seq, to_seq),
                   times,
                   last| RecallSummary {
        continuation_id: ContinuationId::from_u128(edge_bits),
        predecessor_session_id: predecessor,
        successor_session_id: successor,
        reader_session_id: reader,
        from_seq,
        to_seq,
        times,
        last_recalled_at_ms: last,
    };
    let first_edge = (origin, middle);
    let second_edge = (middle, newest);
    let mut expected = vec![
        summary(1, first_edge, middle, (3, 5), 2, 40),
        summary(1, first_edge, newest, (3, 5), 1, 50),
        summary(1, first_edge, middle, (8, 8), 1, 30),
        summary(2, second_edge, newest, (1, 2), 1, 50),
    ];
    // Same range, two readers: ordered by reader id.
    expected[..2].sort_by_key(|summary| summary.reader_session_id);
    assert_eq!(block_on(store.recalls_of_edges(middle))?, expected);
    assert_eq!(block_on(store.recalls_of_edges(origin))?, expected[..3]);
    assert_eq!(block_on(store.recalls_of_edges(newest))?, expected[3..]);
    assert!(block_on(store.recalls_of_edges(other))?.is_empty());

    // Deleting the origin takes its edge, and the edge's recalls with it.
    block_on(store.delete_session(origin, 60))?;
    assert!(block_on(store.recalls_by_reader(middle))?.is_empty());
    assert_eq!(
        fixture.raw_i64("SELECT COUNT(*) FROM continuation_recalls", &[])?,
        1
    );
    Ok(())
}

#[test]
fn a_recall_of_an_edge_that_does_not_exist_is_refused_and_writes_nothing() -> anyhow::Result<()> {
    let fixture = Fixture::new()?;
    let sessions = fixture.create_sessions(2)?;
    block_on(
        fixture
            .store
            .insert_continuation(edge(sessions[0], sessions[1], 1, 10)),
    )?;
    let refused = block_on(fixture.store.record_recalls(vec![
        recall(1, sessions[1], "read-1", (1, 2), 20),
        recall(7, sessions[1], "read-1", (4, 4), 20),
    ]));
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(
        fixture.raw_i64("SELECT COUNT(*) FROM continuation_recalls", &[])?,
        0
    );
    assert_eq!(fixture.store.recalls_recorded(), 0);
    Ok(())
}
