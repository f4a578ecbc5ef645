//! The rules of recommended ranges, one test each, and their merging and cap.

use super::*;
use seed_events::{EventId, SessionId};
use serde_json::json;

/// A log built event by event, seqs from 1.
#[derive(Default)]
struct Log {
    events: Vec<SessionEvent>,
}

impl Log {
    fn push(&mut self, kind: &str, role: EventRole, actor: &str, content: Value) -> i64 {
        let seq = self.events.len() as i64 + 1;
        self.events.push(SessionEvent {
            id: EventId(seq),
            session_id: SessionId::from_u128(1),
            seq,
            kind: kind.to_owned(),
            role: Some(role),
            actor: Some(actor.to_owned()),
            content,
            meta: json!({}),
            run_id: None,
            pi_entry_id: None,
            created_at_ms: 0,
        });
        seq
    }

    fn user(&mut self, text: &str) -> i64 {
        self.push(
            kind::MESSAGE,
            EventRole::User,
            "user",
            json!({ "text": text }),
        )
    }

    fn assistant(&mut self, text: &str) -> i64 {
        self.push(
            kind::MESSAGE,
            EventRole::Assistant,
            "agent",
            json!({ "text": text }),
        )
    }

    /// A call of `verb` with `arguments` and its result: the seqs of both.
    fn call(&mut self, verb: &str, arguments: Value, result: &str, is_error: bool) -> (i64, i64) {
        let id = format!("call-{}", self.events.len() + 1);
        let call = self.push(
            kind::TOOL_CALL,
            EventRole::Assistant,
            "agent",
            json!({ "id": id, "name": verb, "arguments": arguments }),
        );
        let result = self.push(
            kind::TOOL_RESULT,
            EventRole::Tool,
            "agent",
            json!({ "tool_call_id": id, "tool_name": verb, "content": result, "is_error": is_error }),
        );
        (call, result)
    }

    fn recommend(&self, plan: Option<&Value>) -> Vec<Recommendation> {
        recommend_ranges(&RecommendInput {
            events: &self.events,
            plan,
        })
    }

    /// The ranges the rules find, before merging, whose reason `keep` accepts, as
    /// `(from, to)`.
    fn ranges_where(&self, plan: Option<&Value>, keep: impl Fn(&Why) -> bool) -> Vec<(i64, i64)> {
        found_ranges(&RecommendInput {
            events: &self.events,
            plan,
        })
        .into_iter()
        .filter(|(_, _, why)| keep(why))
        .map(|(from, to, _)| (from, to))
        .collect()
    }
}

