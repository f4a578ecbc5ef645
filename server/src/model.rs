//! The model `seed serve` runs with: the scripted model until a provider is configured, and a
//! wrapper that measures any provider for `/metrics`.
//!
//! The scripted model answers "You said: …", naming the files that came with the message
//! (` [attached: notes.txt “its first line”; dot.png (image/png, 68 bytes)]`). A message
//! starting with `title:` makes it name the session with the status verb; one starting with `continue:` makes it continue into a
//! successor session (the rest of the line is the successor's title; the successor answers the
//! copied message, and a later `continue:` there continues again). Directives anywhere in a
//! message shape the answer, for demos and the UI tests, and are left out of what it echoes:
//!
//! - `[usage N%]` — the answer reports a prompt of N% of the session model's context window
//!   (the figure the context meter draws);
//! - `[slow N]` — the answer streams with N milliseconds between deltas (at most 2000);
//! - `[refuse]` — with `continue:`, the call cites a seq range past the end of the log, so the
//!   runtime refuses it and nothing is created;
//! - `[steps N]` — the turn takes N steps: N − 1 responses that each say which step it is and
//!   call the status verb (its description "step k of N"), then the answer (at most 20);
//! - `[fail]` — the response fails (a provider error, so the run fails) when the message is
//!   its run's input (with `continue:`, in the successor, which answers it); a retry, whose
//!   input is a background update behind the message, is answered;
//! - `[no usage]` — the answer reports no usage, as many local servers do (the runtime
//!   estimates it);
//! - `[cut off]` — the answer stops at the output token limit (`stop_reason: length`), its
//!   text ending mid-sentence.
//!
//! Lines `call: VERB {json}` make the turn call each verb in order, then answer with what the
//! tools said ([`calls`]).

pub mod calls;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt;
use futures::stream::BoxStream;
use seed_providers::{
    Message, Provider, ProviderError, ProviderErrorKind, Request, ScriptedProvider, ScriptedStep,
    StreamEvent, ToolCall, UserPart, text_response, tool_response,
};

/// The longest `[slow N]` pause between two deltas.
const SLOW_DELAY_MS_MAX: u64 = 2000;
/// The most steps `[steps N]` asks of a turn.
const STEPS_MAX: u32 = 20;

/// What a message's directives ask of the scripted model.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Directives {
    /// `[usage N%]`: the prompt to report, in percent of the context window.
    pub usage_percent: Option<u64>,
    /// `[slow N]`: milliseconds between deltas.
    pub slow_ms: Option<u64>,
    /// `[refuse]`: a continuation the runtime refuses.
    pub refuse: bool,
    /// `[steps N]`: the responses the turn takes, the answer included.
    pub steps: Option<u32>,
    /// `[fail]`: the response fails when the message is its run's input.
    pub fail: bool,
    /// `[no usage]`: the answer reports no usage.
    pub no_usage: bool,
    /// `[cut off]`: the answer stops at the output token limit.
    pub cut_off: bool,
}

/// The directives in `text`, and the text without them (its spaces collapsed where directives
/// were taken out; unchanged when there were none). A bracket that is not a directive stays.
pub fn parse_directives(text: &str) -> (Directives, String) {
    let mut directives = Directives::default();
    let mut rest = String::with_capacity(text.len());
    let mut remaining = text;
    while let Some(open) = remaining.find('[') {
        rest.push_str(&remaining[..open]);
        let after = &remaining[open + 1..];
        let Some(close) = after.find(']') else {
            rest.push_str(&remaining[open..]);
            remaining = "";
            break;
        };
        let inner = after[..close].trim();
        let mut words = inner.split_whitespace();
        let known = match (words.next(), words.next(), words.next()) {
            (Some("usage"), Some(value), None) => value
                .strip_suffix('%')
                .and_then(|percent| percent.parse::<u64>().ok())
                .map(|percent| directives.usage_percent = Some(percent.min(1000)))
                .is_some(),
            (Some("slow"), Some(value), None) => value
                .trim_end_matches("ms")
                .parse::<u64>()
                .ok()
                .map(|ms| directives.slow_ms = Some(ms.min(SLOW_DELAY_MS_MAX)))
                .is_some(),
            (Some("refuse"), None, None) => {
                directives.refuse = true;
                true
            }
            (Some("fail"), None, None) => {
                directives.fail = true;
                true
            }
            (Some("no"), Some("usage"), None) => {
                directives.no_usage = true;
                true
            }
            (Some("cut"), Some("off"), None) => {
                directives.cut_off = true;
                true
            }
            (Some("steps"), Some(value), None) => value
                .parse::<u32>()
                .ok()
                .filter(|steps| *steps >= 1)
                .map(|steps| directives.steps = Some(steps.min(STEPS_MAX)))
                .is_some(),
            _ => false,
        };
        if !known {
            rest.push_str(&remaining[open..open + 1 + close + 1]);
        }
        remaining = &after[close + 1..];
    }
    rest.push_str(remaining);
    if directives == Directives::default() {
        // No directive: the text as it was, to the last space.
        return (directives, text.to_owned());
    }
    let rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    (directives, rest)
}

