//! The simulated world's model and its verbs of its own: the model's answer is a function of
//! the seed and of what the request holds (so a recovered turn asks and is answered the same
//! way); `launch` is a verb that must never run twice for one call, and `mcp_lookup` and
//! `mcp_order` are classed as an MCP server's tools are, from their annotations (read-only: safe
//! to repeat; no hints: not), the order never run twice for one call either; `mcp_delete` is
//! destructive, so its calls wait for a person's approval.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use seed_actors::{Verb, VerbContext, VerbOutput};
use seed_events::{AccountId, SessionId};
use seed_providers::{
    Message, Request, ScriptedProvider, ScriptedStep, ToolCall, text_response, tool_response,
};
use serde_json::{Value, json};

/// A verb of the user's own for the simulated model to call. Each run makes its own instance
/// (so that what the verb keeps starts afresh, and a replayed or shrunk run is the same run),
/// with, optionally, the verb's own invariant over what that instance did, checked with the
/// simulation's after every step and at the end. The model calls it with arguments made from
/// a seeded number, so that a seed replays the same calls; arguments that break the verb's
/// schema now and then are welcome: the verb must refuse them cleanly.
#[derive(Clone)]
pub struct SimVerb {
    pub make: Arc<dyn Fn() -> VerbUnderTest + Send + Sync>,
    pub arguments: Arc<dyn Fn(u64) -> Value + Send + Sync>,
}

/// A user verb's own invariant: what it returns are violations.
pub type Invariant = Box<dyn Fn() -> Vec<String> + Send + Sync>;

/// What sees each model request with its answer.
pub(crate) type Observer = Arc<dyn Fn(&Request, &ScriptedStep) + Send + Sync>;

/// One run's instance of a user's verb, and its invariant.
pub struct VerbUnderTest {
    pub verb: Arc<dyn Verb>,
    pub invariant: Option<Invariant>,
}

impl std::fmt::Debug for VerbUnderTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbUnderTest")
            .field("verb", &self.verb.name())
            .field("invariant", &self.invariant.is_some())
            .finish()
    }
}

impl SimVerb {
    pub fn new(
        make: impl Fn() -> VerbUnderTest + Send + Sync + 'static,
        arguments: impl Fn(u64) -> Value + Send + Sync + 'static,
    ) -> Self {
        SimVerb {
            make: Arc::new(make),
            arguments: Arc::new(arguments),
        }
    }
}

/// A run's user verbs: each instance with its arguments.
pub(crate) struct RunVerb {
    pub(crate) verb: Arc<dyn Verb>,
    pub(crate) invariant: Option<Invariant>,
    pub(crate) arguments: Arc<dyn Fn(u64) -> Value + Send + Sync>,
}

impl RunVerb {
    pub(crate) fn make(sim_verb: &SimVerb) -> RunVerb {
        let VerbUnderTest { verb, invariant } = (sim_verb.make)();
        RunVerb {
            verb,
            invariant,
            arguments: Arc::clone(&sim_verb.arguments),
        }
    }
}

impl std::fmt::Debug for SimVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimVerb").finish_non_exhaustive()
    }
}

/// A user's verb as the simulation registers it: its calls are counted (for the report), and
/// when it is not safe to repeat, every execution is counted per call, so that the invariants
/// check none ran twice.
pub(crate) struct Counted {
    pub(crate) inner: Arc<dyn Verb>,
    pub(crate) runs: Arc<Mutex<HashMap<(SessionId, String), usize>>>,
    pub(crate) calls: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl Verb for Counted {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn turn_effect(&self) -> seed_actors::TurnEffect {
        self.inner.turn_effect()
    }
    fn source(&self) -> Option<&str> {
        self.inner.source()
    }
    fn reconcile(
        &self,
        context: VerbContext,
        arguments: Value,
    ) -> BoxFuture<'static, Option<VerbOutput>> {
        self.inner.reconcile(context, arguments)
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    fn safe_to_repeat(&self) -> bool {
        self.inner.safe_to_repeat()
    }
    fn ends_turn(&self) -> bool {
        self.inner.ends_turn()
    }
    fn availability(&self) -> seed_actors::Availability {
        self.inner.availability()
    }
    fn call(&self, context: VerbContext, arguments: Value) -> BoxFuture<'static, VerbOutput> {
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(self.inner.name().to_owned()).or_default() += 1;
        }
        if !self.inner.safe_to_repeat()
            && let Ok(mut runs) = self.runs.lock()
        {
            *runs
                .entry((context.session_id, context.tool_call_id.clone()))
                .or_default() += 1;
        }
        self.inner.call(context, arguments)
    }
}

