//! A model and arguments for continuation tests: asked to continue, the model calls
//! continue_session; in a successor (whose context holds a projection) it answers.

use std::sync::{Arc, Mutex};

use seed_providers::{Message, Request, ScriptedProvider, ScriptedStep, ToolCall};
use seed_providers::{text_response, tool_response};
use serde_json::{Value, json};

pub const CONTINUE: &str = "please continue";
pub const CALL_ID: &str = "cont-1";

/// Valid arguments, citing seqs 1–2 of session 0.
pub fn good_arguments() -> Value {
    json!({
        "reason": "topic change",
        "title": "Lisbon hotels",
        "description": "Comparing three hotels",
        "handoff": {
            "purpose": "Book a hotel in Lisbon for May",
            "currentRequest": "The user wants to continue with the hotels",
            "decisions": ["Stay near Baixa", "Budget €150/night"],
            "riskRegister": "Prices rise in June"
        },
        "sources": [{ "type": "session_events", "fromSeq": 1, "toSeq": 2 }],
    })
}

pub fn is_projection(message: &Message) -> bool {
    matches!(message, Message::User(user) if user.text.starts_with("<continuation"))
}

/// The newest user message that is neither a per-turn block nor the projection.
pub fn input_of(request: &Request) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|message| match message.as_ref() {
            Message::User(user) if !user.text.starts_with('<') => Some(user.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The model: in a successor (its context holds a projection) it answers; asked to continue,
/// it calls continue_session with `arguments` (once: a refusal is then answered in text);
/// given "memory: <note>", it writes the note to ~/memory/notes.md (a verb not safe to
/// repeat) and says "noted"; anything else it answers.
pub fn model(arguments: Arc<Mutex<Value>>) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |request: &Request, _| {
        let input = input_of(request);
        if request.messages.iter().any(|m| is_projection(m)) {
            return ScriptedStep::Respond(text_response(&format!("successor answers: {input}")));
        }
        if let Some(note) = input.strip_prefix("memory: ") {
            let wrote = request.messages.iter().any(|m| {
                matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "memory")
            });
            return ScriptedStep::Respond(if wrote {
                text_response("noted")
            } else {
                tool_response(
                    "",
                    vec![ToolCall {
                        id: "memory-1".to_owned(),
                        name: "memory".to_owned(),
                        arguments: json!({
                            "action": "write",
                            "path": "~/memory/notes.md",
                            "content": note,
                        }),
                    }],
                )
            });
        }
        if input != CONTINUE {
            return ScriptedStep::Respond(text_response(&format!("answer: {input}")));
        }
        let called = request.messages.iter().any(|m| {
            matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "continue_session")
        });
        if called {
            ScriptedStep::Respond(text_response(
                "the continuation was refused; answering here",
            ))
        } else {
            let arguments = arguments.lock().expect("arguments").clone();
            ScriptedStep::Respond(tool_response(
                "",
                vec![ToolCall {
                    id: CALL_ID.to_owned(),
                    name: "continue_session".to_owned(),
                    arguments,
                }],
            ))
        }
    })
}
