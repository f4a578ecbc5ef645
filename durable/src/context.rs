//! What the model sees: the conversation derived from the entries, and a request's messages.
//!
//! Pure: entries in, messages out. The rules, from the spec and the durable layer's design:
//! the context is every entry since the newest `pi.reset`; an edit replaces what its target
//! contributes; a response that did not complete (stopped, failed) is left out; tool results
//! are placed right behind their call, a call without one gets a synthesized error result, and
//! a result without its call is dropped — so a request never carries an orphan.
//!
//! Messages are shared (`Arc`): a [`MessageCache`] keeps each entry's message for as long as it
//! is in the context, so a request of a long session costs a reference per message, not a copy.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use seed_providers::{
    AssistantBlock, AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage,
};

use crate::record::{Entry, EntryBody, EntryId};

/// One message of the context, with the entry it came from (for a tool result: its own entry,
/// or its call's entry when it was synthesized).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextMessage {
    pub entry_id: EntryId,
    pub message: Arc<Message>,
}

/// The text of the result given to a call that has none in the context.
pub const MISSING_RESULT: &str = "no result was recorded for this call";

/// Each entry's message, built once and shared by every request while it is in the context.
/// Entries are immutable, so an entry id always maps to the same message.
#[derive(Debug, Clone, Default)]
pub struct MessageCache {
    /// The entry id of `slots[0]`.
    base_id: EntryId,
    /// Each entry's message from `base_id` on, built when first asked for.
    slots: VecDeque<Option<Arc<Message>>>,
    /// The settled start of the last conversation, reused while only entries behind it are new.
    settled: Option<Settled>,
}

/// The start of a conversation that entries appended later cannot change: every call in it has
/// its result in it, so a later result can only belong to a later call. It stays settled until
/// a reset starts a new window or an edit replaces one of its entries.
#[derive(Debug, Clone)]
struct Settled {
    /// The index of the window's first entry in the entries, and that entry's id.
    window_start: usize,
    first_id: EntryId,
    /// The settled entries are those from `window_start` to `end` (an index in the entries);
    /// `last_id` is the id of the one before `end`, `None` while none is settled.
    end: usize,
    last_id: Option<EntryId>,
    /// What those entries contribute to the conversation.
    context: Vec<ContextMessage>,
}

impl Settled {
    /// Whether `entries` are the ones this was settled from, with only entries appended behind
    /// it that leave it as it is: no reset, no edit of an entry before them, ids still rising.
    fn holds_for(&self, entries: &[Entry]) -> bool {
        if entries.get(self.window_start).map(|first| first.id) != Some(self.first_id) {
            return false;
        }
        if let Some(last_id) = self.last_id
            && entries.get(self.end - 1).map(|last| last.id) != Some(last_id)
        {
            return false;
        }
        let mut previous_id = self.last_id;
        entries[self.end..].iter().all(|entry| {
            let rising = previous_id.is_none_or(|previous| entry.id > previous);
            previous_id = Some(entry.id);
            rising
                && match &entry.body {
                    EntryBody::Reset {} => false,
                    // An edit of a settled entry changes what it contributes.
                    EntryBody::Edit { target, .. } => {
                        self.last_id.is_none_or(|last_id| *target > last_id)
                    }
                    _ => true,
                }
        })
    }
}

impl MessageCache {
    /// Makes sure the cache holds the message `entry` carries of its own (an edit's
    /// replacement for an edit), if it has one.
    fn fill(&mut self, entry: &Entry) {
        if entry.id < self.base_id {
            // An id below the window's first, which a store never writes: the slots reach down
            // to it.
            let n_below = usize::try_from(self.base_id - entry.id).unwrap_or(usize::MAX);
            for _ in 0..n_below {
                self.slots.push_front(None);
            }
            self.base_id = entry.id;
        }
        let Ok(idx) = usize::try_from(entry.id - self.base_id) else {
            return;
        };
        if matches!(self.slots.get(idx), Some(Some(_))) {
            return;
        }
        let Some(message) = own_message(entry) else {
            return;
        };
        if self.slots.len() <= idx {
            self.slots.resize(idx + 1, None);
        }
        self.slots[idx] = Some(Arc::new(message));
    }

