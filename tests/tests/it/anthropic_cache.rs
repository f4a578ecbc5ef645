//! The Anthropic wire's prompt cache over a whole session: ten scripted turns through the
//! durable harness and the real `AnthropicProvider`, against a loopback server that honours
//! cache marks as the wire does (`providers_bench::PromptCache`: a mark writes the prefix up to
//! it, a request reads the longest prefix written before that it repeats) and reports the
//! usage it billed. From the second turn on every request reads the conversation from the
//! cache, more each turn, and what it sends uncached stays the size of the new turn.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use seed_durable::{EntryBody, Harness, HarnessConfig, MemoryFs, TurnOutcome, TurnRequest};
use seed_providers::{ProviderConfig, ProviderKind, RetryConfig, Usage};
use seed_tests::providers_bench::{PromptBytes, PromptCache, cache_turn_blocks, prompt_blocks};
use seed_tests::sse_server::{Received, Reply, SseServer};
use seed_tests::turn_loop;
use seed_tests::wire_fixtures::anthropic as an;
use serde_json::Value;

const N_TURNS: usize = 10;

/// Tool rounds of turn `turn_idx`: 0, 1 or 2, so turns of every shape follow each other.
fn n_rounds(turn_idx: usize) -> usize {
    turn_idx % 3
}

fn input(turn_idx: usize) -> String {
    format!(
        "Question {turn_idx}: what do the notes say about the project, and what should I read \
         next? Keep it short."
    )
}

/// The turn a request belongs to and the responses it already holds: the newest user turn's
/// input names it, and the assistant messages after that turn are its responses.
fn turn_of(body: &Value) -> (usize, usize) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let input_idx = messages
        .iter()
        .rposition(|message| {
            message["content"][0]["text"]
                .as_str()
                .is_some_and(|text| text.starts_with("Question "))
        })
        .expect("a request carries its turn's input");
    let text = messages[input_idx]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    let turn_idx = text["Question ".len()..]
        .split(':')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("the input names its turn");
    let n_responses = messages[input_idx..]
        .iter()
        .filter(|message| message["role"] == "assistant")
        .count();
    (turn_idx, n_responses)
}

/// The scripted model's reply, with the usage `billed`: a `read` call while the turn has had
/// fewer responses than its rounds, then the answer.
fn reply(body: &Value, billed: PromptBytes) -> Reply {
    let (turn_idx, n_responses) = turn_of(body);
    let tokens = |bytes: usize| bytes as u64 / 4;
    let mut pieces = vec![an::message_start(
        tokens(billed.rest),
        tokens(billed.read),
        tokens(billed.write),
    )];
    if n_responses < n_rounds(turn_idx) {
        pieces.extend([
            an::text_start(0),
            an::text(0, "Reading the notes."),
            an::block_stop(0),
            an::tool_start(1, &format!("toolu_{turn_idx}_{n_responses}"), "read"),
            an::tool_input(1, "{\"path\": \"~/memory/notes.md\"}"),
            an::block_stop(1),
            an::message_delta("tool_use", 20),
        ]);
    } else {
        pieces.extend([
            an::text_start(0),
            an::text(
                0,
                &format!("Answer {turn_idx}: the notes say the project is Seed, "),
            ),
            an::text(
                0,
                "a durable agent runtime over SQLite; read the design notes next.",
            ),
            an::block_stop(0),
            an::message_delta("end_turn", 40),
        ]);
    }
    pieces.push(an::message_stop());
    Reply::sse(pieces, Duration::ZERO)
}

/// One request as the server billed it.
#[derive(Debug, Clone)]
struct Billed {
    turn_idx: usize,
    n_responses: usize,
    usage: Usage,
    /// Tokens from the previous turn's input to the end (that turn's steps, the new input,
    /// its blocks, the new turn's steps so far): the new turn.
    new_turn_tokens: u64,
}