/// Whether `message` is a turn's input: one a person wrote, or a wake-up's notice (the
/// per-turn blocks start with `<` too).
fn is_input(message: &Message) -> bool {
    matches!(message, Message::User(user)
        if !user.text.starts_with('<') || user.text.starts_with("<scheduled_wakeup"))
}

/// What the scripted model says it received with the message at `position`:
/// ` [attached: notes.txt “its first line”; dot.png (image/png, 68 bytes); a.pdf (not shown)]`,
/// or nothing when the message carries no files.
fn attachments_echo(request: &Request, position: usize) -> String {
    let Some(Message::User(user)) = request
        .messages
        .get(position)
        .map(|message| message.as_ref())
    else {
        return String::new();
    };
    let mut seen = Vec::new();
    let mut parts = user.parts.iter().peekable();
    while let Some(part) = parts.next() {
        let UserPart::Text { text } = part else {
            continue;
        };
        let Some(name) = text
            .strip_prefix("attachment:")
            .and_then(|rest| rest.split_once(" ("))
            .and_then(|(_, rest)| rest.split_once(", "))
            .map(|(name, _)| name)
        else {
            continue;
        };
        let what = if let Some(UserPart::Image { media_type, data }) =
            parts.next_if(|part| matches!(part, UserPart::Image { .. }))
        {
            let n_bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_or(0, |bytes| bytes.len());
            format!(" ({media_type}, {n_bytes} bytes)")
        } else if let Some((_, shown)) = text.split_once("\n<attachment_text>\n") {
            let first_line = shown.lines().next().unwrap_or_default();
            format!(
                " \u{201c}{}\u{201d}",
                first_line.chars().take(40).collect::<String>()
            )
        } else {
            " (not shown)".to_owned()
        };
        seen.push(format!("{name}{what}"));
    }
    if seen.is_empty() {
        return String::new();
    }
    format!(" [attached: {}]", seen.join("; "))
}

/// How many responses the model gave since the message at `position`.
fn responses_since(request: &Request, position: usize) -> u32 {
    let n = request.messages[position.min(request.messages.len())..]
        .iter()
        .filter(|message| matches!(message.as_ref(), Message::Assistant(_)))
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The newest message a person wrote, whether the model has answered anything since, and
/// where it sits in the request (`request.messages.len()` when there is none).
fn newest_input(request: &Request) -> (String, bool, usize) {
    let newest = request
        .messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(position, message)| match message.as_ref() {
            Message::User(user) if is_input(message) => Some((position, user)),
            _ => None,
        });
    let Some((position, user)) = newest else {
        return (String::new(), false, request.messages.len());
    };
    let answered = request.messages[position..]
        .iter()
        .any(|message| matches!(message.as_ref(), Message::Assistant(_)));
    (user.text.clone(), answered, position)
}