    /// The message of entry `id`, once [`MessageCache::fill`] put it there.
    fn get(&self, id: EntryId) -> Option<&Arc<Message>> {
        let idx = usize::try_from(id.checked_sub(self.base_id)?).ok()?;
        self.slots.get(idx)?.as_ref()
    }

    /// Forgets the messages of entries before `first_id`: they left the context.
    fn forget_before(&mut self, first_id: EntryId) {
        if first_id < self.base_id {
            self.slots.clear();
        } else {
            let gone = usize::try_from(first_id - self.base_id).unwrap_or(usize::MAX);
            self.slots.drain(..gone.min(self.slots.len()));
        }
        self.base_id = first_id;
    }
}

/// The message an entry carries of its own (an edit's replacement for an edit), if any.
fn own_message(entry: &Entry) -> Option<Message> {
    Some(match &entry.body {
        EntryBody::User { message, .. } => Message::User(message.clone()),
        EntryBody::Assistant { message, .. } => Message::Assistant(message.clone()),
        EntryBody::ToolResult { message, .. } => Message::ToolResult(message.clone()),
        EntryBody::Replay { message } | EntryBody::Edit { message, .. } => message.clone(),
        EntryBody::System { .. } | EntryBody::Reset {} => return None,
    })
}

/// An assistant message's tool calls, in order, without collecting them.
fn calls_of(assistant: &AssistantMessage) -> impl Iterator<Item = &ToolCall> + Clone {
    assistant.content.iter().filter_map(|block| match block {
        AssistantBlock::ToolCall(call) => Some(call),
        _ => None,
    })
}

/// The conversation the model sees, derived from the store's entries, with a throwaway cache.
pub fn conversation(entries: &[Entry]) -> Vec<ContextMessage> {
    conversation_cached(entries, &mut MessageCache::default())
}

/// The conversation the model sees, sharing messages through `cache`.
///
/// A harness asks again with the same entries and more behind them, so the cache keeps the
/// conversation's settled start (`Settled`) and places only the entries after it: a request
/// of a long session costs a reference per message of the settled start, not the placing of
/// every entry again. Anything else (a reset, an edit of a settled entry, other entries) places
/// the whole window.
pub fn conversation_cached(entries: &[Entry], cache: &mut MessageCache) -> Vec<ContextMessage> {
    let mut settled = match cache.settled.take() {
        Some(settled) if settled.holds_for(entries) => settled,
        _ => {
            // A new window: from the newest reset on, nothing of it settled yet.
            let window_start = entries
                .iter()
                .rposition(|entry| matches!(entry.body, EntryBody::Reset {}))
                .map_or(0, |reset_idx| reset_idx + 1);
            let Some(first) = entries.get(window_start) else {
                return Vec::new();
            };
            cache.forget_before(first.id);
            Settled {
                window_start,
                first_id: first.id,
                end: window_start,
                last_id: None,
                context: Vec::new(),
            }
        }
    };
    let (rest, rest_settled) = place(&entries[settled.end..], cache);
    let mut context = Vec::with_capacity(settled.context.len() + rest.len());
    context.extend(settled.context.iter().cloned());
    if let Some((n_entries, n_messages)) = rest_settled
        && n_entries > 0
    {
        settled.context.extend(rest[..n_messages].iter().cloned());
        settled.end += n_entries;
        settled.last_id = Some(entries[settled.end - 1].id);
    }
    context.extend(rest);
    cache.settled = Some(settled);
    context
}

