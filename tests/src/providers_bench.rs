//! The workloads of the `providers` bench suite: a long recorded-shape stream of each wire
//! protocol decoded from memory through the same path a response takes (eventsource-stream,
//! then the wire's decoder), and the time a delta takes from the local server's write to the
//! `StreamEvent` a harness reads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use seed_providers::http::decode_chunks;
use seed_providers::{
    AnthropicDecoder, ApiKey, Message, OpenAiDecoder, ProviderConfig, ProviderKind, Request,
    StreamEvent, UserMessage,
};

use crate::sse_server::{Reply, SseServer, now_micros};
use crate::wire_fixtures::{anthropic as an, openai as oa};

/// The bytes a socket read hands over at a time, about: how a real body arrives.
pub const PIECE_BYTES: usize = 4_096;

/// A text delta of the recorded shape: a few words, as models stream them.
const DELTA_TEXT: &str = " the quick brown fox";

/// A long stream of `kind` of at least `n_bytes`: text deltas, then four tool calls with their
/// arguments in fragments, usage, the end.
pub fn recorded_stream(kind: ProviderKind, n_bytes: usize) -> String {
    let mut out = String::with_capacity(n_bytes + 4_096);
    match kind {
        ProviderKind::Openai => {
            out.push_str(&oa::role());
            out.push_str(&oa::reasoning("Plan the answer first."));
            while out.len() < n_bytes {
                out.push_str(&oa::text(DELTA_TEXT));
            }
            for index in 0..4 {
                out.push_str(&oa::call_start(
                    index,
                    &format!("call_{index}"),
                    "read",
                    "{\"pa",
                ));
                out.push_str(&oa::call_arguments(index, "th\": \"notes.md\"}"));
            }
            out.push_str(&oa::finish("tool_calls"));
            out.push_str(&oa::usage(10_000, 8_192, 5_000));
            out.push_str(&oa::done());
        }
        _ => {
            out.push_str(&an::message_start(10, 8_000, 2_000));
            out.push_str(&an::thinking_start(0));
            out.push_str(&an::thinking(0, "Plan the answer first."));
            out.push_str(&an::signature(0, "EqQBCkYIARgCKkD+sig=="));
            out.push_str(&an::block_stop(0));
            out.push_str(&an::text_start(1));
            while out.len() < n_bytes {
                out.push_str(&an::text(1, DELTA_TEXT));
            }
            out.push_str(&an::block_stop(1));
            for index in 2..6 {
                out.push_str(&an::tool_start(index, &format!("toolu_{index}"), "read"));
                out.push_str(&an::tool_input(index, "{\"pa"));
                out.push_str(&an::tool_input(index, "th\": \"notes.md\"}"));
                out.push_str(&an::block_stop(index));
            }
            out.push_str(&an::message_delta("tool_use", 5_000));
            out.push_str(&an::message_stop());
        }
    }
    out
}

/// Decodes `sse` (cut into pieces of [`PIECE_BYTES`]) as `kind` and returns the time it took
/// and the number of text deltas; fails unless the stream ended with its final message.
pub fn decode_once(kind: ProviderKind, sse: &str) -> anyhow::Result<(Duration, usize)> {
    let chunks: Vec<Vec<u8>> = sse
        .as_bytes()
        .chunks(PIECE_BYTES)
        .map(<[u8]>::to_vec)
        .collect();
    let started = Instant::now();
    let (n_deltas, last) = futures::executor::block_on(async {
        let count = |(n, _): (usize, Option<StreamEvent>), event: StreamEvent| {
            let n = n + usize::from(matches!(event, StreamEvent::TextDelta(_)));
            futures::future::ready((n, Some(event)))
        };
        match kind {
            ProviderKind::Openai => {
                decode_chunks(chunks, OpenAiDecoder::new("bench"))
                    .fold((0, None), count)
                    .await
            }
            _ => {
                decode_chunks(chunks, AnthropicDecoder::new("bench"))
                    .fold((0, None), count)
                    .await
            }
        }
    });
    let elapsed = started.elapsed();
    let Some(StreamEvent::Done(message)) = last else {
        anyhow::bail!("the recorded {kind} stream did not end with its message: {last:?}");
    };
    anyhow::ensure!(message.tool_calls().len() == 4, "{kind}: lost tool calls");
    Ok((elapsed, n_deltas))
}

/// A reply of `kind`'s wire streaming `n_deltas` text deltas `interval` apart, each the
/// microseconds since the Unix epoch when it was written, followed by a space.
pub fn stamped_reply(kind: ProviderKind, n_deltas: usize, interval: Duration) -> Reply {
    let (head, template, tail) = match kind {
        ProviderKind::Openai => (oa::role(), oa::text("{STAMP} "), {
            let mut tail = oa::finish("stop");
            tail.push_str(&oa::done());
            tail
        }),
        _ => (
            {
                let mut head = an::message_start(10, 0, 0);
                head.push_str(&an::text_start(0));
                head
            },
            an::text(0, "{STAMP} "),
            {
                let mut tail = an::block_stop(0);
                tail.push_str(&an::message_delta("end_turn", 5));
                tail.push_str(&an::message_stop());
                tail
            },
        ),
    };
    Reply::Stamped {
        head,
        template,
        n_deltas,
        interval,
        tail,
    }
}

/// Measured delays from a delta's write to its `StreamEvent`, in microseconds, sorted.
pub async fn delta_latencies(
    kind: ProviderKind,
    n_deltas: usize,
    interval: Duration,
) -> anyhow::Result<Vec<u64>> {
    let server = SseServer::start(vec![stamped_reply(kind, n_deltas, interval)]).await?;
    let config = ProviderConfig {
        provider: kind,
        base_url: Some(match kind {
            ProviderKind::Openai => format!("{}/v1", server.url),
            _ => server.url.clone(),
        }),
        api_key: Some(ApiKey::new("bench")),
        ..ProviderConfig::default()
    };
    let provider = config.build()?;
    let request = Request {
        reasoning: None,
        model: "bench".to_owned(),
        system_prompt: String::new(),
        messages: vec![Arc::new(Message::User(UserMessage::new("go".to_owned())))],
        tools: Arc::from(Vec::new()),
        session_id: None,
    };
    let mut events = provider.stream(request);
    let mut latencies = Vec::with_capacity(n_deltas);
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::TextDelta(stamp) => {
                let arrived = now_micros();
                let sent: u64 = stamp.trim_end().parse()?;
                latencies.push(arrived.saturating_sub(sent));
            }
            StreamEvent::Done(_) => break,
            StreamEvent::Error(error) => anyhow::bail!("{kind}: {error}"),
            _ => {}
        }
    }
    anyhow::ensure!(latencies.len() == n_deltas, "{kind}: deltas lost");
    latencies.sort_unstable();
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_streams_decode_whole() {
        for kind in [ProviderKind::Openai, ProviderKind::Anthropic] {
            let sse = recorded_stream(kind, 50_000);
            assert!(sse.len() >= 50_000);
            let (_, n_deltas) = decode_once(kind, &sse).expect("decodes");
            assert!(n_deltas > 100, "{kind}: {n_deltas}");
        }
    }
}