/// The usage of each response, as the provider decoded it and the harness stored it.
fn stored_usages(harness: &Harness<MemoryFs, Arc<dyn seed_providers::Provider>>) -> Vec<Usage> {
    harness
        .state()
        .entries
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::Assistant { message, .. } => Some(message.usage),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_ten_turn_session_reads_the_conversation_from_the_cache() {
    let cache = Arc::new(Mutex::new(PromptCache::default()));
    let new_turns = Arc::new(Mutex::new(Vec::new()));
    let server = SseServer::start_answering({
        let cache = Arc::clone(&cache);
        let new_turns = Arc::clone(&new_turns);
        move |received: &Received| {
            let billed = cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .answer(&received.body);
            let (turn_idx, _) = turn_of(&received.body);
            let blocks = prompt_blocks(&received.body);
            let new_turn_bytes: usize = match turn_idx.checked_sub(1) {
                Some(previous) => {
                    let previous_input = format!("Question {previous}:");
                    let from = blocks
                        .iter()
                        .position(|(text, _)| text.contains(&previous_input))
                        .unwrap_or(0);
                    blocks[from..].iter().map(|(text, _)| text.len()).sum()
                }
                None => blocks.iter().map(|(text, _)| text.len()).sum(),
            };
            new_turns
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(new_turn_bytes as u64 / 4);
            reply(&received.body, billed)
        }
    })
    .await
    .expect("the server starts");
    let config = ProviderConfig {
        provider: ProviderKind::Anthropic,
        base_url: Some(server.url.clone()),
        api_key: Some(seed_providers::ApiKey::new("test-key")),
        retry: RetryConfig {
            attempts_max: 1,
            ..RetryConfig::default()
        },
        ..ProviderConfig::default()
    };
    let mut harness_config = HarnessConfig::new("claude-test", "You are a test. Answer plainly.");
    harness_config.session_id = Some("session-cache".to_owned());
    harness_config.live_interval = Duration::ZERO;
    let mut harness = Harness::open(
        MemoryFs::new(),
        config.build().expect("the provider builds"),
        turn_loop::tools(),
        harness_config,
    )
    .await
    .expect("the harness opens");
    for turn_idx in 0..N_TURNS {
        let turn = TurnRequest {
            blocks: cache_turn_blocks(turn_idx),
            ..TurnRequest::new(format!("req-{turn_idx}"), input(turn_idx))
        };
        let outcome = harness.run_turn(turn).await.expect("the turn runs");
        assert!(
            matches!(outcome, TurnOutcome::Answered { .. }),
            "turn {turn_idx}: {outcome:?}"
        );
    }

    let received = server.received();
    let usages = stored_usages(&harness);
    let new_turns = new_turns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_eq!(usages.len(), received.len());
    let billed: Vec<Billed> = received
        .iter()
        .zip(usages)
        .zip(new_turns)
        .map(|((request, usage), new_turn_tokens)| {
            let (turn_idx, n_responses) = turn_of(&request.body);
            Billed {
                turn_idx,
                n_responses,
                usage,
                new_turn_tokens,
            }
        })
        .collect();
    let n_requests: usize = (0..N_TURNS).map(|turn_idx| n_rounds(turn_idx) + 1).sum();
    assert_eq!(billed.len(), n_requests, "{billed:#?}");

    let mut cache_read_before = 0;
    for request in &billed {
        let Billed {
            turn_idx,
            n_responses,
            usage,
            new_turn_tokens,
        } = request;
        let uncached = usage.input + usage.cache_write;
        let at = format!("turn {turn_idx}, request {n_responses}: {usage:?}");
        if *turn_idx == 0 {
            continue;
        }
        if *n_responses == 0 {
            // A turn's first request reads more than the last turn's first request did.
            assert!(usage.cache_read > cache_read_before, "{at}");
            cache_read_before = usage.cache_read;
        }
        // Rounding: each of the two figures loses less than a token.
        assert!(
            uncached <= new_turn_tokens + 2,
            "{at}: {uncached} tokens uncached, more than the new turn's {new_turn_tokens}"
        );
    }
    // By the last turn the conversation outweighs the new turn and its blocks.
    let last = billed.last().expect("requests");
    assert!(
        (last.usage.input + last.usage.cache_write) * 2 < last.usage.prompt_tokens(),
        "the last request sends most of its prompt uncached: {last:?}"
    );
}
