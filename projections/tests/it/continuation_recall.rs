//! Recall telemetry, the pure part: which edge a read counts against and which of its seqs
//! count, the ranges recalled repeatedly, and a projection carrying them on — loaded whole as a
//! marked excerpt when the budget allows, listed as omitted with the reason when not.

use seed_events::continuation::{MANIFEST_VERSION, RecalledRange};
use seed_events::{
    ContinuationId, ContinueSessionInput, EventId, EventRole, Handoff, PlanTransfer, SeqRange,
    SessionContinuationManifest, SessionEvent, SessionId,
};
use seed_projections::continuation::recall::{
    LineageEdge, RECALLED_RANGES_MAX, Recall, RecallRow, RecalledExcerpt, RepeatedRecall,
    recall_of_read, recalled_findings, repeated_recalls,
};
use seed_projections::continuation::{
    ProjectionInput, ThreadRef, compile_projection, compile_projection_recalling,
};
use serde_json::json;

fn thread(n: u128) -> SessionId {
    SessionId::from_u128(0x7700 + n)
}

fn edge_id(n: u128) -> ContinuationId {
    ContinuationId::from_u128(0xed6e + n)
}

fn range(thread: SessionId, from_seq: i64, to_seq: i64) -> SeqRange {
    SeqRange {
        thread,
        from_seq,
        to_seq,
    }
}

/// A manifest of an edge out of `predecessor` that left `omitted` out and loaded `recalled`.
fn manifest(
    predecessor: SessionId,
    omitted: Vec<SeqRange>,
    recalled: Vec<RecalledRange>,
) -> SessionContinuationManifest {
    let mut manifest = compile_projection(&ProjectionInput {
        input: &input(),
        plan: PlanTransfer::Omit,
        lineage: &[],
        origin_session_id: predecessor,
        initiating: &event(predecessor, 10, EventRole::User, "go on"),
        predecessor_last_seq: 10,
        cited: &[],
        recent: &[],
        budget_bytes: 10_000,
    })
    .manifest;
    assert_eq!(manifest.version, MANIFEST_VERSION);
    manifest.omitted = omitted;
    manifest.recalled = recalled;
    manifest
}

fn event(session_id: SessionId, seq: i64, role: EventRole, text: &str) -> SessionEvent {
    SessionEvent {
        id: EventId(1000 + seq),
        session_id,
        seq,
        kind: "message".to_owned(),
        role: Some(role),
        actor: Some(
            if role == EventRole::User {
                "user"
            } else {
                "agent"
            }
            .to_owned(),
        ),
        content: json!({ "text": text }),
        meta: json!({}),
        run_id: None,
        pi_entry_id: None,
        created_at_ms: seq,
    }
}

fn input() -> ContinueSessionInput {
    ContinueSessionInput {
        reason: "phase change".to_owned(),
        title: "Lisbon, booking".to_owned(),
        description: "Booking the hotel".to_owned(),
        handoff: Handoff {
            purpose: vec!["Book the hotel".to_owned()],
            ..Handoff::default()
        },
        sources: Vec::new(),
        plan: None,
    }
}