/// A verb that must never run twice for one call: it records every execution.
pub(crate) struct Launch {
    pub(crate) runs: Arc<Mutex<HashMap<(SessionId, String), usize>>>,
}

impl Verb for Launch {
    fn name(&self) -> &'static str {
        "launch"
    }
    fn description(&self) -> &'static str {
        "Launches something in the world. Not safe to repeat."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"what": {"type": "string"}}})
    }
    fn safe_to_repeat(&self) -> bool {
        false
    }
    fn call(&self, context: VerbContext, _: Value) -> BoxFuture<'static, VerbOutput> {
        if let Ok(mut runs) = self.runs.lock() {
            *runs
                .entry((context.session_id, context.tool_call_id.clone()))
                .or_default() += 1;
        }
        Box::pin(async { VerbOutput::ok("launched") })
    }
}

/// A verb classed as an MCP server's tool is: safe to repeat only as its annotations say
/// (`seed_mcp::ToolHints::safe_to_repeat`, the rule the MCP adapter applies). Every execution
/// of one that is not safe is recorded, for the invariant that none ran twice for one call.
pub(crate) struct McpClassed {
    pub(crate) name: &'static str,
    pub(crate) hints: seed_mcp::ToolHints,
    pub(crate) runs: Arc<Mutex<HashMap<(SessionId, String), usize>>>,
}

impl McpClassed {
    /// The simulation's three: a read-only lookup, an order with no hints, and a destructive
    /// delete, whose calls wait for a person's approval.
    pub(crate) fn all(runs: &Arc<Mutex<HashMap<(SessionId, String), usize>>>) -> [McpClassed; 3] {
        [
            McpClassed {
                name: "mcp_lookup",
                hints: seed_mcp::ToolHints {
                    read_only: Some(true),
                    ..Default::default()
                },
                runs: Arc::clone(runs),
            },
            McpClassed {
                name: "mcp_order",
                hints: seed_mcp::ToolHints::default(),
                runs: Arc::clone(runs),
            },
            McpClassed {
                name: "mcp_delete",
                hints: seed_mcp::ToolHints {
                    destructive: Some(true),
                    ..Default::default()
                },
                runs: Arc::clone(runs),
            },
        ]
    }
}

impl Verb for McpClassed {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A tool classed by its MCP annotations."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]})
    }
    fn safe_to_repeat(&self) -> bool {
        self.hints.safe_to_repeat()
    }
    fn needs_approval(&self) -> bool {
        self.hints.needs_approval()
    }
    fn source(&self) -> Option<&str> {
        Some("sim")
    }
    fn call(&self, context: VerbContext, _: Value) -> BoxFuture<'static, VerbOutput> {
        if !self.safe_to_repeat()
            && let Ok(mut runs) = self.runs.lock()
        {
            *runs
                .entry((context.session_id, context.tool_call_id.clone()))
                .or_default() += 1;
        }
        let name = self.name;
        Box::pin(async move { VerbOutput::ok(format!("{name} done")) })
    }
}

pub(crate) fn account() -> AccountId {
    AccountId::from_u128(0x51_7000)
}

/// A stable hash of the seed and some parts of a request.
pub(crate) fn mix(seed: u64, parts: &[&str]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut hasher);
    for part in parts {
        part.hash(&mut hasher);
    }
    hasher.finish()
}

