//! The seam of a resumed stream on `/v1/subscribe`. A client that reconnects names a session,
//! the last seq it saw and how much of the response in flight it holds (in chars). The socket
//! joins the live feed first, so nothing is missed, then reads the catch-up: the events after
//! that seq, then the text in flight. What the live feed queued meanwhile may repeat the
//! catch-up; [`Seam`] drops what the catch-up covers, by seq for events and by `offset_chars`
//! for text, so that the client gets every event and every char once.
//!
//! It leans on the order in which the runtime tells of a session: the text deltas of one
//! response, in order, then the session change of its commit (which appends its events and
//! clears the text in flight in one transaction), then the next response's deltas, from offset 0.
//! A delta queued before the change of a commit the catch-up holds belongs to a committed
//! response: its text is in the catch-up's events.

use seed_events::{RunId, SessionId};

use crate::ws::Update;

/// Where a client resumes a session's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    pub session_id: SessionId,
    /// The last seq of the session's log the client holds.
    pub after_seq: i64,
    /// How much of the response in flight the client holds, in chars.
    pub offset_chars: usize,
}

/// What the catch-up read, at one moment: the log up to `last_seq` and the text in flight then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatchUp {
    /// The last seq the catch-up sent (the client's `after_seq` when the log had nothing newer).
    pub last_seq: i64,
    /// The seqs, among the events the catch-up sent, of those a model's response wrote (role
    /// assistant): each marks the commit of a response.
    pub response_seqs: Vec<i64>,
    /// The response streaming when the log ended at `last_seq`: its run and its text so far.
    pub live: Option<(RunId, String)>,
}

impl CatchUp {
    /// Whether the events from `from` to `to` hold a response's commit.
    fn commits_a_response(&self, from: i64, to: i64) -> bool {
        self.response_seqs
            .iter()
            .any(|seq| (from..=to).contains(seq))
    }
}

/// The text in flight the client lacks, as a text delta: past its `offset_chars` while it still
/// holds part of this very response (no response was committed after its `after_seq`), all of
/// it otherwise. `None` when nothing streams or the client holds it all.
pub fn live_delta(point: &ResumePoint, catch_up: &CatchUp) -> Option<Update> {
    let (run_id, text) = catch_up.live.as_ref()?;
    let n_chars = text.chars().count();
    let held = if catch_up.response_seqs.is_empty() && point.offset_chars <= n_chars {
        point.offset_chars
    } else {
        0
    };
    let rest: String = text.chars().skip(held).collect();
    (!rest.is_empty()).then_some(Update::TextDelta {
        session_id: point.session_id,
        run_id: *run_id,
        offset_chars: held,
        text: rest,
    })
}

/// Filters the live updates of a resumed socket, in the order they were queued, against its
/// catch-up: an update of another session passes; one the catch-up covers is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seam {
    session_id: SessionId,
    catch_up_last_seq: i64,
    /// The response in flight at the catch-up, as the client holds it after the catch-up: its
    /// run and the chars it holds of its text.
    held: Option<(RunId, usize)>,
    /// Whether a commit after the catch-up was told: all that follows is newer than the
    /// catch-up, and passes.
    through: bool,
}

impl Seam {
    pub fn new(session_id: SessionId, catch_up: &CatchUp) -> Seam {
        Seam {
            session_id,
            catch_up_last_seq: catch_up.last_seq,
            held: catch_up
                .live
                .as_ref()
                .map(|(run_id, text)| (*run_id, text.chars().count())),
            through: false,
        }
    }

    /// Whether every update from now on passes as it is.
    pub fn is_through(&self) -> bool {
        self.through
    }

    /// What to send of the updates queued while the catch-up was read, in order. A text delta
    /// queued before the change of a response commit the catch-up holds is dropped: that
    /// response's text is in the catch-up's events.
    pub fn buffered(&mut self, catch_up: &CatchUp, updates: Vec<Update>) -> Vec<Update> {
        let committed_before = updates
            .iter()
            .rposition(|update| match update {
                Update::SessionChange {
                    session_id,
                    from_seq: Some(from),
                    to_seq: Some(to),
                    ..
                } => {
                    *session_id == self.session_id
                        && *to <= catch_up.last_seq
                        && catch_up.commits_a_response(*from, *to)
                }
                _ => false,
            })
            .unwrap_or(0);
        updates
            .into_iter()
            .enumerate()
            .filter_map(|(index, update)| match &update {
                Update::TextDelta { session_id, .. }
                    if *session_id == self.session_id && index < committed_before =>
                {
                    None
                }
                _ => self.pass(update),
            })
            .collect()
    }

