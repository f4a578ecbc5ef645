//! Where an Anthropic request carries the prompt cache's marks (`cache_control`).
//!
//! A mark asks the wire to cache the request's prefix up to and including the block it is on
//! (tools, then the system prompt, then the messages, in that order); a later request that
//! repeats that prefix byte for byte reads it from the cache at a tenth of the price, and one
//! that does not pays a quarter more for the write. So a mark belongs on the newest content the
//! next requests will repeat. The wire takes at most [`CACHE_MARKS_MAX`] marks, and looks for a
//! cached prefix only at a mark and about 20 blocks before it.
//!
//! The runtime sends a turn's requests as (`seed_durable::context::request_messages`):
//!
//! ```text
//! history (earlier turns, as stored) · the turn's input · its blocks · the turn's steps so far
//! ```
//!
//! where the blocks (`<space>`, `<plan_state>`, `<context_usage>`, `<session_status>`,
//! `<current_time>`, ...) are user messages rendered once per turn, sent with every request of
//! that turn and never stored, and a step is a response with the results of its calls. Hence
//! the marks:
//!
//! 1. The system prompt and the last tool: the same for every request of a session (and of
//!    sessions that share them).
//! 2. The turn's input, at its last block: the newest message that every later request repeats.
//!    The next turn sends it again without the blocks behind it, so nothing after it is
//!    settled for the turns to come. The input is found without knowing which messages are the
//!    blocks: it begins the last run of consecutive user messages (the input and the blocks
//!    behind it). When that run starts earlier (the input of a turn that failed, a replayed
//!    message), the mark lands there: settled too, it caches a little less. (When the input is
//!    not in the context, after a reset behind it, the blocks end the request and the mark
//!    lands on the first of them: a small write that is not read.)
//! 3. The turn's newest step, when the request has one: the next request of the turn repeats
//!    it, blocks and all (they do not change within a turn), so a turn of many calls reads its
//!    own earlier steps from the cache. A turn's first request has no step; its mark goes on
//!    the previous turn's input instead (mark 2 of that turn's requests), so the entry they
//!    wrote is found where it was written, even when that turn's steps span more blocks than
//!    the wire looks back from a mark.
//!
//! The turn's last step is written to the cache and never read (the next turn drops the blocks
//! before it); that is the price of caching a turn's steps for its own later requests.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::message::Message;

/// The most `cache_control` marks a request may carry: the wire refuses more.
pub const CACHE_MARKS_MAX: usize = 4;

/// The marks the conversation itself may use: the system prompt and the last tool take the
/// others.
pub const CONVERSATION_MARKS_MAX: usize = CACHE_MARKS_MAX - 2;

/// A mark: the prefix up to its block is cached for five minutes (each read renews it).
pub fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The indices in `messages` of the messages whose last block carries a mark (marks 2 and 3 of
/// the module's rule): the turn's input, then its newest step or else the previous turn's
/// input. At most [`CONVERSATION_MARKS_MAX`]; none without a user message.
pub fn conversation_marks(messages: &[Arc<Message>]) -> Vec<usize> {
    let is_user = |idx: usize| matches!(messages[idx].as_ref(), Message::User(_));
    // The first of the run of user messages that ends at `last`.
    let run_start = |last: usize| {
        let mut start = last;
        while start > 0 && is_user(start - 1) {
            start -= 1;
        }
        start
    };
    let Some(last_user) = (0..messages.len()).rev().find(|&idx| is_user(idx)) else {
        return Vec::new();
    };
    let input = run_start(last_user);
    let other = if last_user + 1 < messages.len() {
        // The turn's newest step.
        Some(messages.len() - 1)
    } else {
        // The previous turn's input: the start of the run of user messages before this one.
        (0..input).rev().find(|&idx| is_user(idx)).map(run_start)
    };
    let mut marks: Vec<usize> = std::iter::once(input).chain(other).collect();
    marks.sort_unstable();
    assert!(
        marks.len() <= CONVERSATION_MARKS_MAX,
        "conversation marks {marks:?}: more than {CONVERSATION_MARKS_MAX}"
    );
    marks
}

/// Whether the wire takes a mark on `block`: not on reasoning (thinking is cached with the
/// prefix it is in, but cannot carry a mark), nor on an empty text.
pub fn takes_mark(block: &Value) -> bool {
    match block["type"].as_str() {
        Some("thinking" | "redacted_thinking") => false,
        Some("text") => block["text"].as_str().is_some_and(|text| !text.is_empty()),
        _ => true,
    }
}
