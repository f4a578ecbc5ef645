//! The workloads of the `providers` bench suite: a long recorded-shape stream of each wire
//! protocol decoded from memory through the same path a response takes (eventsource-stream,
//! then the wire's decoder), and the time a delta takes from the local server's write to the
//! `StreamEvent` a harness reads; and the Anthropic prompt cache as a stand-in server plays it
//! ([`PromptCache`]), with the bytes a long session sends uncached per request.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use seed_durable::{Harness, HarnessConfig, MemoryFs, TurnOutcome, TurnRequest};
use seed_projections::blocks::current_time_block;
use seed_providers::anthropic::{BodyOptions, request_body};
use seed_providers::http::decode_chunks;
use seed_providers::{
    AnthropicDecoder, ApiKey, Message, OpenAiDecoder, ProviderConfig, ProviderKind, Request,
    ScriptedProvider, StreamEvent, UserMessage,
};
use serde_json::{Value, json};

use crate::projections_bench::turn_blocks;
use crate::sse_server::{Reply, SseServer, now_micros};
use crate::turn_loop;
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

/// How far before a mark the wire looks for a prefix it cached, in blocks (Anthropic documents
/// "about 20").
pub const CACHE_LOOKBACK_BLOCKS: usize = 20;

/// Anthropic's prompt cache as a stand-in server plays it. The prompt is a sequence of blocks
/// (a head naming the model and thinking, then the tools, the system prompt's blocks, each
/// message's blocks), each block canonicalized: its JSON without its mark, behind its section
/// or role and whether it starts a message. A mark writes the prefix up to its block; a request
/// reads the longest prefix written before that it repeats, found at one of its marks or up to
/// [`CACHE_LOOKBACK_BLOCKS`] before one. Bytes stand for tokens (a server reports a quarter of
/// them). Entries never expire: a session's requests come within the wire's five minutes.
#[derive(Debug, Default)]
pub struct PromptCache {
    /// Every prefix a mark has written: a running hash of its blocks.
    written: HashSet<u64>,
}

/// How a request's prompt was billed, in canonical bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PromptBytes {
    /// Read from the cache (`cache_read_input_tokens`).
    pub read: usize,
    /// Written to the cache: from the end of what was read to the last mark
    /// (`cache_creation_input_tokens`).
    pub write: usize,
    /// After the last mark and past what was read (`input_tokens`).
    pub rest: usize,
}

impl PromptBytes {
    /// The bytes not read from the cache: billed in full, or more for the write.
    pub fn not_read(&self) -> usize {
        self.write + self.rest
    }

    /// The whole prompt.
    pub fn total(&self) -> usize {
        self.read + self.write + self.rest
    }
}

/// The prompt of an Anthropic Messages `body` as the cache sees it: each block's canonical text
/// and whether it carries a mark, in order (see [`PromptCache`]).
pub fn prompt_blocks(body: &Value) -> Vec<(String, bool)> {
    let mut blocks = vec![(
        json!({"model": body["model"], "thinking": body["thinking"]}).to_string(),
        false,
    )];
    let mut add = |label: &str, block: &Value| {
        let mut block = block.clone();
        let marked = block
            .as_object_mut()
            .and_then(|fields| fields.remove("cache_control"))
            .is_some();
        blocks.push((format!("{label} {block}"), marked));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        add("tool", tool);
    }
    for block in body["system"].as_array().into_iter().flatten() {
        add("system", block);
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        let role = message["role"].as_str().unwrap_or("?");
        for (idx, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            add(&format!("{role}{}", if idx == 0 { "+" } else { "" }), block);
        }
    }
    blocks
}