    /// `update` as the client should get it, trimmed to what it lacks; `None` when the
    /// catch-up covers it.
    pub fn pass(&mut self, update: Update) -> Option<Update> {
        if self.through {
            return Some(update);
        }
        match update {
            Update::SessionChange {
                session_id,
                to_seq: Some(to),
                ..
            } if session_id == self.session_id => {
                if to <= self.catch_up_last_seq {
                    return None;
                }
                self.through = true;
                Some(update)
            }
            Update::ToolCall {
                session_id, seq, ..
            } if session_id == self.session_id && seq <= self.catch_up_last_seq => None,
            Update::TextDelta {
                session_id,
                run_id,
                offset_chars,
                text,
            } if session_id == self.session_id => {
                let Some((held_run, held)) = self.held.as_mut() else {
                    return Some(Update::TextDelta {
                        session_id,
                        run_id,
                        offset_chars,
                        text,
                    });
                };
                if *held_run != run_id {
                    return Some(Update::TextDelta {
                        session_id,
                        run_id,
                        offset_chars,
                        text,
                    });
                }
                let end = offset_chars + text.chars().count();
                if end <= *held {
                    return None;
                }
                let skip = held.saturating_sub(offset_chars);
                let from = offset_chars + skip;
                *held = end;
                Some(Update::TextDelta {
                    session_id,
                    run_id,
                    offset_chars: from,
                    text: text.chars().skip(skip).collect(),
                })
            }
            update => Some(update),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionId {
        SessionId::from_u128(7)
    }

    fn other_session() -> SessionId {
        SessionId::from_u128(8)
    }

    fn run(n: u128) -> RunId {
        RunId::from_u128(n)
    }

    fn delta(run_id: RunId, offset_chars: usize, text: &str) -> Update {
        Update::TextDelta {
            session_id: session(),
            run_id,
            offset_chars,
            text: text.to_owned(),
        }
    }

    fn change(from: i64, to: i64) -> Update {
        Update::SessionChange {
            session_id: session(),
            reason: "events".to_owned(),
            from_seq: Some(from),
            to_seq: Some(to),
        }
    }

    fn point(after_seq: i64, offset_chars: usize) -> ResumePoint {
        ResumePoint {
            session_id: session(),
            after_seq,
            offset_chars,
        }
    }

    /// What a client assembles of the response in flight from `updates`, checking that each
    /// delta starts exactly where its text ends (no gap, no repeat); a commit of a response
    /// (a change whose events hold one) starts the next response afresh.
    fn assemble(mut text: String, updates: &[Update], responses: &[i64]) -> String {
        for update in updates {
            match update {
                Update::TextDelta {
                    session_id,
                    offset_chars,
                    text: more,
                    ..
                } if *session_id == session() => {
                    assert_eq!(*offset_chars, text.chars().count(), "{updates:?}");
                    text.push_str(more);
                }
                Update::SessionChange {
                    from_seq: Some(from),
                    to_seq: Some(to),
                    ..
                } if responses.iter().any(|seq| (from..=to).contains(&seq)) => text.clear(),
                _ => {}
            }
        }
        text
    }

    #[test]
    fn the_text_in_flight_is_sent_past_what_the_client_holds_unless_its_response_was_committed() {
        let streaming = CatchUp {
            last_seq: 4,
            response_seqs: vec![],
            live: Some((run(1), "héllo wörld".to_owned())),
        };
        assert_eq!(
            live_delta(&point(4, 3), &streaming),
            Some(delta(run(1), 3, "lo wörld")),
            "offsets count chars, not bytes"
        );
        assert_eq!(live_delta(&point(4, 11), &streaming), None, "all held");
        assert_eq!(
            live_delta(&point(4, 40), &streaming),
            Some(delta(run(1), 0, "héllo wörld")),
            "more than there is: not this response, all of it"
        );
        let committed = CatchUp {
            last_seq: 6,
            response_seqs: vec![5],
            live: Some((run(1), "next".to_owned())),
        };
        assert_eq!(
            live_delta(&point(4, 3), &committed),
            Some(delta(run(1), 0, "next")),
            "the held response is in the events: the next one from its start"
        );
        let idle = CatchUp {
            live: None,
            ..committed
        };
        assert_eq!(live_delta(&point(4, 3), &idle), None);
    }

    #[test]
    fn deltas_and_changes_the_catch_up_covers_are_dropped_and_one_across_the_seam_is_trimmed() {
        // The log held seq 4 and "hello wo" was in flight; while it was read, the live feed
        // queued the deltas "hello", " wo" (both read), "rld" (half read: " wo" + "rld" came
        // in one commit as " world"), another session's delta, and a change the catch-up read.
        let catch_up = CatchUp {
            last_seq: 4,
            response_seqs: vec![],
            live: Some((run(1), "hello wo".to_owned())),
        };
        let elsewhere = Update::TextDelta {
            session_id: other_session(),
            run_id: run(9),
            offset_chars: 0,
            text: "x".to_owned(),
        };
        let buffered = vec![
            delta(run(1), 0, "hello"),
            change(3, 4),
            elsewhere.clone(),
            delta(run(1), 5, " world"),
        ];
        let mut seam = Seam::new(session(), &catch_up);
        let sent = seam.buffered(&catch_up, buffered);
        assert_eq!(sent, [elsewhere, delta(run(1), 8, "rld")]);
        assert_eq!(
            seam.pass(delta(run(1), 11, "!")),
            Some(delta(run(1), 11, "!"))
        );
        let held = live_delta(&point(4, 2), &catch_up).expect("in flight");
        assert_eq!(
            assemble(
                "he".to_owned(),
                &[held].into_iter().chain(sent).collect::<Vec<_>>(),
                &[]
            ),
            "hello world"
        );
    }

    #[test]
    fn the_deltas_of_a_response_the_catch_up_holds_committed_are_dropped_and_the_next_pass() {
        // The client held "You s" of a response at seq 2; the response ("You said: hi") was
        // committed at seqs 3-4 before the catch-up read, and the next one ("ok") streams.
        // The queue holds the committed response's last delta, its change, then the next's.
        let catch_up = CatchUp {
            last_seq: 4,
            response_seqs: vec![3],
            live: Some((run(1), "o".to_owned())),
        };
        let buffered = vec![
            delta(run(1), 5, "aid: hi"),
            change(3, 4),
            delta(run(1), 0, "o"),
            delta(run(1), 1, "k"),
        ];
        let mut seam = Seam::new(session(), &catch_up);
        let sent = seam.buffered(&catch_up, buffered);
        assert_eq!(sent, [delta(run(1), 1, "k")]);
        let live = live_delta(&point(2, 5), &catch_up).expect("in flight");
        assert_eq!(live, delta(run(1), 0, "o"));
        assert_eq!(
            assemble(
                String::new(),
                &[live].into_iter().chain(sent).collect::<Vec<_>>(),
                &[]
            ),
            "ok"
        );
    }

    #[test]
    fn after_a_commit_newer_than_the_catch_up_everything_passes() {
        // "abc" was in flight; its commit (seqs 5-6) and the next response's first delta came
        // after the catch-up read: that delta starts at 0 again, and is not taken for a repeat.
        let catch_up = CatchUp {
            last_seq: 4,
            response_seqs: vec![],
            live: Some((run(1), "abc".to_owned())),
        };
        let mut seam = Seam::new(session(), &catch_up);
        let sent = seam.buffered(
            &catch_up,
            vec![delta(run(1), 3, "d"), change(5, 6), delta(run(1), 0, "x")],
        );
        assert_eq!(
            sent,
            [delta(run(1), 3, "d"), change(5, 6), delta(run(1), 0, "x")]
        );
        assert!(seam.is_through());
        assert_eq!(
            seam.pass(change(2, 3)),
            Some(change(2, 3)),
            "through: as it is"
        );
    }

    #[test]
    fn tool_calls_and_changes_are_dropped_by_seq_and_a_response_that_began_later_passes_whole() {
        let catch_up = CatchUp {
            last_seq: 9,
            response_seqs: vec![],
            live: None,
        };
        let call = |seq| Update::ToolCall {
            session_id: session(),
            run_id: run(2),
            seq,
            call_id: format!("c{seq}"),
            name: "status".to_owned(),
            arguments: serde_json::json!({}),
        };
        let finished = Update::RunFinished {
            session_id: session(),
            run_id: run(1),
            status: "succeeded".to_owned(),
        };
        let mut seam = Seam::new(session(), &catch_up);
        let sent = seam.buffered(
            &catch_up,
            vec![
                change(8, 9),
                call(9),
                finished.clone(),
                delta(run(2), 0, "new"),
                call(10),
            ],
        );
        assert_eq!(sent, [finished, delta(run(2), 0, "new"), call(10)]);
    }
}
