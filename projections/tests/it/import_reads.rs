//! What a turn reads of the log for its import: a rebuild reads each event once (the seqs the
//! events in hand leave out, then the rest), and the plan made from what a turn reads is the
//! plan made from the whole log, over the import table's cases and over generated logs.

use proptest::prelude::*;
use seed_events::{EventId, EventRole, SessionEvent, SessionId};
use seed_projections::import::{ImportMode, rebuild_reads};
use serde_json::json;

use crate::common::Import;
use crate::import::{CASES, Given, given, store};

/// A rebuild reads the seqs the events in hand lack, and every seq after the newest of them
/// (the log may have grown since): never an event twice, never the whole log again.
#[test]
fn a_rebuild_reads_only_what_the_events_in_hand_leave_out() {
    let reads = |log: &str| rebuild_reads(&given(log).log);
    assert_eq!(reads(""), [(1, i64::MAX)]);
    assert_eq!(reads("1 user a\n2 user b"), [(3, i64::MAX)]);
    assert_eq!(
        reads("2 user a\n3 user b\n7 user c"),
        [(1, 1), (4, 6), (8, i64::MAX)]
    );
}

/// For every case of the table, with and without a rebuild forced: the plan made from what a
/// turn reads (the events past the mark from no store entry, those left out, the run's own;
/// for a rebuild, then the rest) is the plan made from the whole log, and a rebuild reads each
/// event once.
#[test]
fn the_plan_from_what_a_turn_reads_is_the_plan_from_the_whole_log() {
    let mut n_rebuilds = 0;
    for case in CASES.trim().split("\n\n") {
        let (rule, rest) = case.split_once("\nstore ").expect("a rule and a store");
        let (fixture, rest) = rest.split_once('\n').expect("a log");
        let (log, _) = rest.split_once("=>").expect("a log, `=>` and a plan");
        let given = given(log);
        let store = store(fixture);
        for rebuild in [false, true] {
            let import = Import {
                log: &given.log,
                store: &store,
                sync: &given.sync,
                own_event_ids: &given.own,
                waiting_event_ids: &given.waiting,
                rebuild,
            };
            let read = import.plan_as_a_turn_reads();
            assert_eq!(read.plan, import.plan_from_the_whole_log(), "{rule}");
            if read.plan.mode == ImportMode::Rebuild {
                n_rebuilds += 1;
                assert_eq!(
                    read.n_events_read,
                    given.log.len(),
                    "{rule}: each event once"
                );
            }
        }
    }
    assert!(n_rebuilds > 10, "the table holds rebuilds");
}

/// A generated log: per event, its kind (0 a person's message, 1 an answer, 2 a notice, 3 an
/// action, 4 a call, 5 a result), whether the store wrote it, whether it names a file, and
/// whether it is the run's own, waiting, or left out (a person's message, at or below the mark).
fn generated_log(events: &[(u8, bool, bool, u8)], mark: usize) -> Given {
    use EventRole::{Assistant, System, Tool, User};
    let mut given = Given::default();
    given.sync.mark = mark.min(events.len()) as i64;
    for (idx, &(kind, from_store, names_file, tag)) in events.iter().enumerate() {
        let seq = idx as i64 + 1;
        let call_id = ["c1", "c2", "d1", "m1"][idx % 4];
        let files = if names_file {
            json!([format!("a{}", idx % 3)])
        } else {
            json!([])
        };
        let (kind, role, actor, content) = match kind {
            0 => (
                "message",
                User,
                "user",
                json!({"text": format!("say {seq}"), "attachments": files}),
            ),
            1 => (
                "message",
                Assistant,
                "agent",
                json!({"text": format!("answer {seq}")}),
            ),
            2 => (
                "notice",
                System,
                "system",
                json!({"text": format!("notice {seq}")}),
            ),
            3 => (
                "action",
                User,
                "user",
                json!({"text": format!("action {seq}")}),
            ),
            4 => (
                "tool_call",
                Assistant,
                "agent",
                json!({"id": call_id, "name": "read", "arguments": {}}),
            ),
            _ => (
                "tool_result",
                Tool,
                "runtime",
                json!({"tool_call_id": call_id, "tool_name": "read", "content": "text",
                       "is_error": false, "attachments": files}),
            ),
        };
        let person = kind == "message" && role == User || kind == "action";
        let event = SessionEvent {
            id: EventId(seq + 100),
            session_id: SessionId::from_u128(1),
            seq,
            kind: kind.to_owned(),
            role: Some(role),
            actor: Some(actor.to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            pi_entry_id: (from_store && !person).then_some(seq),
            created_at_ms: seq,
        };
        match tag {
            1 if person => given.own.push(event.id),
            2 if person => _ = given.waiting.insert(event.id),
            3 if person && seq <= given.sync.mark => given.sync.left_out.push(seq),
            _ => {}
        }
        given.log.push(event);
    }
    given
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Over generated logs (events the store wrote and not, files named, own, waiting and
    /// left-out messages, a mark anywhere), each store (answered, parked on a child, parked
    /// then reset, a call cut off, none), a rebuild forced or not: the plan made from what a
    /// turn reads is the plan made from the whole log, and a rebuild reads each event once.
    #[test]
    fn a_plan_from_what_a_turn_reads_is_the_plan_from_the_whole_log(
        events in proptest::collection::vec((0u8..6, any::<bool>(), any::<bool>(), 0u8..4), 0..24),
        mark in 0usize..24,
        fixture in 0usize..5,
        rebuild in any::<bool>(),
    ) {
        let given = generated_log(&events, mark);
        let store = store(["answered", "parked", "parked, reset", "cut off", "empty"][fixture]);
        let import = Import {
            log: &given.log,
            store: &store,
            sync: &given.sync,
            own_event_ids: &given.own,
            waiting_event_ids: &given.waiting,
            rebuild,
        };
        let read = import.plan_as_a_turn_reads();
        prop_assert_eq!(&read.plan, &import.plan_from_the_whole_log());
        if read.plan.mode == ImportMode::Rebuild {
            prop_assert_eq!(read.n_events_read, given.log.len());
        }
    }
}