#[test]
fn a_read_counts_against_the_edge_out_of_the_thread_it_reads_and_only_what_was_left_out() {
    // origin (thread 0) → thread 1 → thread 2, the reader. The edge into thread 1 left out
    // thread 0's seqs 1–4 and 8–9; the edge into the reader left out thread 1's 1–5 and loaded
    // thread 0's 3–4 again as a recalled excerpt.
    let into_1 = manifest(
        thread(0),
        vec![range(thread(0), 1, 4), range(thread(0), 8, 9)],
        Vec::new(),
    );
    let into_2 = manifest(
        thread(1),
        vec![range(thread(1), 1, 5), range(thread(0), 12, 13)],
        vec![RecalledRange {
            range: range(thread(0), 3, 4),
            times: 2,
            loaded: true,
        }],
    );
    let lineage = [
        LineageEdge {
            continuation_id: edge_id(2),
            manifest: &into_2,
        },
        LineageEdge {
            continuation_id: edge_id(1),
            manifest: &into_1,
        },
    ];
    let recall = |thread: SessionId, from: i64, to: i64| recall_of_read(&lineage, thread, from, to);

    // The immediate predecessor: against the edge that made the reader, clipped to the read.
    assert_eq!(
        recall(thread(1), 2, 30),
        Some(Recall {
            continuation_id: edge_id(2),
            thread: thread(1),
            ranges: vec![(2, 5)],
        })
    );
    // An older ancestor: against the edge out of it, less what the later projection loaded
    // again (3–4) and less what it carried (5–7); thread 0's 12–13 in the later edge's omitted
    // list is not that edge's to count.
    assert_eq!(
        recall(thread(0), 1, 13),
        Some(Recall {
            continuation_id: edge_id(1),
            thread: thread(0),
            ranges: vec![(1, 2), (8, 9)],
        })
    );
    // A read of only what the projections carried counts nothing.
    assert_eq!(recall(thread(0), 5, 7), None);
    assert_eq!(recall(thread(0), 3, 4), None);
    assert_eq!(recall(thread(1), 6, 9), None);
    // The reader itself, or a thread off its lineage, counts against no edge.
    assert_eq!(recall(thread(2), 1, 9), None);
    assert_eq!(recall(thread(7), 1, 9), None);
}

fn row(thread: SessionId, call: &str, from_seq: i64, to_seq: i64) -> RecallRow {
    RecallRow {
        thread,
        tool_call_id: call.to_owned(),
        from_seq,
        to_seq,
    }
}

#[test]
fn a_range_recalled_by_two_calls_or_more_is_repeated() {
    let rows = [
        // Thread 0: 5–9 read twice, 7–12 once more; two runs of one call (the rows of one read)
        // never count twice.
        row(thread(0), "read-1", 5, 9),
        row(thread(0), "read-2", 5, 9),
        row(thread(0), "read-3", 7, 12),
        row(thread(0), "read-4", 20, 21),
        row(thread(0), "read-4", 22, 23),
        // Thread 1: read once.
        row(thread(1), "read-5", 1, 3),
    ];
    assert_eq!(
        repeated_recalls(&rows),
        vec![
            RepeatedRecall {
                range: range(thread(0), 5, 6),
                times: 2,
            },
            RepeatedRecall {
                range: range(thread(0), 7, 9),
                times: 3,
            },
        ]
    );
    assert_eq!(repeated_recalls(&rows[..1]), Vec::new());

    // At most RECALLED_RANGES_MAX, the most recalled kept.
    let many: Vec<RecallRow> = (0..=RECALLED_RANGES_MAX as i64)
        .flat_map(|idx| {
            let calls = if idx == 0 { 3 } else { 2 };
            (0..calls)
                .map(move |call| row(thread(0), &format!("{idx}-{call}"), idx * 10, idx * 10 + 1))
        })
        .collect();
    let kept = repeated_recalls(&many);
    assert_eq!(kept.len(), RECALLED_RANGES_MAX);
    assert_eq!(kept[0].times, 3);
}

/// Compiles thread 1's projection (the predecessor, 10 events of `text_len` bytes each) with
/// thread 0's seqs 3–5 recalled twice.
fn compile_with_recalled(budget_bytes: usize) -> seed_projections::continuation::Projection {
    let log: Vec<SessionEvent> = (1..=10)
        .map(|seq| {
            let role = if seq % 2 == 1 {
                EventRole::User
            } else {
                EventRole::Assistant
            };
            event(thread(1), seq, role, &format!("part two, {seq}"))
        })
        .collect();
    let ancestor: Vec<SessionEvent> = (3..=5)
        .map(|seq| {
            event(
                thread(0),
                seq,
                EventRole::Assistant,
                &format!("the hotel list, {seq}"),
            )
        })
        .collect();
    let lineage = [
        ThreadRef {
            session_id: thread(0),
            title: "Trip".to_owned(),
        },
        ThreadRef {
            session_id: thread(1),
            title: "Trip, part 2".to_owned(),
        },
    ];
    compile_projection_recalling(
        &ProjectionInput {
            input: &input(),
            plan: PlanTransfer::Omit,
            lineage: &lineage,
            origin_session_id: thread(0),
            initiating: &log[8],
            predecessor_last_seq: 10,
            cited: &[],
            recent: &log[..8],
            budget_bytes,
        },
        &[RecalledExcerpt {
            recall: RepeatedRecall {
                range: range(thread(0), 3, 5),
                times: 2,
            },
            events: ancestor,
        }],
    )
}

