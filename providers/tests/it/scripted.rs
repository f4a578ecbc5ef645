//! The scripted provider through the public API, as the crates above use it: what it streams,
//! what it records, and how its streams end, break, hang and are dropped.

use std::time::Duration;

use futures::executor::block_on;
use futures::{FutureExt, StreamExt};
use seed_providers::{
    AssistantBlock, AssistantMessage, Message, Provider, ProviderError, ProviderErrorKind, Request,
    ScriptedProvider, ScriptedStep, StopReason, StreamEvent, ToolCall, Usage, UserMessage,
    text_response, tool_response,
};
use serde_json::json;

fn request(text: &str) -> Request {
    Request {
        reasoning: None,
        model: "scripted".to_owned(),
        system_prompt: "you are a test".to_owned(),
        messages: vec![std::sync::Arc::new(Message::User(UserMessage::new(
            text.to_owned(),
        )))],
        tools: std::sync::Arc::from(Vec::new()),
        session_id: Some("session-1".to_owned()),
    }
}

fn collect(provider: &impl Provider, request: Request) -> Vec<StreamEvent> {
    block_on(provider.stream(request).collect())
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TextDelta(delta) => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

fn call(id: &str) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "read".to_owned(),
        arguments: json!({"path": format!("{id}.md")}),
    }
}

#[test]
fn streams_text_in_deltas_then_usage_then_the_exact_message() {
    let text = "The quick brown fox jumps over the lazy dög — twice.";
    let message = text_response(text);
    let provider =
        ScriptedProvider::new(vec![ScriptedStep::Respond(message.clone())]).with_chunk_chars(5);
    let events = collect(&provider, request("hi"));

    let n_deltas = text.chars().count().div_ceil(5);
    assert_eq!(events.len(), n_deltas + 2, "{events:?}");
    assert_eq!(text_of(&events), text);
    for event in &events[..n_deltas] {
        let StreamEvent::TextDelta(delta) = event else {
            panic!("expected a delta, got {event:?}");
        };
        assert!(delta.chars().count() <= 5);
    }
    assert_eq!(events[n_deltas], StreamEvent::Usage(message.usage));
    assert_eq!(events[n_deltas + 1], StreamEvent::Done(message));
}

#[test]
fn streams_thinking_and_tool_calls_in_block_order() {
    let message = AssistantMessage {
        content: vec![
            AssistantBlock::Thinking {
                thinking: "which file?".to_owned(),
                signature: Some("sig+/==".to_owned()),
            },
            AssistantBlock::Text {
                text: "Reading.".to_owned(),
            },
            AssistantBlock::ToolCall(call("a")),
            AssistantBlock::ToolCall(call("b")),
        ],
        usage: Usage {
            input: 5,
            output: 6,
            cache_read: 7,
            cache_write: 8,
            ..Usage::default()
        },
        stop_reason: StopReason::ToolUse,
        model: "scripted".to_owned(),
        error_message: None,
    };
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(message.clone())]);
    let events = collect(&provider, request("hi"));
    assert_eq!(
        events,
        [
            StreamEvent::ThinkingDelta("which fi".to_owned()),
            StreamEvent::ThinkingDelta("le?".to_owned()),
            StreamEvent::TextDelta("Reading.".to_owned()),
            StreamEvent::ToolCall(call("a")),
            StreamEvent::ToolCall(call("b")),
            StreamEvent::Usage(message.usage),
            StreamEvent::Done(message),
        ]
    );
}

#[test]
fn tool_response_streams_its_calls() {
    let message = tool_response("", vec![call("x")]);
    let provider = ScriptedProvider::new(vec![ScriptedStep::Respond(message.clone())]);
    let events = collect(&provider, request("hi"));
    assert_eq!(
        events,
        [
            StreamEvent::ToolCall(call("x")),
            StreamEvent::Usage(message.usage),
            StreamEvent::Done(message),
        ]
    );
}

#[test]
fn records_requests_in_order_and_answers_past_the_end_with_script_exhausted() {
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(text_response("one")),
        ScriptedStep::Respond(text_response("two")),
    ]);
    let clone = provider.clone();
    assert_eq!(provider.n_requests(), 0);

    assert_eq!(text_of(&collect(&provider, request("first"))), "one");
    // A clone shares the script and the record.
    assert_eq!(text_of(&collect(&clone, request("second"))), "two");
    let events = collect(&provider, request("third"));
    let [StreamEvent::Error(error)] = events.as_slice() else {
        panic!("expected one error, got {events:?}");
    };
    assert_eq!(error.kind, ProviderErrorKind::ScriptExhausted);
    assert!(
        error.to_string().starts_with("script exhausted: "),
        "{error}"
    );

    assert_eq!(provider.n_requests(), 3);
    assert_eq!(
        clone.requests(),
        [request("first"), request("second"), request("third")]
    );
}