/// Places the messages of `window` (entries with no reset among them): the conversation they
/// make, and how much of it is settled, as (entries, messages) from its start. `None` when
/// nothing can be: ids that do not rise, or an edit of an entry after itself (neither of which
/// a store writes).
fn place<'e>(
    window: &'e [Entry],
    cache: &mut MessageCache,
) -> (Vec<ContextMessage>, Option<(usize, usize)>) {
    let Some(first) = window.first() else {
        return (Vec::new(), Some((0, 0)));
    };
    // What each entry contributes: its own message, or the newest edit's.
    let mut edits: BTreeMap<EntryId, EntryId> = BTreeMap::new();
    let mut settles = true;
    let mut previous_id = None;
    for entry in window {
        settles &= previous_id.is_none_or(|previous| entry.id > previous);
        previous_id = Some(entry.id);
        if let EntryBody::Edit { target, .. } = &entry.body {
            settles &= *target < entry.id;
            edits.insert(*target, entry.id);
        }
    }
    let first_id = first.id;
    let by_id = |id: EntryId| window.get(usize::try_from(id.checked_sub(first_id)?).ok()?);
    // Whose message each entry contributes: its own, or its newest edit's.
    let source = |entry: &'e Entry| -> Option<&'e Entry> {
        if matches!(entry.body, EntryBody::Edit { .. }) {
            return None;
        }
        Some(
            edits
                .get(&entry.id)
                .and_then(|edit_id| by_id(*edit_id))
                .unwrap_or(entry),
        )
    };
    for entry in window {
        if let Some(source) = source(entry) {
            cache.fill(source);
        }
    }
    let cache = &*cache;
    // Each contribution, with the index of its entry in the window.
    let mut contributions: Vec<(EntryId, &Arc<Message>)> = Vec::with_capacity(window.len());
    let mut positions: Vec<usize> = Vec::with_capacity(window.len());
    for (entry_idx, entry) in window.iter().enumerate() {
        if let Some(message) = source(entry).and_then(|source| cache.get(source.id)) {
            contributions.push((entry.id, message));
            positions.push(entry_idx);
        }
    }

    let mut results = Results::default();
    let mut context = Vec::with_capacity(contributions.len());
    // The settled start so far, as (entries, messages); `reach`: one past the furthest
    // contribution a call placed so far took its result from. The start up to a contribution
    // is settled when no call before it took a result from it or later, and none went without.
    let mut settled = Some((0, 0));
    let mut reach = 0;
    let mut unanswered = false;
    for (idx, (entry_id, message)) in contributions.iter().enumerate() {
        if !unanswered && reach <= idx {
            settled = Some((positions[idx], context.len()));
        }
        match message.as_ref() {
            Message::ToolResult(_) => {}
            Message::User(_) => context.push(ContextMessage {
                entry_id: *entry_id,
                message: Arc::clone(message),
            }),
            Message::Assistant(assistant) => {
                if !assistant.is_complete() {
                    continue;
                }
                context.push(ContextMessage {
                    entry_id: *entry_id,
                    message: Arc::clone(message),
                });
                let calls = calls_of(assistant);
                if results.follow_in_order(&contributions, idx, calls.clone()) {
                    // The common case: each call's result is recorded right behind it, in order.
                    for (offset, _) in calls.enumerate() {
                        let (result_entry_id, result) = &contributions[idx + 1 + offset];
                        context.push(ContextMessage {
                            entry_id: *result_entry_id,
                            message: Arc::clone(result),
                        });
                        reach = reach.max(idx + 2 + offset);
                    }
                    continue;
                }
                for call in calls {
                    let item = match results.take_first_after(&contributions, idx, &call.id) {
                        Some(result_idx) => {
                            reach = reach.max(result_idx + 1);
                            let (result_entry_id, result) = &contributions[result_idx];
                            ContextMessage {
                                entry_id: *result_entry_id,
                                message: Arc::clone(result),
                            }
                        }
                        None => {
                            unanswered = true;
                            missing_result(*entry_id, call)
                        }
                    };
                    context.push(item);
                }
            }
        }
    }
    if !unanswered && reach <= contributions.len() {
        settled = Some((window.len(), context.len()));
    }
    (context, settled.filter(|_| settles))
}

/// The result given to `call` of the response `entry_id` when the context has none for it.
fn missing_result(entry_id: EntryId, call: &ToolCall) -> ContextMessage {
    ContextMessage {
        entry_id,
        message: Arc::new(Message::ToolResult(ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: MISSING_RESULT.to_owned(),
            is_error: true,
            images: Vec::new(),
        })),
    }
}

/// Which tool result each call takes: the first one recorded after the call with the call's
/// id that no earlier call took, so a call id used again by a later response gets its own
/// result. Results are indexed by their position in the contributions, which are in entry
/// order. The index by call id is built only when some response's results are not simply
/// recorded right behind it in call order.
#[derive(Default)]
struct Results<'a> {
    /// The positions of each call id's results, in order; those before the response being
    /// placed, or taken, are popped as they are passed.
    by_call_id: Option<BTreeMap<&'a str, VecDeque<usize>>>,
    /// The results taken through `by_call_id`, by position.
    taken: Vec<bool>,
}

