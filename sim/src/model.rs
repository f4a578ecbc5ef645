//! The simulated world's model and its one verb of its own: the model's answer is a function of
//! the seed and of what the request holds (so a recovered turn asks and is answered the same
//! way), and `launch` is a verb that must never run twice for one call.

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

pub(crate) fn account() -> AccountId {
    AccountId::from_u128(0x51_7000)
}

/// A stable hash of the seed and some parts of a request.
fn mix(seed: u64, parts: &[&str]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    seed.hash(&mut hasher);
    for part in parts {
        part.hash(&mut hasher);
    }
    hasher.finish()
}

/// The newest user message that is not a per-turn block or a projection, and how many
/// responses came after it.
fn input_and_depth(request: &Request) -> (String, usize) {
    let messages: Vec<&Message> = request.messages.iter().map(|m| m.as_ref()).collect();
    let idx = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(user) if !user.text.starts_with('<')));
    let Some(idx) = idx else {
        return (String::new(), 0);
    };
    let Message::User(input) = messages[idx] else {
        return (String::new(), 0);
    };
    let depth = messages[idx..]
        .iter()
        .filter(|m| matches!(m, Message::Assistant(_)))
        .count();
    (input.text.clone(), depth)
}

/// The model: its answer is a function of the seed and of the request.
pub(crate) fn model(seed: u64) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let (input, depth) = input_and_depth(request);
        let session = request.session_id.clone().unwrap_or_default();
        let h = mix(seed, &[&session, &input, &depth.to_string()]);
        let text = |label: &str| ScriptedStep::Respond(text_response(&format!("{label} {h:x}")));
        if depth >= 3 || input.starts_with("sub task") && depth >= 1 {
            return text("answer");
        }
        // Call ids are unique per request, as a provider's are (and the same for a request
        // asked again after a crash).
        let id_base = mix(
            seed,
            &[
                &session,
                &request.messages.len().to_string(),
                &h.to_string(),
            ],
        );
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
                    .map(|idx| match (h >> (12 + idx * 3)) % 6 {
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
                        4 => call(idx, "launch", json!({"what": "probe"})),
                        _ => call(idx, "read", json!({"target": "~/memory/sim.md"})),
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
    })
}
