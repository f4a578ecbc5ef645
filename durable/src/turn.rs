//! The turn's state machine: given what the store holds, what to do next.
//!
//! Pure: the harness asks [`next_action`] after every commit and carries the action out. Since
//! the answer depends only on the store, a harness reopened after a crash picks up exactly where
//! the last commit left off: responses that were committed are not requested again, finished
//! calls are not repeated, and a call that was cut off is run again only if its tool is safe to
//! repeat.

use seed_providers::ToolCall;

use crate::record::{EntryBody, EntryId, Task, ToolTaskState, TurnDocument};
use crate::state::StoreState;

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Ask the model; this is the turn's `step`-th request.
    RequestModel { step: u32 },
    /// Run a call. `rerun`: it was cut off before, and its tool is safe to repeat.
    RunTool { call: ToolCall, rerun: bool },
    /// Answer a cut-off call of a tool that is not safe to repeat: with its effect when the
    /// tool finds the call took effect ([`crate::Tool::reconcile`]), else with an interrupted
    /// result.
    InterruptTool { call: ToolCall },
    /// A call that waits for a person's decision: run it once approved, answer it with the
    /// reason once denied, else the turn waits.
    AwaitDecision { call: ToolCall },
    /// The model answered, in this entry.
    Answered { entry_id: EntryId },
    /// A verb ended the turn after its batch of calls.
    EndTurn,
}

/// What the open turn `turn` needs next. `safe_to_repeat(tool name)` says which tools may run
/// again after being cut off.
pub fn next_action(
    state: &StoreState,
    turn: &TurnDocument,
    safe_to_repeat: impl Fn(&str) -> bool,
) -> Action {
    let turn_entries = turn_entries(state, turn);
    let mut n_responses = 0;
    let mut last_response = None;
    for entry in turn_entries.clone() {
        if let EntryBody::Assistant { message, .. } = &entry.body {
            n_responses += 1;
            last_response = Some((entry.id, message));
        }
    }
    let Some((response_entry_id, response)) = last_response else {
        return Action::RequestModel { step: 0 };
    };
    if !response.is_complete() {
        // A response that failed: the same run asks again.
        return Action::RequestModel { step: n_responses };
    }
    let calls = response.tool_calls();
    if calls.is_empty() {
        return Action::Answered {
            entry_id: response_entry_id,
        };
    }
    let mut ends_turn = false;
    for call in calls {
        let result = turn_entries.clone().find_map(|entry| match &entry.body {
            EntryBody::ToolResult {
                message, ends_turn, ..
            } if entry.id > response_entry_id && message.tool_call_id == call.id => {
                Some(*ends_turn)
            }
            _ => None,
        });
        match result {
            Some(this_ends_turn) => ends_turn |= this_ends_turn,
            None => {
                let task = state.task(&format!("tool:{}", call.id));
                let task_state = match task {
                    Some(Task::Tool { state, .. }) => Some(*state),
                    _ => None,
                };
                if task_state == Some(ToolTaskState::Awaiting) {
                    return Action::AwaitDecision { call: call.clone() };
                }
                let started = task_state == Some(ToolTaskState::Started);
                return if !started {
                    Action::RunTool {
                        call: call.clone(),
                        rerun: false,
                    }
                } else if safe_to_repeat(&call.name) {
                    Action::RunTool {
                        call: call.clone(),
                        rerun: true,
                    }
                } else {
                    Action::InterruptTool { call: call.clone() }
                };
            }
        }
    }
    if ends_turn {
        Action::EndTurn
    } else {
        Action::RequestModel { step: n_responses }
    }
}

/// The turn's own entries after its input. Entry ids are dense, so the turn starts at a known
/// index: the cost follows the turn, not the history.
fn turn_entries<'a>(
    state: &'a StoreState,
    turn: &'a TurnDocument,
) -> impl Iterator<Item = &'a crate::record::Entry> + Clone + 'a {
    let start = state
        .entry_index(turn.input_entry_id)
        .map_or(usize::MAX, |input_idx| input_idx + 1);
    state
        .entries
        .get(start..)
        .unwrap_or_default()
        .iter()
        .filter(|entry| entry.body.request_id() == Some(turn.request_id.as_str()))
}

