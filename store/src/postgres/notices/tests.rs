//! Notices' wire form: each kind encodes and reads back, a malformed payload says why, the
//! payload limit holds, and a long delta is split into payloads that reassemble to its text.

use seed_events::{AccountId, RunId, RunStatus, SessionId};

use super::*;

fn session() -> SessionId {
    SessionId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001)
}

fn run() -> RunId {
    RunId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0002)
}

const ORIGIN: &str = "0190aaaa-0000-7000-8000-00000000000a";

fn account() -> AccountId {
    AccountId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0003)
}

fn one_payload(notice: &Notice) -> String {
    let mut payloads = notice.payloads(ORIGIN).expect("a notice that fits");
    assert_eq!(payloads.len(), 1, "{payloads:?}");
    payloads.remove(0)
}

#[test]
fn each_notice_has_its_wire_form_and_reads_back() {
    let cases = [
        (
            Notice::EventsCommitted {
                session_key: 42,
                from_seq: 7,
                to_seq: 9,
            },
            "events 42 7 9".to_owned(),
        ),
        (
            Notice::TextDelta {
                session_id: session(),
                run_id: run(),
                offset_bytes: 12,
                chunk: "two words\nand a \\ and a \0 ✓".to_owned(),
            },
            format!(
                "delta {} {} 12 two words\nand a \\\\ and a \\0 ✓",
                session(),
                run()
            ),
        ),
        (
            Notice::TextDelta {
                session_id: session(),
                run_id: run(),
                offset_bytes: 0,
                chunk: String::new(),
            },
            format!("delta {} {} 0 ", session(), run()),
        ),
        (
            Notice::RunFinished {
                session_id: session(),
                run_id: run(),
                status: RunStatus::Canceled,
            },
            format!("finished {} {} canceled", session(), run()),
        ),
        (
            Notice::SessionChanged {
                session_id: session(),
                reason: "title".to_owned(),
                seqs: None,
            },
            format!("changed {} - title", session()),
        ),
        (
            Notice::SessionChanged {
                session_id: session(),
                reason: "a reason with spaces".to_owned(),
                seqs: Some((3, 5)),
            },
            format!("changed {} 3:5 a reason with spaces", session()),
        ),
        (
            Notice::SessionDeleted {
                session_id: session(),
                account_id: account(),
            },
            format!("deleted {} {}", session(), account()),
        ),
        (
            Notice::AccountChanged {
                account_id: account(),
                reasons: vec!["session-updated".to_owned(), "session-continued".to_owned()],
            },
            format!("account {} session-updated\nsession-continued", account()),
        ),
        (
            Notice::ToolCall {
                session_id: session(),
                run_id: run(),
                seq: 8,
                call_id: "call 1".to_owned(),
                name: "read".to_owned(),
                arguments: serde_json::json!({"path": "a\\b"}),
            },
            format!(
                "tool {} {} 8 [\"call 1\",\"read\",{{\"path\":\"a\\\\\\\\b\"}}]",
                session(),
                run()
            ),
        ),
        (
            Notice::ApprovalPending {
                session_id: session(),
                run_id: run(),
                call_id: "c".to_owned(),
                name: "bash".to_owned(),
                arguments: serde_json::json!({"command": "ls"}),
            },
            format!(
                "approval {} {} [\"c\",\"bash\",{{\"command\":\"ls\"}}]",
                session(),
                run()
            ),
        ),
        (
            Notice::ElicitationPending {
                session_id: session(),
                run_id: run(),
                call_id: "c".to_owned(),
                name: "mcp".to_owned(),
                arguments: serde_json::json!({}),
                message: "which?".to_owned(),
                requested_schema: serde_json::json!({"type": "object"}),
            },
            format!(
                "elicitation {} {} [\"c\",\"mcp\",{{}},\"which?\",{{\"type\":\"object\"}}]",
                session(),
                run()
            ),
        ),
        (Notice::Missed, "missed".to_owned()),
    ];
    for (notice, wire) in cases {
        let wire = format!("{ORIGIN} {wire}");
        assert_eq!(one_payload(&notice), wire);
        assert_eq!(
            Notice::decode(&wire),
            Ok((ORIGIN.to_owned(), notice)),
            "{wire:?}"
        );
    }
}

