//! `seed fsck`'s checks that need the projections, pure: a session's log and durable store in
//! agreement (each entry projected exactly once, no mark without its entry), and a successor's
//! projection loading exactly the events it cites — each `<excerpt>` and `<recent_exchanges>`
//! block byte for byte the transcript lines of the predecessor's events in its range, as
//! `continuation::compile_projection` wrote them. The store's own checks (seqs, edges,
//! manifests, attachments) are `seed_store::fsck`.

use std::collections::{BTreeMap, BTreeSet};

use seed_durable::{OpenLines, StoreState};
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

/// Where what the store kept of a session's fold (`opened`: the kept state and the lines after
/// it, as a harness opens them) does not open to what a turn would read of the fold of every
/// line: the context since the newest reset, the system prompt before it, the documents and the
/// tasks. Empty when they agree, or when the files do not fold (found by
/// [`log_and_store_findings`]).
pub fn kept_findings(
    entries: &[String],
    documents: &[String],
    tasks: &[String],
    opened: &OpenLines,
) -> Vec<String> {
    let Some(kept) = opened.kept.clone() else {
        return Vec::new();
    };
    let Ok(whole) = StoreState::fold(entries, documents, tasks) else {
        return Vec::new();
    };
    let from_kept =
        match StoreState::open_kept(kept, &opened.entries, &opened.documents, &opened.tasks) {
            Ok(state) => state,
            Err(error) => {
                return vec![format!(
                    "what the store kept of its files does not open: {error}"
                )];
            }
        };
    let mut findings = Vec::new();
    let context = |state: &StoreState, from: seed_durable::EntryId| -> Vec<seed_durable::Entry> {
        state
            .entries
            .iter()
            .filter(|entry| entry.id >= from)
            .cloned()
            .collect()
    };
    let (whole_kept, opened_kept) = (whole.kept(), from_kept.kept());
    let from = whole_kept.first_entry_id;
    if opened_kept.first_entry_id != from {
        findings.push(format!(
            "what the store kept starts its context at entry {}, not at the newest reset's {from}",
            opened_kept.first_entry_id
        ));
    } else if context(&whole, from) != context(&from_kept, from) {
        findings.push(format!(
            "what the store kept opens to other entries from entry {from} on than its files hold"
        ));
    }
    if whole_kept.system != opened_kept.system {
        findings.push("what the store kept opens to another system prompt".to_owned());
    }
    if whole_kept.documents != opened_kept.documents {
        findings
            .push("what the store kept opens to other documents than its files hold".to_owned());
    }
    if whole_kept.tasks != opened_kept.tasks {
        findings.push("what the store kept opens to other tasks than its files hold".to_owned());
    }
    findings
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

    /// A session's files: a system prompt, a reset, another system prompt and two documents.
    fn kept_files() -> (Vec<String>, Vec<String>) {
        let entries = vec![
            r#"{"id":1,"type":"pi.system","system_prompt":"first","tools":[]}"#.to_owned(),
            r#"{"id":2,"type":"pi.reset"}"#.to_owned(),
            r#"{"id":3,"type":"pi.system","system_prompt":"second","tools":[]}"#.to_owned(),
        ];
        let documents = vec![
            r#"{"name":"notes","value":1}"#.to_owned(),
            r#"{"name":"notes","value":2}"#.to_owned(),
        ];
        (entries, documents)
    }

    /// What a store keeps after folding the first `n_entries` entries and `n_documents`
    /// documents, and the lines after it, as it opens them.
    fn opened(n_entries: usize, n_documents: usize) -> OpenLines {
        let (entries, documents) = kept_files();
        let folded =
            StoreState::fold(&entries[..n_entries], &documents[..n_documents], &[]).expect("folds");
        let kept = folded.kept();
        let from = usize::try_from(kept.first_entry_id).expect("small") - 1;
        OpenLines {
            kept: Some(kept),
            entries: entries[from..].to_vec(),
            documents: documents[n_documents..].to_vec(),
            tasks: Vec::new(),
            n_after_kept: 0,
        }
    }

    #[test]
    fn what_the_store_kept_agrees_with_the_whole_fold() {
        let (entries, documents) = kept_files();
        for (n_entries, n_documents) in [(3, 2), (2, 1), (3, 0)] {
            let found = kept_findings(&entries, &documents, &[], &opened(n_entries, n_documents));
            assert_eq!(
                found,
                Vec::<String>::new(),
                "kept at {n_entries}/{n_documents}"
            );
        }
        let nothing_kept = OpenLines::default();
        assert!(kept_findings(&entries, &documents, &[], &nothing_kept).is_empty());
    }

    #[test]
    fn a_kept_state_that_differs_from_the_files_is_found() {
        let (entries, documents) = kept_files();
        // A document the kept state holds at another value than the files end with.
        let mut wrong_document = opened(3, 2);
        if let Some(kept) = wrong_document.kept.as_mut() {
            kept.documents.insert("notes".to_owned(), json!(7));
        }
        let found = kept_findings(&entries, &documents, &[], &wrong_document);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("other documents"), "{found:?}");
        // A kept context that starts past the newest reset.
        let mut late = opened(3, 2);
        if let Some(kept) = late.kept.as_mut() {
            kept.first_entry_id = 4;
        }
        let found = kept_findings(&entries, &documents, &[], &late);
        assert!(
            found
                .iter()
                .any(|line| line.contains("does not open") || line.contains("newest reset")),
            "{found:?}"
        );
        // Entry lines after the kept state that are not the files' (one lost).
        let mut lost = opened(2, 1);
        lost.entries.pop();
        let found = kept_findings(&entries, &documents, &[], &lost);
        assert!(
            found.iter().any(|line| line.contains("other entries")),
            "{found:?}"
        );
        // A system prompt before the reset, the only one, that the kept state lost.
        let mut no_system = opened(2, 2);
        no_system.entries.truncate(1);
        if let Some(kept) = no_system.kept.as_mut() {
            assert!(kept.system.is_some(), "kept before the reset");
            kept.system = None;
        }
        let found = kept_findings(&entries[..2], &documents, &[], &no_system);
        assert!(
            found.iter().any(|line| line.contains("system prompt")),
            "{found:?}"
        );
    }
}
