//! `seed fsck`'s checks that need the projections, pure: a session's log and durable store in
//! agreement (each entry projected exactly once, no mark without its entry), and a successor's
//! projection loading exactly the events it cites — each `<excerpt>` and `<recent_exchanges>`
//! block byte for byte the transcript lines of the predecessor's events in its range, as
//! `continuation::compile_projection` wrote them. The store's own checks (seqs, edges,
//! manifests, attachments) are `seed_store::fsck`.

use std::collections::{BTreeMap, BTreeSet};

use seed_durable::StoreState;
use seed_events::{SessionEvent, SessionId};

use crate::store_to_log::log_store_disagreements;
use crate::transcript::{content_text, transcript_event_line};

/// How a session's log and its durable files disagree: files that do not fold, or entries
/// projected other than exactly once. Empty when they agree.
pub fn log_and_store_findings(
    events: &[SessionEvent],
    entries: &[String],
    documents: &[String],
    tasks: &[String],
) -> Vec<String> {
    match StoreState::fold(entries, documents, tasks) {
        Ok(state) => log_store_disagreements(&state.entries, events)
            .into_iter()
            .map(|problem| format!("log and store disagree: {problem}"))
            .collect(),
        Err(error) => vec![format!("its durable files do not fold: {error}")],
    }
}

/// The frames a projection loads events in.
const FRAMES: [&str; 2] = ["excerpt", "recent_exchanges"];

/// Where a successor's projection (`projection`, its first event) does not hold exactly the
/// events of `predecessor` it cites: each loaded block must be the transcript lines of the
/// events of its range (`cited`, the predecessor's events read for the manifest's ranges),
/// leaving out what an earlier block showed, byte for byte. Empty when every block is exact.
pub fn projection_findings(
    projection: &SessionEvent,
    predecessor: SessionId,
    cited: &[SessionEvent],
) -> Vec<String> {
    let Some(text) = content_text(&projection.content) else {
        return vec![format!(
            "its first event (seq {}) is not a projection's text",
            projection.seq
        )];
    };
    let by_seq: BTreeMap<i64, &SessionEvent> =
        cited.iter().map(|event| (event.seq, event)).collect();
    let mut shown: BTreeSet<i64> = BTreeSet::new();
    let mut findings = Vec::new();
    let mut at = 0;
    while let Some((frame, start, body)) = next_frame(text, at) {
        let close = format!("</{}>", frame.tag);
        let what = format!(
            "the <{}> of thread {} seq {}\u{2013}{}",
            frame.tag, frame.thread, frame.from_seq, frame.to_seq
        );
        at = body;
        if frame.thread != predecessor.to_string() {
            findings.push(format!("{what} is not of its predecessor {predecessor}"));
            continue;
        }
        let mut expected = String::new();
        let mut missing = None;
        for seq in frame.from_seq..=frame.to_seq {
            if shown.contains(&seq) {
                continue;
            }
            let Some(event) = by_seq.get(&seq) else {
                missing.get_or_insert(seq);
                continue;
            };
            if let Some(line) = transcript_event_line(event) {
                expected.push_str(&line);
                expected.push('\n');
                shown.insert(seq);
            }
        }
        if let Some(seq) = missing {
            findings.push(format!(
                "{what} cites seq {seq}, which its predecessor lacks"
            ));
            continue;
        }
        let actual = &text[body..];
        if actual.starts_with(&format!("{expected}{close}")) {
            at = body + expected.len() + close.len();
            continue;
        }
        let actual = &actual[..actual.find(&close).unwrap_or(actual.len())];
        let differing = actual
            .split_inclusive('\n')
            .zip(expected.split_inclusive('\n'))
            .position(|(actual, expected)| actual != expected)
            .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()));
        let line = expected
            .lines()
            .nth(differing)
            .or_else(|| actual.lines().nth(differing))
            .unwrap_or_default();
        let seq = line
            .strip_prefix('[')
            .and_then(|rest| rest.split(']').next())
            .unwrap_or("?");
        findings.push(format!(
            "{what} (at byte {start} of its projection) is not byte for byte the events it \
             cites: its line {} differs (seq {seq})",
            differing + 1
        ));
    }
    findings
}

/// A loaded block's opening frame.
struct Frame {
    tag: &'static str,
    thread: String,
    from_seq: i64,
    to_seq: i64,
}

/// The first frame at the start of a line at or after `at`: the frame, where it starts, and
/// where its body starts.
fn next_frame(text: &str, at: usize) -> Option<(Frame, usize, usize)> {
    let mut line_start = at;
    while line_start < text.len() {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |idx| line_start + idx);
        let line = &text[line_start..line_end];
        for tag in FRAMES {
            if let Some(frame) = parse_frame(tag, line) {
                return Some((frame, line_start, (line_end + 1).min(text.len())));
            }
        }
        line_start = line_end + 1;
    }
    None
}