/// The newest user message that is not a per-turn block or a projection, and how many
/// responses came after it. A conversation with no such message (a successor whose copied
/// input was a wake-up's block) has no input, and every response in it counts: the depth still
/// grows with each step of a turn, so the model answers within a few steps, as it does
/// everywhere else, rather than calling the same tools for ever.
fn input_and_depth(request: &Request) -> (String, usize) {
    let messages: Vec<&Message> = request.messages.iter().map(|m| m.as_ref()).collect();
    let idx = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(user) if !user.text.starts_with('<')));
    let (input, since) = match idx.map(|idx| (messages[idx], idx)) {
        Some((Message::User(input), idx)) => (input.text.clone(), idx),
        _ => (String::new(), 0),
    };
    let depth = messages[since..]
        .iter()
        .filter(|m| matches!(m, Message::Assistant(_)))
        .count();
    (input, depth)
}

/// The model: its answer is a function of the seed and of the request. `extra` are verbs of the
/// user's own that it calls too; `observe` sees every request with its answer.
pub(crate) fn model(seed: u64, extra: Arc<[RunVerb]>, observe: Observer) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let answer = answer(seed, &extra, request);
        observe(request, &answer);
        answer
    })
}

fn answer(seed: u64, extra: &[RunVerb], request: &Request) -> ScriptedStep {
    {
        let (input, depth) = input_and_depth(request);
        let session = request.session_id.clone().unwrap_or_default();
        let h = mix(seed, &[&session, &input, &depth.to_string()]);
        let text = |label: &str| ScriptedStep::Respond(text_response(&format!("{label} {h:x}")));
        if depth >= 3 || input.starts_with("sub task") && depth >= 1 {
            return text("answer");
        }
        // Call ids are unique per request, as a provider's are (and the same for a request
        // asked again after a crash): they follow the whole conversation, so a later turn
        // whose input and depth repeat an earlier one's (a turn the disk refused, then asked
        // again after a rebuild) still gets ids of its own.
        let conversation: String = request
            .messages
            .iter()
            .filter(|message| !matches!(message.as_ref(), Message::User(user) if user.text.starts_with('<')))
            .map(|message| format!("{message:?}"))
            .collect();
        let id_base = mix(seed, &[&session, &conversation, &h.to_string()]);
        let call = |idx: u64, name: &str, arguments: Value| ToolCall {
            id: format!("c{:x}-{idx}", id_base & 0xffff_ffff_ffff),
            name: name.to_owned(),
            arguments,
        };
        match h % 100 {
            0..40 => text("answer"),
            40..62 => {
                let n = 1 + (h >> 8) % 4;
                let calls = (0..n)
                    .map(|idx| match (h >> (12 + idx * 3)) % (6 + extra.len() as u64) {
                        0 => call(
                            idx,
                            "read",
                            json!({"target": format!("thread:{session}"), "limit": 5}),
                        ),
                        1 => call(
                            idx,
                            "plan",
                            json!({"steps": [{"step": "look", "done": (h >> 20).is_multiple_of(2)}]}),
                        ),
                        2 => call(
                            idx,
                            "status",
                            json!({"title": "Sim", "description": format!("step {h:x}")}),
                        ),
                        3 => call(
                            idx,
                            "memory",
                            json!({"action": "append", "path": "~/memory/sim.md", "content": "x"}),
                        ),
                        // The verbs that must not run twice, and a read-only one, share a
                        // slot: launch, or a verb classed as an MCP tool is (the destructive
                        // one waits for a person's approval).
                        4 => match (h >> (40 + idx * 2)) % 4 {
                            0 => call(idx, "launch", json!({"what": "probe"})),
                            1 => call(idx, "mcp_lookup", json!({"item": "stock"})),
                            2 => call(idx, "mcp_order", json!({"item": "widget"})),
                            _ => call(idx, "mcp_delete", json!({"item": "old"})),
                        },
                        // A read, or a wake-up a few seconds of virtual time on.
                        5 if (h >> (44 + idx)).is_multiple_of(2) => call(
                            idx,
                            "schedule",
                            json!({"note": format!("wake {h:x}"), "delay_seconds": 1 + (h >> 30) % 4}),
                        ),
                        5 => call(idx, "read", json!({"target": "~/memory/sim.md"})),
                        user => {
                            let verb = &extra[(user - 6) as usize];
                            call(
                                idx,
                                verb.verb.name(),
                                (verb.arguments)(mix(h, &[&idx.to_string()])),
                            )
                        }
                    })
                    .collect();
                ScriptedStep::Respond(tool_response("", calls))
            }
            62..70 if depth == 0 => ScriptedStep::Respond(tool_response(
                "",
                vec![call(
                    0,
                    "delegate",
                    json!({"task": format!("sub task {h:x}"), "typed": h.is_multiple_of(2)}),
                )],
            )),
            70..80 if depth == 0 => {
                let from = 1 + (h >> 16) % 4;
                let arguments = json!({
                    "reason": "topic change",
                    "title": format!("Sim part {h:x}"),
                    "handoff": {
                        "purpose": "Go on with the simulation",
                        "currentRequest": input,
                        "sources": [{"type": "session_events", "fromSeq": from, "toSeq": from + (h >> 24) % 3}],
                        "description": "continued",
                        "scratch": ["kept as an extra section"]
                    }
                });
                ScriptedStep::Respond(tool_response(
                    "",
                    vec![call(0, "continue_session", arguments)],
                ))
            }
            80..86 => ScriptedStep::Respond(tool_response(
                "",
                vec![call(0, "plan", json!({"steps": "not a list"}))],
            )),
            86..92 => ScriptedStep::FailAfter {
                text: "partial".to_owned(),
                error: seed_providers::ProviderError::new(
                    seed_providers::ProviderErrorKind::Transport,
                    "the simulated network broke",
                ),
            },
            _ => text("answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_providers::UserMessage;

    fn request(session: &str, messages: &[Message]) -> Request {
        Request {
            model: "sim".to_owned(),
            reasoning: None,
            system_prompt: String::new(),
            messages: messages.iter().cloned().map(Arc::new).collect(),
            tools: Arc::from(Vec::new()),
            session_id: Some(session.to_owned()),
        }
    }

    /// A successor continued from a wake-up's turn starts with two blocks and no plain input
    /// (its copied input is the wake-up's): each turn still ends within a few steps, whatever
    /// the session. With the depth stuck at 0 there, a session whose first answer calls tools
    /// called them again at every step, and its turn never ended (seed 2182 of a soak).
    #[test]
    fn a_turn_with_no_plain_input_ends_within_a_few_steps() {
        for idx in 0..40 {
            let session = format!("successor {idx}");
            let mut messages = vec![
                Message::User(UserMessage::new(
                    "<continuation from=\"p\">handoff</continuation>",
                )),
                Message::User(UserMessage::new(
                    "<scheduled_wakeup>note</scheduled_wakeup>",
                )),
            ];
            let mut steps = 0;
            loop {
                steps += 1;
                assert!(steps <= 4, "session {session}: no answer after 4 steps");
                match answer(7, &[], &request(&session, &messages)) {
                    ScriptedStep::Respond(response) if !response.tool_calls().is_empty() => {
                        messages.push(Message::Assistant(response));
                    }
                    _ => break,
                }
            }
        }
    }

    #[test]
    fn the_depth_counts_the_responses_since_the_newest_plain_input() {
        let call = ToolCall {
            id: "c".to_owned(),
            name: "read".to_owned(),
            arguments: json!({}),
        };
        let response = Message::Assistant(tool_response("", vec![call]));
        let messages = [
            Message::User(UserMessage::new("first")),
            response.clone(),
            Message::User(UserMessage::new("second")),
            response.clone(),
            Message::User(UserMessage::new("<plan_state>look</plan_state>")),
            response.clone(),
        ];
        assert_eq!(
            input_and_depth(&request("s", &messages)),
            ("second".to_owned(), 2)
        );
        let blocks_only = [
            Message::User(UserMessage::new(
                "<scheduled_wakeup>note</scheduled_wakeup>",
            )),
            response.clone(),
            response,
        ];
        assert_eq!(
            input_and_depth(&request("s", &blocks_only)),
            (String::new(), 2)
        );
    }
}
