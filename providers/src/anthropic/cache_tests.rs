//! Where the Anthropic request body puts the prompt cache's marks (the rule is in `cache.rs`):
//! by the request's shape, and over a session, that every mark closes a prefix the next
//! requests repeat.
use std::sync::Arc;

use super::tests::{SIGNATURE, request};
use super::*;
use crate::message::{Message, ToolResultMessage, UserMessage, UserPart};

/// Where `body` carries cache marks, as paths: `system[0]`, `tools[1]`, `messages[2].content[0]`.
fn cache_marks(body: &Value) -> Vec<String> {
    let mut marks = Vec::new();
    let mut look = |section: &str, blocks: &Value| {
        for (idx, block) in blocks.as_array().into_iter().flatten().enumerate() {
            if block.get("cache_control").is_some() {
                marks.push(format!("{section}[{idx}]"));
            }
        }
    };
    look("system", &body["system"]);
    look("tools", &body["tools"]);
    for (idx, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        look(&format!("messages[{idx}].content"), &message["content"]);
    }
    marks
}

/// One turn of a session: its input, then `n_rounds` responses that call `read`, each with
/// its result, then the answer.
struct Turn {
    input: Arc<Message>,
    /// This turn's blocks: rendered once per turn, sent with each of its requests right behind
    /// the input, never stored (so no later turn carries them).
    blocks: Vec<Arc<Message>>,
    steps: Vec<Arc<Message>>,
}

fn turn(turn_idx: usize, n_rounds: usize) -> Turn {
    let user = |text: String| Arc::new(Message::User(UserMessage::new(text)));
    let mut steps = Vec::new();
    for round in 0..n_rounds {
        let id = format!("toolu_{turn_idx}_{round}");
        steps.push(Arc::new(Message::Assistant(AssistantMessage {
            content: vec![
                AssistantBlock::Thinking {
                    thinking: "Another file.".to_owned(),
                    signature: Some(SIGNATURE.to_owned()),
                },
                AssistantBlock::Text {
                    text: format!("Reading part {round}."),
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: id.clone(),
                    name: "read".to_owned(),
                    arguments: json!({"path": format!("part-{round}.md")}),
                }),
            ],
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            model: "claude-x".to_owned(),
            error_message: None,
        })));
        steps.push(Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: id,
            tool_name: "read".to_owned(),
            content: format!("the text of part {round}"),
            is_error: false,
            images: Vec::new(),
        })));
    }
    steps.push(Arc::new(Message::Assistant(AssistantMessage {
        content: vec![AssistantBlock::Text {
            text: format!("The answer to turn {turn_idx}."),
        }],
        usage: Usage::default(),
        stop_reason: StopReason::Stop,
        model: "claude-x".to_owned(),
        error_message: None,
    })));
    Turn {
        input: user(format!("Question {turn_idx}?")),
        blocks: vec![
            user(format!("<plan_state>step {turn_idx}</plan_state>")),
            user(format!("<current_time>minute {turn_idx}</current_time>")),
        ],
        steps,
    }
}

/// Every request of a session of turns with `rounds[t]` tool rounds each, laid out as the
/// runtime sends them (`seed_durable::context::request_messages`): the history as stored, the
/// turn's input, its blocks, the turn's steps so far. Each with its turn's index.
fn session_requests(rounds: &[usize]) -> Vec<(usize, Request)> {
    let mut history: Vec<Arc<Message>> = Vec::new();
    let mut requests = Vec::new();
    for (turn_idx, &n_rounds) in rounds.iter().enumerate() {
        let turn = turn(turn_idx, n_rounds);
        for n_steps in (0..=n_rounds).map(|round| 2 * round) {
            let mut messages = history.clone();
            messages.push(Arc::clone(&turn.input));
            messages.extend(turn.blocks.iter().cloned());
            messages.extend(turn.steps[..n_steps].iter().cloned());
            requests.push((
                turn_idx,
                Request {
                    messages,
                    ..request()
                },
            ));
        }
        history.push(turn.input);
        history.extend(turn.steps);
    }
    requests
}

/// The conversation's blocks in order, each with its role and whether it starts a message,
/// without marks: what a prefix is made of.
fn flat_blocks(body: &Value) -> Vec<Value> {
    let mut blocks = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        for (idx, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let mut block = block.clone();
            if let Some(fields) = block.as_object_mut() {
                fields.remove("cache_control");
            }
            blocks.push(json!([message["role"], idx == 0, block]));
        }
    }
    blocks
}

/// The flat blocks up to and including each conversation mark.
fn marked_prefixes(body: &Value) -> Vec<Vec<Value>> {
    let blocks = flat_blocks(body);
    let mut prefixes = Vec::new();
    let mut n_blocks = 0;
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            n_blocks += 1;
            if block.get("cache_control").is_some() {
                prefixes.push(blocks[..n_blocks].to_vec());
            }
        }
    }
    prefixes
}