/// `<TAG thread="T" from="A" to="B">`.
fn parse_frame(tag: &'static str, line: &str) -> Option<Frame> {
    let rest = line.strip_prefix('<')?.strip_prefix(tag)?;
    let rest = rest.strip_prefix(" thread=\"")?;
    let (thread, rest) = rest.split_once("\" from=\"")?;
    let (from, rest) = rest.split_once("\" to=\"")?;
    let to = rest.strip_suffix("\">")?;
    Some(Frame {
        tag,
        thread: thread.to_owned(),
        from_seq: from.parse().ok()?,
        to_seq: to.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuation::{ProjectionInput, ThreadRef, compile_projection};
    use seed_events::continuation::{ContinueSessionInput, PlanTransfer, Source};
    use seed_events::{EventId, EventRole};
    use serde_json::json;

    fn predecessor() -> SessionId {
        SessionId::from_u128(7)
    }

    fn event(seq: i64, role: EventRole, text: &str) -> SessionEvent {
        SessionEvent {
            id: EventId(seq),
            session_id: predecessor(),
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
            created_at_ms: 0,
        }
    }

    /// A predecessor of ten messages, a projection citing seqs 2–4, and its first event.
    fn projected() -> (Vec<SessionEvent>, SessionEvent) {
        let log: Vec<SessionEvent> = (1..=10)
            .map(|seq| {
                let role = if seq % 2 == 1 {
                    EventRole::User
                } else {
                    EventRole::Assistant
                };
                event(seq, role, &format!("message {seq} <with> \"framing\""))
            })
            .collect();
        let input = ContinueSessionInput {
            reason: "topic".to_owned(),
            title: "next".to_owned(),
            description: "on".to_owned(),
            handoff: Default::default(),
            sources: vec![Source::SessionEvents {
                thread: predecessor(),
                from_seq: 2,
                to_seq: 4,
            }],
            plan: None,
        };
        let projection = compile_projection(&ProjectionInput {
            input: &input,
            plan: PlanTransfer::Omit,
            lineage: &[ThreadRef {
                session_id: predecessor(),
                title: "first".to_owned(),
            }],
            origin_session_id: predecessor(),
            initiating: &log[8],
            predecessor_last_seq: 10,
            cited: &[(
                input.sources[0].range().expect("a range"),
                log[1..4].to_vec(),
            )],
            recent: &log[4..8],
            budget_bytes: 100_000,
        });
        assert!(
            projection.text.contains("<excerpt thread="),
            "{}",
            projection.text
        );
        assert!(projection.text.contains("<recent_exchanges thread="));
        let mut first = event(1, EventRole::User, &projection.text);
        first.session_id = SessionId::from_u128(8);
        first.actor = Some("system".to_owned());
        (log, first)
    }

    #[test]
    fn a_projection_as_compiled_loads_exactly_what_it_cites() {
        let (log, first) = projected();
        assert_eq!(
            projection_findings(&first, predecessor(), &log),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_changed_byte_of_an_excerpt_or_of_a_cited_event_is_found_with_its_seq() {
        let (mut log, first) = projected();
        let text = first.content["text"].as_str().expect("text").to_owned();
        let mut changed = first.clone();
        changed.content = json!({ "text": text.replacen("message 3", "message 9", 1) });
        let findings = projection_findings(&changed, predecessor(), &log);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].contains("<excerpt> of thread"), "{findings:?}");
        assert!(findings[0].contains("seq 3"), "{findings:?}");

        log[6].content = json!({ "text": "message 7, edited" });
        let findings = projection_findings(&first, predecessor(), &log);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].contains("<recent_exchanges>"), "{findings:?}");
        assert!(findings[0].contains("seq 7"), "{findings:?}");

        let findings = projection_findings(&first, predecessor(), &log[..5]);
        assert!(
            findings[0].contains("which its predecessor lacks"),
            "{findings:?}"
        );
    }

    #[test]
    fn a_projection_of_another_thread_or_without_text_is_found() {
        let (log, first) = projected();
        let findings = projection_findings(&first, SessionId::from_u128(9), &log);
        assert!(
            findings
                .iter()
                .all(|finding| finding.contains("is not of its predecessor"))
        );
        let mut empty = first;
        empty.content = json!({});
        assert!(projection_findings(&empty, predecessor(), &log)[0].contains("not a projection"));
    }

    #[test]
    fn a_store_that_lacks_an_entry_the_log_names_disagrees() {
        let mut log = vec![event(1, EventRole::Assistant, "hi")];
        log[0].pi_entry_id = Some(1);
        let findings = log_and_store_findings(&log, &[], &[], &[]);
        assert_eq!(
            findings,
            ["log and store disagree: the log names entry 1, which the store lacks"]
        );
        let findings = log_and_store_findings(&log, &["not json".to_owned()], &[], &[]);
        assert!(
            findings[0].starts_with("its durable files do not fold"),
            "{findings:?}"
        );
    }
}