/// How many log events came before the message at `position`: a message each (but for a
/// response that only called tools), plus an event per tool call; the per-turn blocks are not
/// in the log. It walks the whole conversation,
/// so only a continuation, which cites them, asks.
fn events_before(request: &Request, position: usize) -> i64 {
    request.messages[..position]
        .iter()
        .map(|message| match message.as_ref() {
            // A response that only calls tools is its calls alone in the log.
            Message::Assistant(assistant) => {
                let n_calls = assistant.tool_calls().len() as i64;
                let says_something = assistant.text_len() > 0 || n_calls == 0;
                i64::from(says_something) + n_calls
            }
            Message::ToolResult(_) => 1,
            user => i64::from(is_input(user)),
        })
        .sum()
}

/// The continue_session call the scripted model makes for `continue: topic`: a handoff with
/// several sections, a resource, and (when events came before the message) the last four of
/// them as an excerpt. With `refuse` it cites a range past the log's end.
fn continue_call(
    call_id: String,
    topic: &str,
    input: &str,
    events_before: i64,
    refuse: bool,
) -> ToolCall {
    let title = if topic.is_empty() { "Continued" } else { topic };
    let slug: String = title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut sources = vec![serde_json::json!({
        "type": "resource",
        "uri": format!("https://example.org/notes/{slug}"),
    })];
    if refuse {
        sources
            .push(serde_json::json!({"type": "session_events", "fromSeq": 1, "toSeq": 1_000_000}));
    } else if events_before > 0 {
        sources.push(serde_json::json!({
            "type": "session_events",
            "fromSeq": (events_before - 3).max(1),
            "toSeq": events_before,
        }));
    }
    ToolCall {
        id: call_id,
        name: "continue_session".to_owned(),
        arguments: serde_json::json!({
            "reason": "user request",
            "title": title,
            "description": "continued at the user's request",
            "handoff": {
                "purpose": format!("Carry on with: {title}"),
                "currentRequest": input,
                "establishedFacts": ["The earlier conversation stays in the predecessor, word for word."],
                "nextActions": ["Answer the user's message.", "Cite the predecessor with read thread:<id> when exact wording matters."],
            },
            "sources": sources,
        }),
    }
}

