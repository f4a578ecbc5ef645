//! The preview read off the projection: parts that add up to it, each source's fit, the omitted
//! ranges' sizes, the first request against the window, and the recommended ranges.

use seed_events::{
    ContinueSessionInput, EventId, EventRole, Handoff, PlanTransfer, SeqRange, SessionEvent,
    SessionId, Source,
};
use seed_providers::estimate::{BYTES_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS};
use serde_json::json;

use super::*;
use crate::continuation::recommend::Why;
use crate::continuation::{
    EXCERPT_EVENTS_MAX, ProjectionInput, RECENT_EXCHANGES_EVENTS_MAX, ThreadRef, compile_projection,
};

fn thread(n: u128) -> SessionId {
    SessionId::from_u128(0x9900 + n)
}

/// A thread of `n` messages alternating user and assistant, each `seq` and `text_len` x's.
fn transcript(session_id: SessionId, n: i64, text_len: usize) -> Vec<SessionEvent> {
    (1..=n)
        .map(|seq| {
            let role = if seq % 2 == 1 {
                EventRole::User
            } else {
                EventRole::Assistant
            };
            SessionEvent {
                id: EventId(1000 + seq),
                session_id,
                seq,
                kind: "message".to_owned(),
                role: Some(role),
                actor: Some(if seq % 2 == 1 { "user" } else { "agent" }.to_owned()),
                content: json!({ "text": format!("{seq} {}", "x".repeat(text_len)) }),
                meta: json!({}),
                run_id: None,
                pi_entry_id: None,
                created_at_ms: seq,
            }
        })
        .collect()
}

fn arguments(sources: Vec<Source>) -> ContinueSessionInput {
    ContinueSessionInput {
        reason: "phase change".to_owned(),
        title: "Lisbon hotels".to_owned(),
        description: "Comparing hotels".to_owned(),
        handoff: Handoff {
            purpose: vec!["Book a hotel in Lisbon".to_owned()],
            ..Handoff::default()
        },
        sources,
        plan: None,
    }
}

/// What the shell reads, compiled and previewed over `log` (thread 1, the predecessor), its
/// last user message the initiating one.
struct Previewed {
    projection: Projection,
    preview: Preview,
}

fn previewed(
    input: &ContinueSessionInput,
    log: &[SessionEvent],
    budget_bytes: usize,
    window_tokens: Option<u64>,
    recommended: &[Recommendation],
) -> Previewed {
    let initiating = log
        .iter()
        .rev()
        .find(|event| event.role == Some(EventRole::User))
        .expect("a user message");
    let cited: Vec<(SeqRange, Vec<SessionEvent>)> = input
        .sources
        .iter()
        .filter_map(Source::range)
        .filter(|range| range.thread == thread(1))
        .map(|range| {
            let events = log
                .iter()
                .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
                .take(EXCERPT_EVENTS_MAX)
                .cloned()
                .collect();
            (range, events)
        })
        .collect();
    let recent_from = (initiating.seq - RECENT_EXCHANGES_EVENTS_MAX as i64).max(1);
    let recent: Vec<SessionEvent> = log
        .iter()
        .filter(|event| event.seq >= recent_from && event.seq < initiating.seq)
        .cloned()
        .collect();
    let lineage = [ThreadRef {
        session_id: thread(1),
        title: "Trip".to_owned(),
    }];
    let projection = compile_projection(&ProjectionInput {
        input,
        plan: PlanTransfer::Omit,
        lineage: &lineage,
        origin_session_id: thread(1),
        initiating,
        predecessor_last_seq: log.last().map_or(0, |event| event.seq),
        cited: &cited,
        recent: &recent,
        budget_bytes,
    });
    // The shell reads the omitted ranges too (here: all of them).
    let mut events = recent.clone();
    for range in &projection.manifest.omitted {
        events.extend(
            log.iter()
                .filter(|event| event.seq >= range.from_seq && event.seq <= range.to_seq)
                .cloned(),
        );
    }
    let message_text = "8 please compare them";
    let preview = preview(&PreviewInput {
        projection: &projection,
        cited: &cited,
        events: &events,
        message_text,
        fixed_tokens: 1_000,
        window_tokens,
        recommended,
    });
    Previewed {
        projection,
        preview,
    }
}