#[test]
fn malformed_payloads_are_errors_that_say_why() {
    let (s, r) = (session(), run());
    let cases = [
        ("gossip".to_owned(), "no fields after the kind"),
        ("events".to_owned(), "no fields after the kind"),
        ("events 1 2".to_owned(), "lacks a field"),
        (
            "events 1 2 3 4".to_owned(),
            "last seq \"3 4\" is not a number",
        ),
        (
            "events x 2 3".to_owned(),
            "session key \"x\" is not a number",
        ),
        ("gossip 1 2".to_owned(), "no notice is called \"gossip\""),
        (format!("delta {s} {r} 5"), "lacks a field"),
        (
            format!("delta {s} {r} -5 text"),
            "offset \"-5\" is not a number",
        ),
        (
            format!("delta nope {r} 5 text"),
            "session id \"nope\" is not a uuid",
        ),
        (format!("delta {s} {s}x 5 text"), "run id"),
        (format!("delta {s} {r} 5 a \\n b"), "an unknown escape \\n"),
        (
            format!("delta {s} {r} 5 ends in \\"),
            "a backslash at the end",
        ),
        (
            format!("finished {s} {r} exploded"),
            "no run status is called \"exploded\"",
        ),
        (format!("finished {s} {r}"), "lacks a field"),
        (format!("changed {s} -"), "lacks a field"),
        (format!("changed {s} 3 events"), "are not <from>:<to>"),
        (
            format!("changed {s} 3:x events"),
            "last seq \"x\" is not a number",
        ),
        (
            format!("deleted {s} nope"),
            "account id \"nope\" is not a uuid",
        ),
        (format!("tool {s} {r} 1 [1]"), "the call is not its JSON"),
    ];
    assert!(
        Notice::decode("lonely")
            .expect_err("no kind")
            .reason()
            .contains("no kind after the origin")
    );
    for (payload, reason) in cases {
        let payload = format!("{ORIGIN} {payload}");
        let error = Notice::decode(&payload).expect_err(&payload);
        assert!(error.reason().contains(reason), "{payload:?}: {error}");
        assert!(error.to_string().starts_with("malformed notice"), "{error}");
    }
}

#[test]
fn a_notice_past_the_limit_is_refused_and_the_limit_itself_is_not() {
    let changed = |reason_bytes: usize| Notice::SessionChanged {
        session_id: session(),
        reason: "r".repeat(reason_bytes),
        seqs: None,
    };
    let head = format!("{ORIGIN} changed {} - ", session()).len();
    let fits = changed(NOTIFY_PAYLOAD_BYTES_MAX - head);
    assert_eq!(one_payload(&fits).len(), NOTIFY_PAYLOAD_BYTES_MAX);
    assert_eq!(
        changed(NOTIFY_PAYLOAD_BYTES_MAX - head + 1).payloads(ORIGIN),
        Err(TooLong {
            bytes: NOTIFY_PAYLOAD_BYTES_MAX + 1
        })
    );
    let sql = notify_sql(CHANNEL, ORIGIN, &fits).expect("it fits");
    assert_eq!(sql.len(), 1);
    assert_eq!(sql[0].params(), [CHANNEL, one_payload(&fits).as_str()]);
    assert_eq!(Notify::SQL, "SELECT pg_notify($1, $2)");
}

/// splitmix64: the random texts below come from a seed, so a failure names the seed that
/// replays it.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A text of up to `bytes_max` bytes, drawn from a few alphabets: one, two, three and four
/// bytes a char, and the chars the payload escapes.
fn random_text(random: &mut Random, bytes_max: u64) -> String {
    const ALPHABETS: [&[char]; 5] = [
        &['a', 'b', ' ', '\n'],
        &['é', 'ß', 'ж'],
        &['✓', '中', '€'],
        &['🦀', '𝄞'],
        &['\\', '\0'],
    ];
    // Some texts mix every alphabet; others hold one alone (all four-byte chars, all
    // escapes), which are the ones that find an off-by-one at a chunk's end.
    let only = random.below(ALPHABETS.len() as u64 + 1) as usize;
    let bytes = random.below(bytes_max + 1) as usize;
    let mut text = String::new();
    while text.len() < bytes {
        let alphabet = match ALPHABETS.get(only) {
            Some(alphabet) => alphabet,
            None => ALPHABETS[random.below(ALPHABETS.len() as u64) as usize],
        };
        text.push(alphabet[random.below(alphabet.len() as u64) as usize]);
    }
    text
}

#[test]
fn a_split_delta_reassembles_to_its_text_in_payloads_postgres_takes() {
    for seed in 0..300_u64 {
        let mut random = Random(seed);
        let text = random_text(&mut random, 40_000);
        let offset_bytes = random.below(1 << 40);
        let notice = Notice::TextDelta {
            session_id: session(),
            run_id: run(),
            offset_bytes,
            chunk: text.clone(),
        };
        let payloads = notice
            .payloads(ORIGIN)
            .expect("a delta is split, never too long");
        let mut reassembled = String::new();
        for payload in &payloads {
            assert!(
                payload.len() <= NOTIFY_PAYLOAD_BYTES_MAX,
                "seed {seed}: a payload of {} bytes",
                payload.len()
            );
            let Ok((
                _,
                Notice::TextDelta {
                    offset_bytes: chunk_offset,
                    chunk,
                    ..
                },
            )) = Notice::decode(payload)
            else {
                panic!("seed {seed}: not a delta: {payload:?}");
            };
            assert_eq!(
                chunk_offset,
                offset_bytes + reassembled.len() as u64,
                "seed {seed}: a chunk that does not continue the one before"
            );
            assert!(
                !chunk.is_empty() || text.is_empty(),
                "seed {seed}: an empty chunk"
            );
            reassembled.push_str(&chunk);
        }
        assert!(
            reassembled == text,
            "seed {seed}: the text does not reassemble"
        );
        // No more chunks than the text needs: all but the last are nearly full.
        for payload in &payloads[..payloads.len() - 1] {
            assert!(
                payload.len() > NOTIFY_PAYLOAD_BYTES_MAX - 4,
                "seed {seed}: a short chunk of {} bytes before the last",
                payload.len()
            );
        }
    }
}