/// The calls of the open turn `turn` that have no result yet, in order: what a different run
/// answers with "interrupted by a service restart".
pub fn calls_without_result(state: &StoreState, turn: &TurnDocument) -> Vec<ToolCall> {
    let mut open: Vec<ToolCall> = Vec::new();
    for entry in turn_entries(state, turn) {
        match &entry.body {
            EntryBody::Assistant { message, .. } if message.is_complete() => {
                open.extend(message.tool_calls().into_iter().cloned());
            }
            EntryBody::ToolResult { message, .. } => {
                open.retain(|call| call.id != message.tool_call_id);
            }
            _ => {}
        }
    }
    open
}

/// The calls of the open turn `turn` that have not ended it: those without a result, and those
/// whose result does not end the turn (an error, or the interrupted result of a call cut off by
/// a crash). A run adopting its turn asks which of these took effect before the crash.
pub fn calls_not_ending_turn(state: &StoreState, turn: &TurnDocument) -> Vec<ToolCall> {
    let mut open: Vec<ToolCall> = Vec::new();
    for entry in turn_entries(state, turn) {
        match &entry.body {
            EntryBody::Assistant { message, .. } if message.is_complete() => {
                open.extend(message.tool_calls().into_iter().cloned());
            }
            EntryBody::ToolResult {
                message,
                ends_turn: true,
                ..
            } => {
                open.retain(|call| call.id != message.tool_call_id);
            }
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TurnState;
    use crate::state::Batch;
    use seed_providers::{ToolResultMessage, UserMessage, text_response, tool_response};

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: serde_json::json!({}),
        }
    }

    struct Turn {
        state: StoreState,
        turn: TurnDocument,
    }

    impl Turn {
        fn new() -> Turn {
            let mut state = StoreState::default();
            let mut batch = Batch::new(&state);
            let input_entry_id = batch.entry(EntryBody::User {
                request_id: "r".to_owned(),
                message: UserMessage::new("go".to_owned()),
            });
            state.apply(batch);
            Turn {
                state,
                turn: TurnDocument {
                    request_id: "r".to_owned(),
                    input_entry_id,
                    state: TurnState::Open,
                    answer_entry_id: None,
                    reason: None,
                },
            }
        }

        fn commit(&mut self, build: impl FnOnce(&mut Batch)) {
            let mut batch = Batch::new(&self.state);
            build(&mut batch);
            self.state.apply(batch);
        }

        fn respond(&mut self, message: seed_providers::AssistantMessage) {
            self.commit(|batch| {
                batch.entry(EntryBody::Assistant {
                    request_id: "r".to_owned(),
                    message,
                });
            });
        }

        fn started(&mut self, id: &str, name: &str) {
            self.commit(|batch| {
                batch.task(Task::Tool {
                    request_id: "r".to_owned(),
                    call_id: id.to_owned(),
                    name: name.to_owned(),
                    state: ToolTaskState::Started,
                })
            });
        }

        fn result(&mut self, id: &str, ends_turn: bool) {
            self.commit(|batch| {
                batch.entry(EntryBody::ToolResult {
                    request_id: "r".to_owned(),
                    message: ToolResultMessage {
                        tool_call_id: id.to_owned(),
                        tool_name: "t".to_owned(),
                        content: "ok".to_owned(),
                        is_error: false,
                        images: Vec::new(),
                    },
                    ends_turn,
                    placeholder: false,
                });
            });
        }

        fn next(&self) -> Action {
            next_action(&self.state, &self.turn, |name| name == "read")
        }
    }

    /// A call whose intent was committed as awaiting a decision waits for it, whether or not
    /// its tool is safe to repeat; once it moved to started, it is a cut-off call like any
    /// other.
    #[test]
    fn a_call_awaiting_a_decision_waits_for_it() {
        for name in ["read", "delete"] {
            let mut turn = Turn::new();
            turn.respond(tool_response("", vec![call("c1", name)]));
            turn.commit(|batch| {
                batch.task(Task::Tool {
                    request_id: "r".to_owned(),
                    call_id: "c1".to_owned(),
                    name: name.to_owned(),
                    state: ToolTaskState::Awaiting,
                })
            });
            assert_eq!(
                turn.next(),
                Action::AwaitDecision {
                    call: call("c1", name)
                },
                "{name}"
            );
        }
        let mut turn = Turn::new();
        turn.respond(tool_response("", vec![call("c1", "delete")]));
        turn.started("c1", "delete");
        assert_eq!(
            turn.next(),
            Action::InterruptTool {
                call: call("c1", "delete")
            }
        );
    }

    #[test]
    fn a_turn_walks_through_requests_calls_and_its_answer() {
        let mut turn = Turn::new();
        assert_eq!(turn.next(), Action::RequestModel { step: 0 });
        turn.respond(tool_response(
            "",
            vec![call("c1", "read"), call("c2", "memory")],
        ));
        assert_eq!(
            turn.next(),
            Action::RunTool {
                call: call("c1", "read"),
                rerun: false
            }
        );
        turn.started("c1", "read");
        // Cut off here: read is safe to repeat.
        assert_eq!(
            turn.next(),
            Action::RunTool {
                call: call("c1", "read"),
                rerun: true
            }
        );
        turn.result("c1", false);
        turn.started("c2", "memory");
        // Cut off here: memory is not.
        assert_eq!(
            turn.next(),
            Action::InterruptTool {
                call: call("c2", "memory")
            }
        );
        assert_eq!(
            calls_without_result(&turn.state, &turn.turn),
            [call("c2", "memory")]
        );
        turn.result("c2", false);
        assert_eq!(turn.next(), Action::RequestModel { step: 1 });
        turn.respond(text_response("done"));
        assert_eq!(turn.next(), Action::Answered { entry_id: 5 });
        assert!(calls_without_result(&turn.state, &turn.turn).is_empty());
    }

    #[test]
    fn a_verb_that_ends_the_turn_ends_it_after_its_batch() {
        let mut turn = Turn::new();
        turn.respond(tool_response(
            "",
            vec![call("c1", "continue_session"), call("c2", "read")],
        ));
        turn.result("c1", true);
        assert!(matches!(turn.next(), Action::RunTool { .. }));
        turn.result("c2", false);
        assert_eq!(turn.next(), Action::EndTurn);
    }

    #[test]
    fn calls_that_have_not_ended_the_turn_are_those_without_an_ending_result() {
        let mut turn = Turn::new();
        turn.respond(tool_response(
            "",
            vec![
                call("c1", "delegate"),
                call("c2", "delegate"),
                call("c3", "read"),
                call("c4", "continue_session"),
            ],
        ));
        turn.result("c1", true);
        // c2 answered as interrupted (a result that does not end the turn), c4 cut off.
        turn.result("c2", false);
        turn.result("c3", false);
        turn.started("c4", "continue_session");
        assert_eq!(
            calls_not_ending_turn(&turn.state, &turn.turn),
            [
                call("c2", "delegate"),
                call("c3", "read"),
                call("c4", "continue_session")
            ]
        );
        // Another turn's entries are not this turn's.
        let other = TurnDocument {
            request_id: "other".to_owned(),
            ..turn.turn.clone()
        };
        assert!(calls_not_ending_turn(&turn.state, &other).is_empty());
    }

    /// One thing the store came to hold, in a table row's history.
    #[derive(Clone, Copy)]
    enum Step {
        /// An answer with text and no calls.
        Answer,
        /// A response that failed (incomplete).
        Failed,
        /// A response calling `(id, tool)`s.
        Calls(&'static [(&'static str, &'static str)]),
        /// A call's intent committed: it started.
        Started(&'static str, &'static str),
        /// A call's result; `true` when its verb ends the turn.
        Result(&'static str, bool),
    }

    #[test]
    fn the_next_action_from_a_table_of_histories() {
        use Step::*;
        let run = |id: &str, tool: &str, rerun: bool| Action::RunTool {
            call: call(id, tool),
            rerun,
        };
        let interrupt = |id: &str, tool: &str| Action::InterruptTool {
            call: call(id, tool),
        };
        // `read` is safe to repeat; `memory` and `delegate` are not.
        let table: Vec<(&str, Vec<Step>, Action)> = vec![
            (
                "nothing yet: the first request",
                vec![],
                Action::RequestModel { step: 0 },
            ),
            (
                "a failed response is asked again",
                vec![Failed],
                Action::RequestModel { step: 1 },
            ),
            (
                "an answer after a failure",
                vec![Failed, Answer],
                Action::Answered { entry_id: 3 },
            ),
            (
                "an answer with no calls",
                vec![Answer],
                Action::Answered { entry_id: 2 },
            ),
            (
                "a call not started runs",
                vec![Calls(&[("c1", "memory")])],
                run("c1", "memory", false),
            ),
            (
                "a safe call cut off runs again",
                vec![Calls(&[("c1", "read")]), Started("c1", "read")],
                run("c1", "read", true),
            ),
            (
                "an unsafe call cut off is answered as interrupted",
                vec![Calls(&[("c1", "memory")]), Started("c1", "memory")],
                interrupt("c1", "memory"),
            ),
            (
                "calls run in order: the first without a result",
                vec![
                    Calls(&[("c1", "read"), ("c2", "memory")]),
                    Result("c1", false),
                ],
                run("c2", "memory", false),
            ),
            (
                "a later call answered first leaves the earlier one",
                vec![
                    Calls(&[("c1", "read"), ("c2", "memory")]),
                    Result("c2", false),
                ],
                run("c1", "read", false),
            ),
            (
                "every call answered: the next request",
                vec![
                    Calls(&[("c1", "read"), ("c2", "memory")]),
                    Result("c1", false),
                    Result("c2", false),
                ],
                Action::RequestModel { step: 1 },
            ),
            (
                "a verb that ends the turn ends it once its batch is answered",
                vec![
                    Calls(&[("c1", "delegate"), ("c2", "read")]),
                    Result("c1", true),
                    Result("c2", false),
                ],
                Action::EndTurn,
            ),
            (
                "an ending verb waits for the rest of its batch",
                vec![
                    Calls(&[("c1", "delegate"), ("c2", "read")]),
                    Result("c1", true),
                ],
                run("c2", "read", false),
            ),
            (
                "the step counts every response of the turn",
                vec![
                    Failed,
                    Calls(&[("c1", "read")]),
                    Result("c1", false),
                    Calls(&[("c2", "read")]),
                    Result("c2", false),
                ],
                Action::RequestModel { step: 3 },
            ),
            (
                "a result of an earlier response answers nothing of the newest",
                vec![
                    Calls(&[("c1", "read")]),
                    Result("c1", false),
                    Calls(&[("c1", "read")]),
                ],
                run("c1", "read", false),
            ),
        ];
        for (case, history, expected) in table {
            let mut turn = Turn::new();
            for step in history {
                match step {
                    Answer => turn.respond(text_response("done")),
                    Failed => {
                        let mut failed = text_response("");
                        failed.stop_reason = seed_providers::StopReason::Error;
                        failed.error_message = Some("boom".to_owned());
                        turn.respond(failed);
                    }
                    Calls(calls) => turn.respond(tool_response(
                        "",
                        calls.iter().map(|(id, tool)| call(id, tool)).collect(),
                    )),
                    Started(id, tool) => turn.started(id, tool),
                    Result(id, ends_turn) => turn.result(id, ends_turn),
                }
            }
            let next = next_action(&turn.state, &turn.turn, |name| name == "read");
            assert_eq!(next, expected, "{case}");
        }
    }
}