#[test]
fn the_parts_add_up_to_the_projection_the_manifest_records() {
    let log = transcript(thread(1), 9, 40);
    let input = arguments(vec![Source::SessionEvents {
        thread: thread(1),
        from_seq: 2,
        to_seq: 3,
    }]);
    let Previewed {
        projection,
        preview,
    } = previewed(&input, &log, 32 * 1024, None, &[]);
    assert_eq!(preview.projection_bytes, projection.text.len() as u64);
    assert_eq!(
        preview.projection_bytes,
        projection.manifest.projection_bytes
    );
    assert_eq!(preview.budget_bytes, 32 * 1024);
    assert_eq!(preview.budget_tokens, 32 * 1024 / BYTES_PER_TOKEN);
    let kinds: Vec<(&str, Option<i64>, Option<i64>)> = preview
        .parts
        .iter()
        .map(|part| (part.kind.as_str(), part.from_seq, part.to_seq))
        .collect();
    assert_eq!(
        kinds,
        [
            ("continuation", None, None),
            ("handoff", None, None),
            ("sources", None, None),
            ("excerpt", Some(2), Some(3)),
            ("recent_exchanges", Some(1), Some(8)),
        ]
    );
    assert_eq!(
        preview.parts.iter().map(|part| part.bytes).sum::<u64>(),
        preview.projection_bytes
    );
    // Each part is the text between its frame's lines, byte for byte.
    let excerpt = &preview.parts[3];
    let start = projection.text.find("<excerpt ").expect("an excerpt");
    assert_eq!(
        &projection.text[start..start + excerpt.bytes as usize],
        format!(
            "<excerpt thread=\"{}\" from=\"2\" to=\"3\">\n{}\n{}\n</excerpt>\n",
            thread(1),
            crate::transcript::transcript_event_line(&log[1]).expect("a line"),
            crate::transcript::transcript_event_line(&log[2]).expect("a line"),
        )
    );
    // Everything fits: nothing omitted, every source whole.
    assert!(preview.omitted.is_empty());
    assert_eq!(preview.sources.len(), 1);
    assert_eq!(preview.sources[0].loaded, Loaded::Whole);
    assert!(preview.sources[0].fits);
    assert_eq!(preview.sources[0].bytes, Some(excerpt.bytes));
    assert_eq!(preview.sources[0].loaded_bytes, excerpt.bytes);
}

/// A source's name, how it is loaded, whether it fits, its bytes whole and where it was cut.
type Fit<'a> = (&'a str, Loaded, bool, Option<u64>, Option<i64>);

#[test]
fn each_source_says_whether_it_fits_and_the_omitted_ranges_have_sizes() {
    // 61 messages of about 300 bytes; a budget of 6 KiB holds about 15 lines after the
    // handoff, so the first range is cut, the second gets nothing, the resource is listed.
    let log = transcript(thread(1), 61, 300);
    let input = arguments(vec![
        Source::SessionEvents {
            thread: thread(1),
            from_seq: 1,
            to_seq: 30,
        },
        Source::SessionEvent {
            thread: thread(1),
            seq: 40,
        },
        Source::Resource {
            uri: "https://example.org/hotels".to_owned(),
        },
        Source::SessionEvents {
            thread: thread(7),
            from_seq: 1,
            to_seq: 2,
        },
    ]);
    let Previewed {
        projection,
        preview,
    } = previewed(&input, &log, 6 * 1024, None, &[]);
    let manifest = &projection.manifest;
    let cut_to = manifest.excerpts[0].to_seq;
    assert!(cut_to > 1 && cut_to < 30, "{:?}", manifest.excerpts);

    let line_bytes = |from: i64, to: i64| -> u64 {
        log[(from - 1) as usize..to as usize]
            .iter()
            .map(|event| {
                crate::transcript::transcript_event_line(event)
                    .expect("a line")
                    .len() as u64
                    + 1
            })
            .sum()
    };
    let frame = |from: i64, to: i64| {
        format!(
            "<excerpt thread=\"{}\" from=\"{from}\" to=\"{to}\">\n</excerpt>\n",
            thread(1)
        )
        .len() as u64
    };
    let fits: Vec<Fit<'_>> = preview
        .sources
        .iter()
        .map(|fit| {
            (
                fit.source.as_str(),
                fit.loaded,
                fit.fits,
                fit.bytes,
                fit.loaded_to_seq,
            )
        })
        .collect();
    let first = format!("thread:{} seq 1\u{2013}30", thread(1));
    let second = format!("thread:{} seq 40", thread(1));
    let other = format!("thread:{} seq 1\u{2013}2", thread(7));
    assert_eq!(
        fits,
        [
            (
                first.as_str(),
                Loaded::Cut,
                false,
                Some(frame(1, 30) + line_bytes(1, 30)),
                Some(cut_to)
            ),
            (
                second.as_str(),
                Loaded::Omitted,
                false,
                Some(frame(40, 40) + line_bytes(40, 40)),
                None
            ),
            (
                "https://example.org/hotels",
                Loaded::Listed,
                true,
                None,
                None
            ),
            (other.as_str(), Loaded::Listed, true, None, None),
        ]
    );
    assert_eq!(
        preview.sources[0].loaded_bytes,
        frame(1, cut_to) + line_bytes(1, cut_to),
        "the cut excerpt's bytes are its frame and the lines it holds"
    );
    assert_eq!(preview.sources[1].loaded_bytes, 0);

    // The omitted ranges are the manifest's, each with its lines' bytes.
    let omitted: Vec<(i64, i64, u64, bool)> = preview
        .omitted
        .iter()
        .map(|range| {
            (
                range.from_seq,
                range.to_seq,
                range.bytes,
                range.counted_whole,
            )
        })
        .collect();
    let expected: Vec<(i64, i64, u64, bool)> = manifest
        .omitted
        .iter()
        .map(|range| {
            (
                range.from_seq,
                range.to_seq,
                line_bytes(range.from_seq, range.to_seq),
                true,
            )
        })
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(omitted, expected);
    assert!(preview.projection_bytes <= preview.budget_bytes);
}