/// The scripted model of a service with no provider configured. `delta_delay` slows all its
/// streaming (for tests that cut a turn off mid-way); `context_window` gives a model's window,
/// for `[usage N%]`.
pub fn scripted(
    delta_delay: Option<Duration>,
    context_window: impl Fn(&str) -> Option<u64> + Send + Sync + 'static,
) -> Scripted {
    let provider = ScriptedProvider::from_fn(move |request: &Request, _| {
        let (raw_input, answered, position) = newest_input(request);
        let (directives, input) = parse_directives(&raw_input);
        let prompt_chars: usize = request
            .messages
            .iter()
            .map(|message| match message.as_ref() {
                Message::User(user) => user.text.len(),
                Message::Assistant(assistant) => assistant.text_len(),
                Message::ToolResult(result) => result.content.len(),
            })
            .sum::<usize>()
            + request.system_prompt.len();
        // Whether the input is the message a successor was made to answer (the first input
        // after its projection): that one is answered, while a later `continue:` in a successor
        // continues again. Walks the whole conversation: asked only of a `continue:` message.
        let answering_copy = || {
            let Some(projection) = request.messages.iter().position(|message| {
                matches!(message.as_ref(), Message::User(user) if user.text.starts_with("<continuation"))
            }) else {
                return false;
            };
            request.messages[projection + 1..]
                .iter()
                .position(|message| is_input(message))
                .is_some_and(|copied| projection + 1 + copied == position)
        };
        let call_id = format!("call-{}", request.messages.len());
        let continue_topic = input.strip_prefix("continue:").map(str::trim);
        let step = responses_since(request, position) + 1;
        // A retry asks with a background update behind the message (its run's input).
        let retried = || {
            request.messages[position..].iter().any(|message| {
                matches!(message.as_ref(), Message::User(user) if user.text == "<background_work_update>")
            })
        };
        if directives.fail
            && !answered
            && !retried()
            && (continue_topic.is_none() || answering_copy())
        {
            return ScriptedStep::FailAfter {
                text: String::new(),
                error: ProviderError::new(
                    ProviderErrorKind::Http { status: 500 },
                    "the scripted model fails this message, as [fail] asks",
                ),
            };
        }
        let calls = calls::call_lines(&input);
        let mut message = match input.strip_prefix("title:") {
            _ if !calls.is_empty() => match calls::call_at(&calls, step, call_id) {
                Some(call) => tool_response("", vec![call]),
                None => text_response(&calls::answer(request, position)),
            },
            _ if directives.steps.is_some_and(|steps| step < steps) => {
                let steps = directives.steps.unwrap_or(1);
                tool_response(
                    &format!("Step {step} of {steps}."),
                    vec![ToolCall {
                        id: call_id,
                        name: "status".to_owned(),
                        arguments: serde_json::json!({
                            "description": format!("step {step} of {steps}"),
                        }),
                    }],
                )
            }
            _ if !answered && continue_topic.is_some() && !answering_copy() => tool_response(
                "",
                vec![continue_call(
                    call_id,
                    continue_topic.unwrap_or_default(),
                    &input,
                    events_before(request, position),
                    directives.refuse,
                )],
            ),
            Some(title) if !answered => tool_response(
                "",
                vec![ToolCall {
                    id: call_id,
                    name: "status".to_owned(),
                    arguments: serde_json::json!({
                        "title": title.trim(),
                        "description": "named at the user's request",
                    }),
                }],
            ),
            _ if directives.cut_off => {
                let mut message = text_response(&format!("You said: {input}, and then"));
                message.stop_reason = seed_providers::StopReason::Length;
                message
            }
            _ => text_response(&format!(
                "You said: {input}{}",
                attachments_echo(request, position)
            )),
        };
        if directives.no_usage {
            message.usage = seed_providers::Usage::default();
            return ScriptedStep::Respond(message);
        }
        // About four characters a token, for the context meter, unless a directive says.
        message.usage.input = match (directives.usage_percent, context_window(&request.model)) {
            (Some(percent), Some(window)) => window * percent / 100,
            _ => (prompt_chars / 4) as u64,
        };
        message.usage.output = (message.text().len() / 4) as u64;
        ScriptedStep::Respond(message)
    })
    .without_recording();
    let inner = match delta_delay {
        Some(delay) => provider.with_delta_delay(delay),
        None => provider,
    };
    Scripted { inner }
}

/// The scripted model, paced by `[slow N]`.
#[derive(Debug, Clone)]
pub struct Scripted {
    inner: ScriptedProvider,
}

impl Provider for Scripted {
    fn takes_images(&self, model: &str) -> bool {
        self.inner.takes_images(model)
    }

    fn stream(&self, request: Request) -> BoxStream<'static, StreamEvent> {
        let (input, _, _) = newest_input(&request);
        let slow_ms = parse_directives(&input).0.slow_ms.unwrap_or(0);
        let events = self.inner.stream(request);
        if slow_ms == 0 {
            return events;
        }
        let delay = Duration::from_millis(slow_ms);
        events
            .enumerate()
            .then(move |(event_idx, event)| async move {
                if event_idx > 0 {
                    tokio::time::sleep(delay).await;
                }
                event
            })
            .boxed()
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
    fn takes_images(&self, model: &str) -> bool {
        self.inner.takes_images(model)
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use seed_providers::{AssistantMessage, UserMessage};

    #[test]
    fn directives_are_read_and_left_out_of_the_text() {
        let (directives, rest) = parse_directives("[usage 75%] hello [slow 40] there [refuse]");
        assert_eq!(
            directives,
            Directives {
                usage_percent: Some(75),
                slow_ms: Some(40),
                refuse: true,
                ..Directives::default()
            }
        );
        assert_eq!(rest, "hello there");
        let (directives, rest) = parse_directives("go [steps 3] [steps 0]");
        assert_eq!(directives.steps, Some(3));
        assert_eq!(rest, "go [steps 0]");
        assert_eq!(parse_directives("[steps 99]").0.steps, Some(STEPS_MAX));
        let (directives, rest) = parse_directives("a [link] and [usage much] [slow 99999ms] b [");
        assert_eq!(
            directives,
            Directives {
                slow_ms: Some(SLOW_DELAY_MS_MAX),
                ..Directives::default()
            }
        );
        assert_eq!(rest, "a [link] and [usage much] b [");
        assert_eq!(parse_directives(" as  typed ").1, " as  typed ");
    }

    fn request(messages: Vec<Message>) -> Request {
        Request {
            reasoning: None,
            model: "m".to_owned(),
            system_prompt: String::new(),
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: Arc::from(Vec::new()),
            session_id: None,
        }
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage::new(text.to_owned()))
    }

