//! The model `seed serve` runs with: the scripted model until a provider is configured (it
//! answers "You said: …", names the session with the status verb when a message starts with
//! `title:`, and continues into a successor session when one starts with `continue:`), and a
//! wrapper that measures any provider for `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use seed_providers::{
    Message, Provider, Request, ScriptedProvider, ScriptedStep, StreamEvent, ToolCall,
    text_response, tool_response,
};

/// The newest message a person wrote (the per-turn blocks behind it start with `<`), and
/// whether the model has answered anything since.
fn newest_input(request: &Request) -> (String, bool) {
    let position = request.messages.iter().rposition(
        |message| matches!(message.as_ref(), Message::User(user) if !user.text.starts_with('<')),
    );
    let Some(position) = position else {
        return (String::new(), false);
    };
    let Message::User(user) = request.messages[position].as_ref() else {
        return (String::new(), false);
    };
    let answered = request.messages[position..]
        .iter()
        .any(|message| matches!(message.as_ref(), Message::Assistant(_)));
    (user.text.clone(), answered)
}

/// The scripted model of a service with no provider configured. `delta_delay` slows its
/// streaming (for tests that cut a turn off mid-way).
pub fn scripted(delta_delay: Option<Duration>) -> ScriptedProvider {
    let provider = ScriptedProvider::from_fn(|request: &Request, _| {
        let (input, answered) = newest_input(request);
        let prompt_chars: usize = request
            .messages
            .iter()
            .map(|message| match message.as_ref() {
                Message::User(user) => user.text.len(),
                Message::Assistant(assistant) => assistant.text().len(),
                Message::ToolResult(result) => result.content.len(),
            })
            .sum::<usize>()
            + request.system_prompt.len();
        let in_successor = request.messages.iter().any(|message| {
            matches!(message.as_ref(), Message::User(user) if user.text.starts_with("<continuation"))
        });
        let continue_topic = input.strip_prefix("continue:").map(str::trim);
        let mut message = match input.strip_prefix("title:") {
            _ if !answered && !in_successor && continue_topic.is_some() => {
                let topic = continue_topic.unwrap_or_default();
                tool_response(
                    "",
                    vec![ToolCall {
                        id: format!("call-{}", request.messages.len()),
                        name: "continue_session".to_owned(),
                        arguments: serde_json::json!({
                            "reason": "user request",
                            "title": if topic.is_empty() { "Continued" } else { topic },
                            "description": "continued at the user's request",
                            "handoff": {
                                "purpose": format!("Carry on with: {topic}"),
                                "currentRequest": input,
                            },
                        }),
                    }],
                )
            }
            Some(title) if !answered => tool_response(
                "",
                vec![ToolCall {
                    id: format!("call-{}", request.messages.len()),
                    name: "status".to_owned(),
                    arguments: serde_json::json!({
                        "title": title.trim(),
                        "description": "named at the user's request",
                    }),
                }],
            ),
            _ => text_response(&format!("You said: {input}")),
        };
        // About four characters a token, for the context meter.
        message.usage.input = (prompt_chars / 4) as u64;
        message.usage.output = (message.text().len() / 4) as u64;
        ScriptedStep::Respond(message)
    })
    .without_recording();
    match delta_delay {
        Some(delay) => provider.with_delta_delay(delay),
        None => provider,
    }
}

/// A provider measured for `/metrics`: response latency and errors by kind.
pub struct Metered {
    pub inner: Arc<dyn Provider>,
}

impl std::fmt::Debug for Metered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered").finish_non_exhaustive()
    }
}

impl Provider for Metered {
    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let started = Instant::now();
        self.inner
            .stream(request)
            .inspect(move |event| match event {
                StreamEvent::Done(_) => {
                    metrics::histogram!("seed_provider_response_seconds")
                        .record(started.elapsed().as_secs_f64());
                }
                StreamEvent::Error(error) => {
                    metrics::counter!("seed_provider_errors_total", "kind" => error.kind.to_string())
                        .increment(1);
                }
                _ => {}
            })
            .boxed()
    }
}