impl<'a> Results<'a> {
    /// Whether the calls of the response at `idx` have their results right behind it, in call
    /// order, none of them taken already. Then the first untaken result after the response for
    /// each call is exactly that one, and the placing below would pick the same.
    fn follow_in_order<'c>(
        &self,
        contributions: &[(EntryId, &Arc<Message>)],
        idx: usize,
        calls: impl Iterator<Item = &'c ToolCall> + Clone,
    ) -> bool {
        let n_calls = calls.clone().count();
        let Some(following) = contributions.get(idx + 1..idx + 1 + n_calls) else {
            return false;
        };
        following
            .iter()
            .zip(calls)
            .enumerate()
            .all(|(offset, ((_, message), call))| {
                !self.taken.get(idx + 1 + offset).copied().unwrap_or(false)
                    && matches!(message.as_ref(),
                        Message::ToolResult(result) if result.tool_call_id == call.id)
            })
    }

    /// Takes the first untaken result for `call_id` recorded after the response at `idx`.
    fn take_first_after(
        &mut self,
        contributions: &[(EntryId, &'a Arc<Message>)],
        idx: usize,
        call_id: &str,
    ) -> Option<usize> {
        let by_call_id = self.by_call_id.get_or_insert_with(|| {
            let mut by_call_id: BTreeMap<&str, VecDeque<usize>> = BTreeMap::new();
            for (position, &(_, message)) in contributions.iter().enumerate() {
                let message: &'a Message = message;
                if let Message::ToolResult(result) = message {
                    by_call_id
                        .entry(result.tool_call_id.as_str())
                        .or_default()
                        .push_back(position);
                }
            }
            by_call_id
        });
        if self.taken.is_empty() {
            self.taken = vec![false; contributions.len()];
        }
        let queue = by_call_id.get_mut(call_id)?;
        // Results recorded before this response belong to an earlier call, as do those taken.
        while queue
            .front()
            .is_some_and(|&position| position < idx || self.taken[position])
        {
            queue.pop_front();
        }
        let position = queue.pop_front()?;
        self.taken[position] = true;
        Some(position)
    }
}

/// A request's messages: the conversation, with this turn's state blocks placed right behind
/// the turn's input (they are rendered once per turn, sent with every request, never stored).
pub fn request_messages(
    context: Vec<ContextMessage>,
    input_entry_id: EntryId,
    blocks: &[Arc<Message>],
) -> Vec<Arc<Message>> {
    let mut messages = Vec::with_capacity(context.len() + blocks.len());
    let mut blocks_placed = blocks.is_empty();
    for item in context {
        let is_input = item.entry_id == input_entry_id;
        messages.push(item.message);
        if !blocks_placed && is_input {
            messages.extend(blocks.iter().cloned());
            blocks_placed = true;
        }
    }
    if !blocks_placed {
        messages.extend(blocks.iter().cloned());
    }
    messages
}

/// Turns per-turn blocks into the shared messages every request of the turn carries.
pub fn block_messages(blocks: &[UserMessage]) -> Vec<Arc<Message>> {
    blocks
        .iter()
        .map(|block| Arc::new(Message::User(block.clone())))
        .collect()
}

/// Whether a context is malformed: a tool call not followed by exactly one result for it, or a
/// result not right behind its call. Used by tests and assertions.
pub fn has_orphans<'a, M>(messages: impl IntoIterator<Item = &'a M>) -> bool
where
    M: AsRef<Message> + 'a,
{
    let mut open_calls: Vec<String> = Vec::new();
    for message in messages {
        match message.as_ref() {
            Message::ToolResult(result) => {
                if open_calls.first() != Some(&result.tool_call_id) {
                    return true;
                }
                open_calls.remove(0);
            }
            other => {
                if !open_calls.is_empty() {
                    return true;
                }
                if let Message::Assistant(assistant) = other {
                    open_calls = assistant
                        .tool_calls()
                        .into_iter()
                        .map(|call| call.id.clone())
                        .collect();
                }
            }
        }
    }
    !open_calls.is_empty()
}

#[cfg(test)]
mod tests;