    fn answer(provider: &Scripted, request: Request) -> AssistantMessage {
        futures::executor::block_on(async {
            let mut events = provider.stream(request);
            while let Some(event) = events.next().await {
                if let StreamEvent::Done(message) = event {
                    return message;
                }
            }
            panic!("the stream ended without Done")
        })
    }

    #[test]
    fn the_answer_names_the_files_the_message_carried() {
        let provider = scripted(None, |_| None);
        let mut message = seed_providers::UserMessage::new("look");
        message.parts = vec![
            UserPart::Text {
                text: "attachment:a1 (notes.txt, text/plain, 24 bytes):\n<attachment_text>\n\
                       first line\nsecond\n</attachment_text>"
                    .to_owned(),
            },
            UserPart::Text {
                text: "attachment:a2 (dot.png, image/png, 3 bytes): the image follows".to_owned(),
            },
            UserPart::Image {
                media_type: "image/png".to_owned(),
                data: "AQID".to_owned(),
            },
            UserPart::Text {
                text: "attachment:a3 (a.pdf, application/pdf, 9 bytes): not shown (neither text \
                       nor an image)"
                    .to_owned(),
            },
        ];
        let answered = answer(&provider, request(vec![Message::User(message)]));
        assert_eq!(
            answered.text(),
            "You said: look [attached: notes.txt \u{201c}first line\u{201d}; dot.png (image/png, 3 \
             bytes); a.pdf (not shown)]"
        );
    }

    #[test]
    fn usage_follows_the_directive_and_the_window() {
        let provider = scripted(None, |model| (model == "m").then_some(200_000));
        for (percent, tokens) in [(50, 100_000), (75, 150_000), (90, 180_000)] {
            let message = answer(
                &provider,
                request(vec![user(&format!("[usage {percent}%] hi"))]),
            );
            assert_eq!(message.usage.prompt_tokens(), tokens);
            assert_eq!(message.text(), "You said: hi");
        }
    }

    fn continue_arguments(provider: &Scripted, messages: Vec<Message>) -> serde_json::Value {
        let message = answer(provider, request(messages));
        let calls: Vec<ToolCall> = message.tool_calls().into_iter().cloned().collect();
        assert_eq!(calls.len(), 1, "{message:?}");
        assert_eq!(calls[0].name, "continue_session");
        calls[0].arguments.clone()
    }

    #[test]
    fn continue_cites_the_earlier_exchange_and_refuse_cites_past_the_end() {
        let provider = scripted(None, |_| None);
        let first = continue_arguments(&provider, vec![user("continue: Lisbon hotels")]);
        assert_eq!(first["title"], "Lisbon hotels");
        assert_eq!(first["sources"].as_array().map(Vec::len), Some(1));
        let earlier = vec![
            user("title: Trip"),
            Message::Assistant(tool_response(
                "",
                vec![ToolCall {
                    id: "c".to_owned(),
                    name: "status".to_owned(),
                    arguments: serde_json::json!({}),
                }],
            )),
            Message::ToolResult(seed_providers::ToolResultMessage {
                tool_call_id: "c".to_owned(),
                tool_name: "status".to_owned(),
                content: "ok".to_owned(),
                is_error: false,
                images: Vec::new(),
            }),
            Message::Assistant(text_response("You said: title: Trip")),
            user("<context_usage tokens=\"1\"/>"),
            user("continue: Lisbon hotels"),
        ];
        // user, tool_call (the response says nothing else), tool_result, assistant: the four
        // events are cited.
        let cited = continue_arguments(&provider, earlier.clone());
        assert_eq!(
            cited["sources"][1],
            serde_json::json!({"type": "session_events", "fromSeq": 1, "toSeq": 4})
        );
        assert!(cited["handoff"]["nextActions"].is_array());
        let mut refused = earlier;
        refused[5] = user("continue: Lisbon hotels [refuse]");
        let refused = continue_arguments(&provider, refused);
        assert_eq!(refused["title"], "Lisbon hotels");
        assert_eq!(refused["sources"][1]["toSeq"], 1_000_000);
    }