impl PromptCache {
    /// Bills `body` against what earlier requests wrote, then writes its marked prefixes.
    pub fn answer(&mut self, body: &Value) -> PromptBytes {
        let blocks = prompt_blocks(body);
        let mut hasher = DefaultHasher::new();
        let mut keys = Vec::with_capacity(blocks.len());
        let mut ends = Vec::with_capacity(blocks.len());
        let mut n_bytes = 0;
        for (text, _) in &blocks {
            hasher.write(text.as_bytes());
            hasher.write_u8(0xff);
            keys.push(hasher.clone().finish());
            n_bytes += text.len();
            ends.push(n_bytes);
        }
        let marks: Vec<usize> = (0..blocks.len()).filter(|&idx| blocks[idx].1).collect();
        let read = marks
            .iter()
            .flat_map(|&mark| mark.saturating_sub(CACHE_LOOKBACK_BLOCKS)..=mark)
            .filter(|&idx| self.written.contains(&keys[idx]))
            .map(|idx| ends[idx])
            .max()
            .unwrap_or(0);
        let marked = marks.last().map_or(0, |&mark| ends[mark]);
        self.written.extend(marks.iter().map(|&mark| keys[mark]));
        PromptBytes {
            read,
            write: marked.saturating_sub(read),
            rest: n_bytes - read.max(marked),
        }
    }
}

/// The body without the marks this wire added to the conversation: what the request builder
/// sent before it marked the turn's input and newest step (the system prompt and the last tool
/// keep theirs).
pub fn without_conversation_marks(body: &Value) -> Value {
    let mut body = body.clone();
    for message in body["messages"].as_array_mut().into_iter().flatten() {
        for block in message["content"].as_array_mut().into_iter().flatten() {
            if let Some(fields) = block.as_object_mut() {
                fields.remove("cache_control");
            }
        }
    }
    body
}

/// The blocks of turn `turn_idx` of the cache bench: those of a busy turn, the time a minute
/// later each turn.
pub fn cache_turn_blocks(turn_idx: usize) -> Vec<UserMessage> {
    let mut blocks = turn_blocks();
    let minutes = i64::try_from(turn_idx).unwrap_or(i64::MAX);
    if let Some(time) = blocks.last_mut() {
        *time = UserMessage::new(current_time_block(1_795_989_900_000 + minutes * 60_000, 60));
    }
    blocks
}

/// Every request of a session of `n_turns` turns, each with its turn's index, as the durable
/// harness sends them to the harness bench's scripted model (four `read` calls per turn, then
/// the answer), each turn with [`cache_turn_blocks`].
pub fn session_requests(n_turns: usize) -> anyhow::Result<Vec<(usize, Request)>> {
    let provider = Arc::new(ScriptedProvider::from_fn(|request, _| {
        turn_loop::respond(request)
    }));
    let mut harness = futures::executor::block_on(Harness::open(
        MemoryFs::new(),
        Arc::clone(&provider),
        turn_loop::tools(),
        HarnessConfig::new("claude-bench", "You are a bench. Answer plainly."),
    ))?;
    let mut turn_of_request = Vec::new();
    for turn_idx in 0..n_turns {
        let turn = TurnRequest {
            blocks: cache_turn_blocks(turn_idx),
            ..TurnRequest::new(
                format!("req-{turn_idx}"),
                format!("Question {turn_idx}: what do the notes say about this?"),
            )
        };
        let outcome = futures::executor::block_on(harness.run_turn(turn))?;
        anyhow::ensure!(
            matches!(outcome, TurnOutcome::Answered { .. }),
            "turn {turn_idx} was not answered: {outcome:?}"
        );
        turn_of_request.resize(provider.n_requests(), turn_idx);
    }
    Ok(turn_of_request
        .into_iter()
        .zip(provider.requests())
        .collect())
}

/// The Anthropic cache breakpoint's figures over a session of `n_turns` turns: the mean bytes
/// per request of the last turn not read from the cache, without the conversation's marks
/// (`before`) and with them (`after`), the mean prompt, and the mean bytes from the previous
/// turn's input on (its steps, the new input, the blocks, the new turn's steps so far): what
/// `after` must stay within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CacheFigures {
    pub before: f64,
    pub after: f64,
    pub prompt: f64,
    pub new_turn_and_blocks: f64,
    /// Requests of the last turn the means are over.
    pub n_requests: usize,
}