#[test]
fn from_fn_gets_each_request_and_its_index() {
    let provider = ScriptedProvider::from_fn(|request, request_idx| {
        let Some(Message::User(user)) = request.messages.last().map(|m| m.as_ref()) else {
            return ScriptedStep::Respond(text_response("no user message"));
        };
        ScriptedStep::Respond(text_response(&format!("{request_idx}:{}", user.text)))
    });
    for (idx, text) in ["a", "b", "c"].into_iter().enumerate() {
        let events = collect(&provider, request(text));
        assert_eq!(text_of(&events), format!("{idx}:{text}"));
    }
    assert_eq!(provider.n_requests(), 3);
}

#[test]
fn fail_after_ends_with_the_error_after_its_text() {
    let error = ProviderError::new(ProviderErrorKind::Http { status: 529 }, "overloaded");
    let provider = ScriptedProvider::new(vec![ScriptedStep::FailAfter {
        text: "half an answ".to_owned(),
        error: error.clone(),
    }]);
    let events = collect(&provider, request("hi"));
    assert_eq!(
        events,
        [
            StreamEvent::TextDelta("half an ".to_owned()),
            StreamEvent::TextDelta("answ".to_owned()),
            StreamEvent::Error(error),
        ]
    );
}

#[test]
fn hang_yields_its_text_then_stays_pending() {
    let provider = ScriptedProvider::new(vec![ScriptedStep::Hang {
        text: "thinking about it".to_owned(),
    }])
    .with_chunk_chars(4);
    let mut stream = provider.stream(request("hi"));
    let mut text = String::new();
    while text.len() < "thinking about it".len() {
        match stream.next().now_or_never() {
            Some(Some(StreamEvent::TextDelta(delta))) => text.push_str(&delta),
            other => panic!("expected a delta, got {other:?}"),
        }
    }
    assert_eq!(text, "thinking about it");
    for _ in 0..3 {
        assert!(stream.next().now_or_never().is_none(), "the stream ended");
    }
    drop(stream);
}

#[test]
fn dropping_a_stream_mid_way_is_fine() {
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(text_response("a long answer that nobody reads")),
        ScriptedStep::Respond(text_response("the next one")),
    ]);
    let mut stream = provider.stream(request("first"));
    let first = block_on(stream.next());
    assert_eq!(first, Some(StreamEvent::TextDelta("a long a".to_owned())));
    drop(stream);

    // The next request gets the next step, whole.
    let events = collect(&provider, request("second"));
    assert_eq!(text_of(&events), "the next one");
    assert_eq!(provider.n_requests(), 2);
}

#[test]
fn a_delta_delay_paces_the_stream_without_changing_it() {
    let message = text_response("paced, one small delta at a time");
    let provider = ScriptedProvider::new(vec![
        ScriptedStep::Respond(message.clone()),
        ScriptedStep::Respond(message.clone()),
    ])
    .with_delta_delay(Duration::from_millis(1));
    let events = collect(&provider, request("hi"));
    assert_eq!(text_of(&events), message.text());
    assert_eq!(events.last(), Some(&StreamEvent::Done(message)));

    // Dropped while waiting between deltas: the timer thread finds nobody and stops.
    let mut stream = provider.stream(request("again"));
    assert!(matches!(
        block_on(stream.next()),
        Some(StreamEvent::TextDelta(_))
    ));
    let _pending = stream.next().now_or_never();
    drop(stream);
}

#[test]
fn providers_share_behind_arc_and_dyn() {
    let provider: std::sync::Arc<dyn Provider> =
        std::sync::Arc::new(ScriptedProvider::new(vec![ScriptedStep::Respond(
            text_response("shared"),
        )]));
    assert_eq!(text_of(&collect(&provider, request("hi"))), "shared");
}

#[test]
fn scripted_steps_round_trip() {
    let steps = vec![
        ScriptedStep::Respond(tool_response("t", vec![call("c")])),
        ScriptedStep::FailAfter {
            text: "x".to_owned(),
            error: ProviderError::new(ProviderErrorKind::Transport, "reset"),
        },
        ScriptedStep::Hang {
            text: "y".to_owned(),
        },
    ];
    let json = serde_json::to_value(&steps).expect("serializes");
    assert_eq!(json[0]["type"], json!("respond"));
    assert_eq!(json[1]["type"], json!("fail_after"));
    assert_eq!(json[2], json!({"type": "hang", "text": "y"}));
    let back: Vec<ScriptedStep> = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, steps);
}