#[test]
fn an_omitted_range_read_in_part_says_so() {
    let log = transcript(thread(1), 61, 300);
    let input = arguments(Vec::new());
    let Previewed { projection, .. } = previewed(&input, &log, 4 * 1024, None, &[]);
    let range = projection.manifest.omitted[0];
    // The shell read only the first 3 events of it.
    let read: Vec<SessionEvent> =
        log[(range.from_seq - 1) as usize..(range.from_seq + 2) as usize].to_vec();
    let preview = preview(&PreviewInput {
        projection: &projection,
        cited: &[],
        events: &read,
        message_text: "",
        fixed_tokens: 0,
        window_tokens: None,
        recommended: &[],
    });
    assert_eq!(preview.omitted[0].n_events_counted, 3);
    assert!(!preview.omitted[0].counted_whole);
}

#[test]
fn the_first_request_is_the_projection_the_message_and_the_rest_against_the_window() {
    let log = transcript(thread(1), 9, 40);
    let input = arguments(Vec::new());
    let Previewed {
        projection,
        preview,
    } = previewed(&input, &log, 32 * 1024, Some(20_000), &[]);
    let projection_tokens =
        (projection.text.len() as u64).div_ceil(BYTES_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS;
    let message_tokens =
        ("8 please compare them".len() as u64).div_ceil(BYTES_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS;
    let tokens = 1_000 + projection_tokens + message_tokens;
    assert_eq!(preview.projection_tokens, projection_tokens);
    assert_eq!(
        preview.first_request,
        FirstRequest {
            tokens,
            projection_tokens,
            message_tokens,
            fixed_tokens: 1_000,
            window_tokens: Some(20_000),
            window_percent: Some((tokens * 1000 / 20_000) as f64 / 10.0),
        }
    );
    let unknown = previewed(&input, &log, 32 * 1024, None, &[]).preview;
    assert_eq!(unknown.first_request.window_percent, None);
    assert_eq!(unknown.first_request.tokens, tokens);
}

#[test]
fn a_recommended_range_says_whether_the_projection_loads_it() {
    let log = transcript(thread(1), 61, 300);
    let input = arguments(vec![Source::SessionEvents {
        thread: thread(1),
        from_seq: 3,
        to_seq: 4,
    }]);
    let recommended = [
        Recommendation {
            from_seq: 3,
            to_seq: 4,
            why: vec![Why::FailedCall {
                verb: "read".to_owned(),
            }],
        },
        Recommendation {
            from_seq: 10,
            to_seq: 12,
            why: vec![Why::NewestExchanges],
        },
        Recommendation {
            from_seq: 59,
            to_seq: 60,
            why: vec![Why::NewestExchanges],
        },
    ];
    let preview = previewed(&input, &log, 8 * 1024, None, &recommended).preview;
    let loaded: Vec<(i64, bool, Vec<String>)> = preview
        .recommended
        .iter()
        .map(|range| (range.from_seq, range.loaded, range.reasons.clone()))
        .collect();
    assert_eq!(
        loaded,
        [
            (3, true, vec!["read failed and was not retried".to_owned()]),
            (10, false, vec!["the newest exchanges".to_owned()]),
            (59, true, vec!["the newest exchanges".to_owned()]),
        ]
    );
}
