//! What the processes of one simulation run share (what survives a crash outside the
//! database: launches, the trace, the violations found so far), and the model's observer, which
//! sees every request before it is answered and checks the prompt-cache prefix.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use seed_durable::{DurableFs, FileName, StoreState};
use seed_events::SessionId;
use seed_providers::{Message, Request, ScriptedStep};
use seed_store::Store;

use crate::model::RunVerb;

/// The previous request of a session, for the prefix check.
pub(crate) struct LastRequest {
    /// The stretch the request was asked in: its process, the faults injected and the
    /// approvals decided before it.
    pub(crate) stretch: (usize, usize, usize),
    /// Where the turn's `<current_time>` block sits.
    pub(crate) turn_at: Option<usize>,
    pub(crate) depth: usize,
    /// Each message's hash, then the hash of the answer given.
    pub(crate) message_hashes: Vec<u64>,
    pub(crate) answer_hash: Option<u64>,
    /// System prompt and tools.
    pub(crate) frame_hash: u64,
}

/// What the processes of one run share: what survives a crash in the world outside the
/// database (launches, the trace), and what the model's observer needs.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) launches: Arc<Mutex<HashMap<(SessionId, String), usize>>>,
    /// Calls of the user's verbs, by name.
    pub(crate) verb_calls: Arc<Mutex<BTreeMap<String, usize>>>,
    pub(crate) trace: Mutex<DefaultHasher>,
    /// The running process's store, for the observer's check.
    pub(crate) store: Mutex<Option<Store>>,
    pub(crate) epoch_idx: Mutex<usize>,
    pub(crate) last_requests: Mutex<HashMap<String, LastRequest>>,
    pub(crate) violations: Mutex<Vec<String>>,
    pub(crate) n_requests: Mutex<usize>,
    pub(crate) n_faults: Mutex<usize>,
    /// Approvals a person decided.
    pub(crate) n_decisions: Mutex<usize>,
    /// Crash-point occurrences so far, and the one to crash at (exhaustive mode).
    pub(crate) hits: Mutex<usize>,
    pub(crate) crash_at: Option<usize>,
    /// This run's instances of the user's verbs.
    pub(crate) verbs: Arc<[RunVerb]>,
    /// How far apart the model's deltas come.
    pub(crate) delta_delay: Duration,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn hash_of(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

fn message_hash(message: &Message) -> u64 {
    hash_of(serde_json::to_string(message).unwrap_or_default())
}

impl Shared {
    pub(crate) fn note(&self, what: impl Hash) {
        what.hash(&mut *lock(&self.trace));
    }

    pub(crate) fn violation(&self, what: String) {
        lock(&self.violations).push(what);
    }

    /// Sees every model request before it is answered: checks that it carries every response
    /// its session already committed, and that within a turn each request extends the one
    /// before it byte for byte (the prompt-cache prefix).
    pub(crate) fn observe(&self, request: &Request, answer: &ScriptedStep) {
        *lock(&self.n_requests) += 1;
        let session = request.session_id.clone().unwrap_or_default();
        let message_hashes: Vec<u64> = request
            .messages
            .iter()
            .map(|message| message_hash(message))
            .collect();
        let frame_hash = hash_of((
            &request.system_prompt,
            serde_json::to_string(&*request.tools).unwrap_or_default(),
        ));
        let answer_message = match answer {
            ScriptedStep::Respond(message) => Some(message),
            _ => None,
        };
        let answer_hash =
            answer_message.map(|message| message_hash(&Message::Assistant(message.clone())));
        self.note(("request", &session, &message_hashes, frame_hash));

        // No committed response asked for again: every assistant message the session's store
        // holds in its context is in the request.
        let store = lock(&self.store).clone();
        if let (Some(store), Ok(id)) = (store, session.parse::<SessionId>()) {
            // Inline, the read is done by the time it is polled. Only the entries matter here.
            let entries =
                futures::executor::block_on(store.session_files(id).read(FileName::Entries));
            match entries
                .map_err(anyhow::Error::from)
                .and_then(|entries| Ok(StoreState::fold(&entries, &[], &[])?))
            {
                Err(error) => self.violation(format!(
                    "{session}: the store cannot be read at a model request: {error}"
                )),
                Ok(state) => {
                    let assistants = |messages: &mut dyn Iterator<Item = &Message>| {
                        messages
                            .filter(|message| matches!(message, Message::Assistant(_)))
                            .count()
                    };
                    let committed = seed_durable::context::conversation(&state.entries);
                    let n_committed = assistants(&mut committed.iter().map(|item| &*item.message));
                    let n_asked =
                        assistants(&mut request.messages.iter().map(|message| &**message));
                    if n_committed > n_asked {
                        self.violation(format!(
                            "{session}: a request carries {n_asked} responses while {n_committed} \
                         are committed: a committed response was asked for again"
                        ));
                    }
                }
            }
        }

        // Within a turn, a request extends the previous request and its answer. A turn's
        // requests carry its blocks right behind its input, `<current_time>` last; a new turn
        // (or pass) places its blocks further on.
        let turn_at = request.messages.iter().rposition(|message| {
            matches!(&**message, Message::User(user) if user.text.starts_with("<current_time>"))
        });
        let depth = turn_at.map_or(0, |at| {
            request.messages[at..]
                .iter()
                .filter(|message| matches!(&***message, Message::Assistant(_)))
                .count()
        });
        // A turn recovered, after a crash (a new process) or after a fault (its next attempt),
        // or resumed after a person's decision on a call it waited for, renders its blocks
        // afresh: requests are compared only within one stretch of none of these.
        let stretch = (
            *lock(&self.epoch_idx),
            *lock(&self.n_faults),
            *lock(&self.n_decisions),
        );
        let mut last_requests = lock(&self.last_requests);
        if let Some(last) = last_requests.get(&session)
            && last.stretch == stretch
            && turn_at.is_some()
            && last.turn_at == turn_at
            && depth == last.depth + 1
            && let Some(last_answer) = last.answer_hash
        {
            let mut expected = last.message_hashes.clone();
            expected.push(last_answer);
            if message_hashes.get(..expected.len()) != Some(&expected[..])
                || frame_hash != last.frame_hash
            {
                let at = expected
                    .iter()
                    .zip(&message_hashes)
                    .position(|(a, b)| a != b)
                    .unwrap_or(expected.len().min(message_hashes.len()));
                let shown = request
                    .messages
                    .get(at)
                    .map(|message| serde_json::to_string(message).unwrap_or_default())
                    .unwrap_or_default();
                self.violation(format!(
                    "{session}: request at depth {depth} of a turn does not extend the one \
                     before it (the prompt-cache prefix changed at message {at} of {}, \
                     expected {} messages; frame same: {}): {}",
                    message_hashes.len(),
                    expected.len(),
                    frame_hash == last.frame_hash,
                    shown.chars().take(300).collect::<String>()
                ));
                if std::env::var_os("SEED_SIM_VERBOSE").is_some() {
                    for (idx, message) in request.messages.iter().enumerate() {
                        let text = serde_json::to_string(message).unwrap_or_default();
                        eprintln!("  [{idx}] {}", text.chars().take(160).collect::<String>());
                    }
                }
            }
        }
        last_requests.insert(
            session,
            LastRequest {
                stretch,
                turn_at,
                depth,
                message_hashes,
                answer_hash: answer_message
                    .filter(|message| {
                        message.content.iter().any(|block| {
                            matches!(block, seed_providers::AssistantBlock::ToolCall { .. })
                        })
                    })
                    .and(answer_hash),
                frame_hash,
            },
        );
    }
}