    #[test]
    fn steps_make_a_turn_of_that_many_responses() {
        let provider = scripted(None, |_| None);
        let mut messages = vec![user("[steps 3] plan the trip")];
        for step in 1..3 {
            let message = answer(&provider, request(messages.clone()));
            assert_eq!(message.text(), format!("Step {step} of 3."));
            let calls: Vec<ToolCall> = message.tool_calls().into_iter().cloned().collect();
            assert_eq!(calls.len(), 1);
            assert_eq!(
                calls[0].arguments,
                serde_json::json!({"description": format!("step {step} of 3")})
            );
            messages.push(Message::Assistant(message));
            messages.push(Message::ToolResult(seed_providers::ToolResultMessage {
                tool_call_id: calls[0].id.clone(),
                tool_name: "status".to_owned(),
                content: "ok".to_owned(),
                is_error: false,
                images: Vec::new(),
            }));
        }
        let message = answer(&provider, request(messages));
        assert!(message.tool_calls().is_empty());
        assert_eq!(message.text(), "You said: plan the trip");
    }

    /// The error the stream ends with, if it does.
    fn failure(provider: &Scripted, request: Request) -> Option<seed_providers::ProviderError> {
        futures::executor::block_on(async {
            let events: Vec<StreamEvent> = provider.stream(request).collect().await;
            events.into_iter().find_map(|event| match event {
                StreamEvent::Error(error) => Some(error),
                _ => None,
            })
        })
    }

    #[test]
    fn fail_fails_while_the_message_is_the_newest_and_a_retry_is_answered() {
        let provider = scripted(None, |_| None);
        let error = failure(&provider, request(vec![user("[fail] hello")])).expect("a failure");
        assert!(error.message.contains("[fail]"), "{error:?}");
        // Retried, the message is behind in the context: answered, the directive left out.
        let retried = request(vec![user("[fail] hello"), user("<background_work_update>")]);
        assert_eq!(failure(&provider, retried.clone()), None);
        assert_eq!(answer(&provider, retried).text(), "You said: hello");
        // With continue:, the predecessor continues; the successor, which answers, fails.
        let call = continue_arguments(&provider, vec![user("continue: Trip [fail]")]);
        assert_eq!(call["title"], "Trip");
        let successor = vec![
            user("<continuation from=\"x\">the handoff</continuation>"),
            user("continue: Trip [fail]"),
        ];
        assert!(failure(&provider, request(successor)).is_some());
    }

    #[test]
    fn no_usage_reports_none_and_cut_off_stops_at_the_token_limit() {
        let provider = scripted(None, |_| None);
        let plain = answer(&provider, request(vec![user("hello there")]));
        assert!(plain.usage.input > 0);
        let bare = answer(&provider, request(vec![user("hello [no usage] there")]));
        assert_eq!(bare.text(), "You said: hello there");
        assert_eq!(bare.usage, seed_providers::Usage::default());
        let cut = answer(&provider, request(vec![user("list them [cut off]")]));
        assert_eq!(cut.stop_reason, seed_providers::StopReason::Length);
        assert_eq!(cut.text(), "You said: list them, and then");
    }

    #[actix_web::test]
    async fn slow_paces_the_deltas() {
        let provider = scripted(None, |_| None);
        let started = Instant::now();
        let events: Vec<StreamEvent> = provider
            .stream(request(vec![user("[slow 20] twenty-four characters")]))
            .collect()
            .await;
        let n_deltas = events
            .iter()
            .filter(|event| matches!(event, StreamEvent::TextDelta(_)))
            .count();
        assert!(n_deltas >= 4, "{events:?}");
        assert!(started.elapsed() >= Duration::from_millis(20 * n_deltas as u64));
    }
}