/// The marks by the request's shape: the system prompt, the last tool, the newest settled
/// message before the turn's blocks (its input), and the turn's newest step when it has one,
/// else the previous turn's input; never more than four.
#[test]
fn cache_marks_sit_on_the_input_and_the_newest_step() {
    let requests = session_requests(&[1, 0, 2]);
    let options = BodyOptions::default();
    let marks_of = |request: &Request| cache_marks(&request_body(request, &options));
    let table: [(&str, &Request, &[&str]); 7] = [
        // [input, blocks]
        (
            "the first request",
            &requests[0].1,
            &["system[0]", "tools[1]", "messages[0].content[0]"],
        ),
        // [input, blocks] [thinking, text, tool_use] [result]
        (
            "the first turn's second request",
            &requests[1].1,
            &[
                "system[0]",
                "tools[1]",
                "messages[0].content[0]",
                "messages[2].content[0]",
            ],
        ),
        // [input 0] [..] [result] [answer] [input 1, blocks]
        (
            "the second turn's request",
            &requests[2].1,
            &[
                "system[0]",
                "tools[1]",
                "messages[0].content[0]",
                "messages[4].content[0]",
            ],
        ),
        // .. [answer 0] [input 1] [answer 1] [input 2, blocks] [..] [result] [..] [result]
        (
            "the third turn's last request",
            &requests[5].1,
            &[
                "system[0]",
                "tools[1]",
                "messages[6].content[0]",
                "messages[10].content[0]",
            ],
        ),
        (
            "a turn after one that failed: the first of both inputs",
            &Request {
                messages: vec![
                    Arc::new(Message::User(UserMessage::new("failed"))),
                    Arc::new(Message::User(UserMessage::new("again"))),
                    Arc::new(Message::User(UserMessage::new("<current_time>"))),
                ],
                ..request()
            },
            &["system[0]", "tools[1]", "messages[0].content[0]"],
        ),
        (
            "an input with an image: its last block",
            &Request {
                messages: vec![
                    Arc::new(Message::User(UserMessage {
                        text: "look".to_owned(),
                        parts: vec![UserPart::Image {
                            media_type: "image/png".to_owned(),
                            data: "iVBORw0KGgo=".to_owned(),
                        }],
                    })),
                    Arc::new(Message::User(UserMessage::new("<current_time>"))),
                ],
                ..request()
            },
            &["system[0]", "tools[1]", "messages[0].content[1]"],
        ),
        (
            "no system prompt, no tools",
            &Request {
                system_prompt: String::new(),
                tools: Arc::from(Vec::new()),
                ..requests[3].1.clone()
            },
            &["messages[4].content[0]", "messages[6].content[0]"],
        ),
    ];
    for (case, request, expected) in table {
        assert_eq!(marks_of(request), expected, "{case}");
    }
    for (turn_idx, request) in &requests {
        assert!(marks_of(request).len() <= 4, "turn {turn_idx}");
    }
}

/// What makes a mark worth its write: the next request repeats the prefix it closes. Every
/// mark's prefix is repeated by the next request of its turn, the input's by every later
/// request of the session, and every request after the first finds a prefix an earlier one
/// marked, so it reads the conversation from the cache.
#[test]
fn every_cache_mark_closes_a_prefix_the_next_request_repeats() {
    let options = BodyOptions::default();
    let requests: Vec<(usize, Value)> = session_requests(&[2, 0, 3, 1, 0, 4])
        .into_iter()
        .map(|(turn_idx, request)| (turn_idx, request_body(&request, &options)))
        .collect();
    let mut written: Vec<Vec<Value>> = Vec::new();
    for (idx, (turn_idx, body)) in requests.iter().enumerate() {
        let prefixes = marked_prefixes(body);
        assert!(
            (1..=2).contains(&prefixes.len()),
            "request {idx}: {prefixes:?}"
        );
        if idx > 0 {
            assert!(
                prefixes.iter().any(|prefix| written.contains(prefix)),
                "request {idx} reads nothing of the conversation from the cache"
            );
        }
        let later = &requests[idx + 1..];
        if let Some((next_turn_idx, next)) = later.first()
            && next_turn_idx == turn_idx
        {
            for prefix in &prefixes {
                assert!(
                    flat_blocks(next).starts_with(prefix),
                    "request {idx}: the next request of its turn does not repeat a mark"
                );
            }
        }
        // The input's mark (the oldest of the turn's own) stays good for the whole session.
        let input_prefix = prefixes
            .iter()
            .find(|prefix| {
                prefix.last().is_some_and(|block| {
                    block[2]["text"]
                        .as_str()
                        .is_some_and(|text| text == format!("Question {turn_idx}?"))
                })
            })
            .unwrap_or_else(|| panic!("request {idx}: no mark on its input"));
        for (later_idx, (_, later)) in later.iter().enumerate() {
            assert!(
                flat_blocks(later).starts_with(input_prefix),
                "request {idx}: request {} does not repeat the input's mark",
                idx + 1 + later_idx
            );
        }
        written.extend(prefixes);
    }
}