#[test]
fn a_range_recalled_twice_is_carried_on_as_a_marked_excerpt_when_it_fits() {
    let projection = compile_with_recalled(32 * 1024);
    let excerpt = "<excerpt thread=\"00000000-0000-0000-0000-000000007700\" from=\"3\" to=\"5\" \
                   recalled=\"2 times after the last continuation\">\n\
                   [3] assistant: the hotel list, 3\n\
                   [4] assistant: the hotel list, 4\n\
                   [5] assistant: the hotel list, 5\n\
                   </excerpt>\n<recent_exchanges";
    assert!(projection.text.contains(excerpt), "{}", projection.text);
    assert_eq!(
        projection.manifest.recalled,
        vec![RecalledRange {
            range: range(thread(0), 3, 5),
            times: 2,
            loaded: true,
        }]
    );
    assert!(
        !projection
            .manifest
            .omitted
            .iter()
            .any(|omitted| omitted.thread == thread(0)),
        "{:?}",
        projection.manifest.omitted
    );
    assert_eq!(
        projection.manifest.projection_bytes as usize,
        projection.text.len()
    );
}

#[test]
fn a_range_recalled_twice_over_the_budget_is_listed_as_omitted_with_why() {
    // Room for the head and the omitted list, not for the excerpt.
    let fits = compile_with_recalled(32 * 1024);
    let head = fits.text.find("<excerpt").expect("the excerpt");
    let projection = compile_with_recalled(head + 700);
    assert!(
        !projection.text.contains("recalled=\""),
        "{}",
        projection.text
    );
    assert!(
        projection.text.contains(
            "- thread:00000000-0000-0000-0000-000000007700 seq 3\u{2013}5 (recalled 2 times after \
             the last continuation; over the budget, not loaded: read \
             thread:00000000-0000-0000-0000-000000007700 with fromSeq 3 and toSeq 5)\n</omitted>"
        ),
        "{}",
        projection.text
    );
    assert_eq!(
        projection.manifest.recalled,
        vec![RecalledRange {
            range: range(thread(0), 3, 5),
            times: 2,
            loaded: false,
        }]
    );
    assert!(
        projection
            .manifest
            .omitted
            .contains(&range(thread(0), 3, 5))
    );
    assert!(projection.text.len() <= head + 700);
}

#[test]
fn fsck_finds_a_recalled_excerpt_that_is_not_the_events_it_cites() {
    let projection = compile_with_recalled(32 * 1024);
    let ancestor: Vec<SessionEvent> = (3..=5)
        .map(|seq| {
            event(
                thread(0),
                seq,
                EventRole::Assistant,
                &format!("the hotel list, {seq}"),
            )
        })
        .collect();
    let recalled = &projection.manifest.recalled;
    assert_eq!(
        recalled_findings(&projection.text, recalled, &ancestor),
        Vec::<String>::new()
    );
    // A byte of a cited event changed.
    let mut changed = ancestor.clone();
    changed[1].content = json!({"text": "the hotel list, 4!"});
    let findings = recalled_findings(&projection.text, recalled, &changed);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0].contains("recalled <excerpt> of thread 00000000-0000-0000-0000-000000007700 seq 3\u{2013}5 is not in its projection byte for byte"),
        "{findings:?}"
    );
    // A cited seq the thread lacks.
    let findings = recalled_findings(&projection.text, recalled, &ancestor[..2]);
    assert!(findings[0].contains("cites seq 5"), "{findings:?}");
    // One over the budget was not loaded: nothing to check.
    let over = compile_with_recalled(projection.text.find("<excerpt").expect("the excerpt") + 700);
    assert!(recalled_findings(&over.text, &over.manifest.recalled, &[]).is_empty());
}