/// Rendered as the block lists them.
fn lines(recommendations: &[Recommendation]) -> String {
    recommendations
        .iter()
        .map(|r| format!("{}-{}: {}", r.from_seq, r.to_seq, r.reasons()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_newest_exchanges() {
    let mut log = Log::default();
    log.user("one"); // 1
    log.assistant("answer one"); // 2
    let second = log.user("two"); // 3
    log.assistant("answer two"); // 4
    log.call("read", json!({"path": "~/memory/a.md"}), "a", false); // 5, 6
    log.user("three"); // 7
    log.assistant("answer three"); // 8
    log.user("four"); // 9
    let exchanges = |log: &Log| log.ranges_where(None, |why| *why == Why::NewestExchanges);
    // The two exchanges before the newest message: from "three" back to "two"'s.
    assert_eq!(exchanges(&log), [(second, 8)]);
    insta::assert_snapshot!(lines(&log.recommend(None)), @"3-8: the newest exchanges");
    // With one exchange before it, from the first event.
    let mut short = Log::default();
    short.assistant("hello"); // 1
    short.user("one"); // 2
    short.assistant("answer"); // 3
    short.user("two"); // 4
    assert_eq!(exchanges(&short), [(1, 3)]);
    // A long exchange: its newest events alone.
    let mut long = Log::default();
    long.user("start"); // 1
    for _ in 0..30 {
        long.assistant("working"); // 2..=31
    }
    let newest = long.user("and?"); // 32
    let from = newest - NEWEST_EXCHANGES_EVENTS_MAX as i64;
    assert_eq!(exchanges(&long), [(from, newest - 1)]);
    // Nothing before the newest message: nothing to cite.
    let mut first = Log::default();
    first.user("only");
    assert_eq!(first.recommend(None), []);
}

#[test]
fn unfinished_plan_steps_from_where_the_plan_set_them() {
    let mut log = Log::default();
    log.user("plan the trip"); // 1
    let steps = |flight: bool, hotel: bool| {
        json!({"steps": [
            {"step": "Book the flight", "done": flight},
            {"step": "Book the hotel", "done": hotel},
        ]})
    };
    let (created, _) = log.call("plan", steps(false, false), "ok", false); // 2, 3
    log.call("search", json!({"q": "flights"}), "found", false); // 4, 5
    log.call("plan", steps(true, false), "ok", false); // 6, 7
    // A refused plan call sets nothing.
    log.call("plan", steps(true, true), "too many steps", true); // 8, 9
    log.assistant("booked the flight"); // 10
    log.user("and the hotel?"); // 11
    let plan = json!([
        {"step": "Book the flight", "done": true},
        {"step": "Book the hotel", "done": false},
        {"step": "Carried from before", "done": false},
    ]);
    let steps_of =
        |log: &Log| log.ranges_where(Some(&plan), |why| matches!(why, Why::UnfinishedStep { .. }));
    // The hotel was created at seq 2 and left unchanged since: 2 to the event before the
    // user's message. The carried step no call set has none; the done flight has none.
    assert_eq!(steps_of(&log), [(created, 10)]);
    let reasons: Vec<String> = log
        .recommend(Some(&plan))
        .iter()
        .flat_map(|r| r.why.iter().map(ToString::to_string))
        .collect();
    assert!(
        reasons.contains(&"unfinished plan step \u{201c}Book the hotel\u{201d}".to_owned()),
        "{reasons:?}"
    );
    assert!(
        !reasons.iter().any(|r| r.contains("Carried")),
        "{reasons:?}"
    );
    // A step taken back (done, then not done) is set where it was taken back.
    let mut back = Log::default();
    back.user("go"); // 1
    back.call(
        "plan",
        json!({"steps": [{"step": "Draft", "done": false}]}),
        "ok",
        false,
    ); // 2, 3
    back.call(
        "plan",
        json!({"steps": [{"step": "Draft", "done": true}]}),
        "ok",
        false,
    ); // 4, 5
    let (reopened, _) = back.call(
        "plan",
        json!({"steps": [{"step": "Draft", "done": false}]}),
        "ok",
        false,
    ); // 6, 7
    back.assistant("redoing the draft"); // 8
    let draft = json!([{"step": "Draft", "done": false}]);
    assert_eq!(
        back.ranges_where(Some(&draft), |why| matches!(
            why,
            Why::UnfinishedStep { .. }
        )),
        [(reopened, 8)]
    );
    // No plan, no step ranges.
    assert_eq!(
        log.ranges_where(None, |why| matches!(why, Why::UnfinishedStep { .. })),
        []
    );
}

#[test]
fn failed_calls_that_were_not_retried() {
    let mut log = Log::default();
    log.user("fetch both"); // 1
    let (lost_call, lost_result) = log.call("fetch", json!({"url": "http://a"}), "timed out", true); // 2, 3
    // Failed, then retried with the same arguments and succeeded: not recommended.
    log.call("fetch", json!({"url": "http://b"}), "timed out", true); // 4, 5
    log.call("fetch", json!({"url": "http://b"}), "page b", false); // 6, 7
    // A later success with other arguments is no retry of the first.
    log.call("fetch", json!({"url": "http://c"}), "page c", false); // 8, 9
    // Failed twice: both recommended (no success retried them).
    let twice_a = log.call("write", json!({"path": "x"}), "denied", true); // 10, 11
    let twice_b = log.call("write", json!({"path": "x"}), "denied", true); // 12, 13
    log.assistant("done what I could"); // 14
    log.assistant("really"); // 15
    log.assistant("yes"); // 16
    log.user("thanks"); // 17
    log.assistant("welcome"); // 18
    log.user("bye"); // 19
    let failed = log.ranges_where(None, |why| matches!(why, Why::FailedCall { .. }));
    assert_eq!(failed, [(lost_call, lost_result), twice_a, twice_b]);
    insta::assert_snapshot!(lines(&log.recommend(None)), @r"
    2-3: fetch failed and was not retried
    7-18: write failed and was not retried; the newest exchanges
    ");
}

#[test]
fn what_the_user_quotes_and_the_files_they_name() {
    let mut log = Log::default();
    log.user("where do we stand?"); // 1
    let said = log.assistant("The budget is 1200 euros for the whole week."); // 2
    log.assistant("Something else entirely."); // 3
    let (read_call, read_result) = log.call(
        "read",
        json!({"path": "~/memory/notes/trip.md"}),
        "Lisbon in May",
        false,
    ); // 4, 5
    let named = log.assistant("I updated server/src/main.rs as asked."); // 6
    for filler in 7..=12 {
        log.assistant(&format!("filler {filler}"));
    }
    log.user("later"); // 13
    log.assistant("ok"); // 14
    log.user(
        "You said \u{201c}the budget is 1200   euros\u{201d}; and about\n\
         > Something else\n\
         > entirely.\n\
         Look at ~/memory/notes/trip.md and (server/src/main.rs), not \"nowhere to be found\" \
         or http://example.com/x.html.",
    ); // 15
    let referred = log.ranges_where(None, |why| {
        matches!(why, Why::Quoted { .. } | Why::NamedFile { .. })
    });
    // The quote (whitespace and case aside) and the `>` block each find their message; the
    // memory file finds its read call with its result; the source file finds the message;
    // the phrase found nowhere and the address find nothing.
    assert_eq!(
        referred,
        [
            (said + 1, said + 1),
            (said, said),
            (read_call, read_result),
            (named, named)
        ]
    );
    assert_eq!((read_call, read_result), (4, 5));
    insta::assert_snapshot!(lines(&log.recommend(None)), @"
    2-2: the user's message quotes “the budget is 1200   euros”
    3-14: the user's message quotes “Something else entirely.”; the user's message names server/src/main.rs; the user's message names ~/memory/notes/trip.md; the newest exchanges
    ");
    // Only messages before the user's newest count; a quote too short is not looked for.
    let mut short = Log::default();
    short.assistant("ok then"); // 1
    short.user("you said \"ok\""); // 2
    assert_eq!(
        short.ranges_where(None, |why| matches!(why, Why::Quoted { .. })),
        []
    );
}

#[test]
fn quotes_and_file_names_are_read_from_the_text() {
    assert_eq!(
        quotes("a \"first one\" and \u{201c}second one\u{201d}, \"x\"\n> block\n>> deeper\nafter"),
        ["block deeper", "first one", "second one"]
    );
    assert_eq!(
        file_names("see src/lib.rs, notes.md. and 3.5 or e.g: https://x.io/a.md `Cargo.toml`"),
        ["src/lib.rs", "notes.md", "e.g", "Cargo.toml"]
    );
}

#[test]
fn ranges_merge_and_are_capped_by_rule_then_newest() {
    let why = |verb: &str| Why::FailedCall {
        verb: verb.to_owned(),
    };
    // Overlapping ranges merge, with each reason once, in the rules' order; touching ones
    // stay apart.
    let merged = merge_and_cap(
        vec![
            (5, 8, Why::NewestExchanges),
            (1, 2, why("a")),
            (3, 4, why("b")),
            (7, 9, why("a")),
            (
                20,
                20,
                Why::NamedFile {
                    path: "x.md".to_owned(),
                },
            ),
        ],
        RECOMMENDED_RANGES_MAX,
    );
    insta::assert_snapshot!(lines(&merged), @"
    1-2: a failed and was not retried
    3-4: b failed and was not retried
    5-9: a failed and was not retried; the newest exchanges
    20-20: the user's message names x.md
    ");
    // Past the cap: the user's references first, then failures, steps and exchanges, the
    // newest first within a rule; listed by seq.
    let step = |text: &str| Why::UnfinishedStep {
        step: text.to_owned(),
    };
    let kept = merge_and_cap(
        vec![
            (100, 101, Why::NewestExchanges),
            (10, 10, step("old")),
            (30, 30, step("new")),
            (50, 50, why("x")),
            (
                70,
                70,
                Why::Quoted {
                    quote: "q".to_owned(),
                },
            ),
            (90, 90, why("y")),
        ],
        4,
    );
    insta::assert_snapshot!(lines(&kept), @"
    30-30: unfinished plan step “new”
    50-50: x failed and was not retried
    70-70: the user's message quotes “q”
    90-90: y failed and was not retried
    ");
    // The whole rule set never names more than the cap.
    let mut log = Log::default();
    for idx in 0..20 {
        log.call("fetch", json!({ "n": idx }), "failed", true);
        log.assistant("next");
    }
    log.user("go on");
    let all = log.recommend(None);
    assert_eq!(all.len(), RECOMMENDED_RANGES_MAX);
    assert!(all.windows(2).all(|pair| pair[0].to_seq < pair[1].from_seq));
    // Deterministic: the same log, the same ranges.
    assert_eq!(all, log.recommend(None));
}

#[test]
fn a_long_reason_is_cut() {
    let step = "s".repeat(100);
    let text = Why::UnfinishedStep { step }.to_string();
    assert!(text.ends_with("s\u{2026}\u{201d}"), "{text}");
    let quoted = text.split('\u{201c}').nth(1).expect("a quoted step");
    assert_eq!(
        quoted.chars().filter(|&c| c == 's').count(),
        WHY_CHARS_MAX - 1
    );
}