/// [`CacheFigures`] over a session of `n_turns` turns ([`session_requests`]), each request billed
/// by its own [`PromptCache`] with and without the conversation's marks; fails when a request
/// of the last turn sends more uncached than the bytes from the previous turn's input on.
pub fn cache_figures(n_turns: usize) -> anyhow::Result<CacheFigures> {
    anyhow::ensure!(n_turns >= 2, "the figures need a previous turn");
    let options = BodyOptions {
        model_default: "claude-bench".to_owned(),
        ..BodyOptions::default()
    };
    let mut before = PromptCache::default();
    let mut after = PromptCache::default();
    let last_turn = n_turns - 1;
    let previous_input = format!("Question {}:", last_turn - 1);
    let mut sums = [0usize; 4];
    let mut n_requests = 0;
    for (turn_idx, request) in session_requests(n_turns)? {
        let body = request_body(&request, &options);
        let billed_before = before.answer(&without_conversation_marks(&body));
        let billed = after.answer(&body);
        if turn_idx != last_turn {
            continue;
        }
        let blocks = prompt_blocks(&body);
        let from = blocks
            .iter()
            .position(|(text, _)| text.contains(&previous_input))
            .ok_or_else(|| anyhow::anyhow!("no previous input in the last turn's request"))?;
        let new_bytes: usize = blocks[from..].iter().map(|(text, _)| text.len()).sum();
        anyhow::ensure!(
            billed.not_read() <= new_bytes,
            "the last turn's request {n_requests} sends {} bytes uncached, more than the {new_bytes} from the previous input on",
            billed.not_read()
        );
        sums[0] += billed_before.not_read();
        sums[1] += billed.not_read();
        sums[2] += billed.total();
        sums[3] += new_bytes;
        n_requests += 1;
    }
    let mean = |sum: usize| sum as f64 / n_requests.max(1) as f64;
    Ok(CacheFigures {
        before: mean(sums[0]),
        after: mean(sums[1]),
        prompt: mean(sums[2]),
        new_turn_and_blocks: mean(sums[3]),
        n_requests,
    })
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

    /// A body of one user message of `texts`, marked at `marks`.
    fn body(texts: &[&str], marks: &[usize]) -> Value {
        let content: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(idx, text)| {
                let mut block = json!({"type": "text", "text": text});
                if marks.contains(&idx) {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
                block
            })
            .collect();
        json!({"model": "m", "messages": [{"role": "user", "content": content}]})
    }

    #[test]
    fn the_prompt_cache_reads_the_longest_prefix_written_at_or_before_a_mark() {
        let mut cache = PromptCache::default();
        let bytes = |texts: &[&str]| -> usize {
            prompt_blocks(&body(texts, &[]))
                .iter()
                .map(|(text, _)| text.len())
                .sum()
        };
        let first = cache.answer(&body(&["a", "b", "c", "d"], &[2]));
        assert_eq!(
            first,
            PromptBytes {
                read: 0,
                write: bytes(&["a", "b", "c"]),
                rest: bytes(&["a", "b", "c", "d"]) - bytes(&["a", "b", "c"]),
            }
        );
        // The same start, marked further on: read up to the old mark, written to the new one.
        let longer = cache.answer(&body(&["a", "b", "c", "x", "y"], &[4]));
        assert_eq!(longer.read, bytes(&["a", "b", "c"]));
        assert_eq!(
            longer.write,
            bytes(&["a", "b", "c", "x", "y"]) - longer.read
        );
        assert_eq!(longer.rest, 0);
        // Unmarked, nothing is read; a change before the mark reads nothing either.
        assert_eq!(cache.answer(&body(&["a", "b", "c"], &[])).read, 0);
        assert_eq!(cache.answer(&body(&["a", "B", "c"], &[2])).read, 0);
        // A written prefix is found up to the wire's lookback before a mark, and no further.
        for (filler, n_blocks, read) in [
            ("z", CACHE_LOOKBACK_BLOCKS, bytes(&["a", "b", "c"])),
            ("w", CACHE_LOOKBACK_BLOCKS + 1, 0),
        ] {
            let mut texts = vec!["a", "b", "c"];
            texts.extend(std::iter::repeat_n(filler, n_blocks));
            let billed = cache.answer(&body(&texts, &[texts.len() - 1]));
            assert_eq!(billed.read, read, "{n_blocks} blocks on: {billed:?}");
            assert_eq!(billed.total(), bytes(&texts));
        }
    }
}
