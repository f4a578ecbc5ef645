//! The sockets of `/v1/subscribe`, by account. One task reads the runtime's bus, finds whose each
//! notification is, serializes it once and queues it for that account's sockets alone: another
//! account's traffic never reaches a socket's queue. Each queue is bounded; a socket that falls
//! that far behind (a client that stopped reading) is told to close, so a stalled client costs
//! the service at most one full queue. Sockets are capped per account and per bearer token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use seed_actors::bus::{Notification, Publisher};
use seed_events::{AccountId, SessionId};
use seed_store::Store;
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;

/// Updates one socket may have waiting by default.
pub const WS_QUEUE_MAX_DEFAULT: u32 = 256;
/// Sockets one account may hold by default.
pub const WS_PER_ACCOUNT_MAX_DEFAULT: u32 = 512;
/// Sockets one bearer token may hold by default.
pub const WS_PER_TOKEN_MAX_DEFAULT: u32 = 256;
/// How often a socket is pinged by default, in milliseconds.
pub const WS_PING_INTERVAL_MS_DEFAULT: u64 = 30_000;
/// How long, by default, the close frame of a socket the service closes waits for room in a
/// socket whose client reads nothing, in milliseconds.
pub const WS_CLOSE_WAIT_MS_DEFAULT: u64 = 5_000;
/// Sessions whose owner the forwarder remembers; past it, it forgets them all and asks again.
const OWNERS_CACHED_MAX: usize = 65_536;

/// The limits on subscribers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriberLimits {
    /// Updates one socket may have waiting to be sent; one more closes it.
    pub queue_max: usize,
    /// Sockets one account may hold at once; one more is refused (429).
    pub per_account_max: usize,
    /// Sockets one bearer token may hold at once; one more is refused (429).
    pub per_token_max: usize,
    /// How often each socket is pinged; a socket that has said nothing since the last ping
    /// when the next is due is closed.
    pub ping_interval: Duration,
    /// How long the close frame of a socket the service closes waits for room (its client may
    /// be reading nothing); past it the frame is given up.
    pub close_wait: Duration,
}

impl Default for SubscriberLimits {
    fn default() -> Self {
        SubscriberLimits {
            queue_max: WS_QUEUE_MAX_DEFAULT as usize,
            per_account_max: WS_PER_ACCOUNT_MAX_DEFAULT as usize,
            per_token_max: WS_PER_TOKEN_MAX_DEFAULT as usize,
            ping_interval: Duration::from_millis(WS_PING_INTERVAL_MS_DEFAULT),
            close_wait: Duration::from_millis(WS_CLOSE_WAIT_MS_DEFAULT),
        }
    }
}

/// Why the service closes a socket; the close frame carries its description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closing {
    /// The socket's queue was full: the client reads slower than its updates come.
    FellBehind { queue_max: usize },
    /// The bearer token it was opened with was revoked.
    TokenRevoked,
    /// The bearer token it was opened with expired.
    TokenExpired,
    /// The client answered no ping for a whole interval.
    NoPong { ping_interval_ms: u128 },
    /// The service is shutting down.
    Draining,
    /// The account was removed.
    AccountRemoved,
    /// The catch-up of the session the socket resumes could not be read.
    CatchUpFailed,
}

impl Closing {
    /// The close frame's code.
    pub fn code(&self) -> actix_ws::CloseCode {
        match self {
            Closing::FellBehind { .. } => actix_ws::CloseCode::Again,
            Closing::TokenRevoked
            | Closing::TokenExpired
            | Closing::NoPong { .. }
            | Closing::AccountRemoved => actix_ws::CloseCode::Policy,
            Closing::Draining => actix_ws::CloseCode::Away,
            Closing::CatchUpFailed => actix_ws::CloseCode::Error,
        }
    }

    /// The close frame's description (a close frame holds at most 123 bytes of it).
    pub fn description(&self) -> String {
        match self {
            Closing::FellBehind { queue_max } => format!(
                "fell behind: {queue_max} updates were waiting (ws_queue_max); subscribe again \
                 and re-read"
            ),
            Closing::TokenRevoked => "the token was revoked".to_owned(),
            Closing::TokenExpired => "the token expired".to_owned(),
            Closing::NoPong { ping_interval_ms } => {
                format!("no answer to a ping within {ping_interval_ms} ms")
            }
            Closing::Draining => "the service is shutting down".to_owned(),
            Closing::AccountRemoved => "the account was removed".to_owned(),
            Closing::CatchUpFailed => {
                "the session's catch-up could not be read; subscribe again".to_owned()
            }
        }
    }
}

/// Every open socket, by account.
#[derive(Debug)]
pub struct Subscribers {
    limits: SubscriberLimits,
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    next_id: u64,
    by_account: HashMap<AccountId, Vec<Entry>>,
    /// Open sockets per bearer token, for its cap.
    n_by_token: HashMap<String, usize>,
}

/// One socket, as the forwarder sees it.
#[derive(Debug)]
struct Entry {
    id: u64,
    token: Option<String>,
    /// Its queue of serialized updates, bounded by `queue_max`.
    queue: mpsc::Sender<Arc<str>>,
    /// Tells the socket to close, once; `None` once told, when nothing more is queued for it
    /// (it keeps its place among the account's sockets until its client goes away).
    close: Option<oneshot::Sender<Closing>>,
}

impl Entry {
    /// Tells the socket to close, saying why, unless it was told already.
    fn close(&mut self, closing: Closing) {
        if let Some(close) = self.close.take() {
            let _ = close.send(closing);
        }
    }
}

/// One socket's side: its updates, and why the service wants it closed. Dropping it leaves.
#[derive(Debug)]
pub struct Subscription {
    pub updates: mpsc::Receiver<Arc<str>>,
    pub closing: oneshot::Receiver<Closing>,
    _leave: Leave,
}

#[derive(Debug)]
struct Leave {
    subscribers: Arc<Subscribers>,
    account_id: AccountId,
    id: u64,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.subscribers.remove(self.account_id, self.id);
    }
}

impl Subscribers {
    pub fn new(limits: SubscriberLimits) -> Arc<Subscribers> {
        Arc::new(Subscribers {
            limits,
            registry: Mutex::default(),
        })
    }

    pub fn limits(&self) -> &SubscriberLimits {
        &self.limits
    }

    /// Opens a socket's subscription for `account_id` (with `token` when it was opened with a
    /// bearer token), or refuses it (429) when the account or the token holds its most.
    pub fn join(
        self: &Arc<Self>,
        account_id: AccountId,
        token: Option<&str>,
    ) -> Result<Subscription, ApiError> {
        let mut registry = self.lock();
        let n_account = registry.by_account.get(&account_id).map_or(0, Vec::len);
        if n_account >= self.limits.per_account_max {
            return Err(ApiError::TooMany(format!(
                "this account holds {} subscriptions, its most (ws_per_account_max); close one first",
                self.limits.per_account_max
            )));
        }
        if let Some(token) = token {
            let n_token = registry.n_by_token.get(token).copied().unwrap_or(0);
            if n_token >= self.limits.per_token_max {
                return Err(ApiError::TooMany(format!(
                    "this token holds {} subscriptions, its most (ws_per_token_max); close one first",
                    self.limits.per_token_max
                )));
            }
            *registry.n_by_token.entry(token.to_owned()).or_default() += 1;
        }
        let id = registry.next_id;
        registry.next_id += 1;
        let (queue, updates) = mpsc::channel(self.limits.queue_max.max(1));
        let (close, closing) = oneshot::channel();
        registry
            .by_account
            .entry(account_id)
            .or_default()
            .push(Entry {
                id,
                token: token.map(str::to_owned),
                queue,
                close: Some(close),
            });
        Ok(Subscription {
            updates,
            closing,
            _leave: Leave {
                subscribers: Arc::clone(self),
                account_id,
                id,
            },
        })
    }

    /// Queues `update` for each open socket of `account_id`. A socket whose queue is full is
    /// told to close, and nothing more is queued for it.
    pub fn deliver(&self, account_id: AccountId, update: &Arc<str>) {
        let mut registry = self.lock();
        let Some(entries) = registry.by_account.get_mut(&account_id) else {
            return;
        };
        for entry in entries.iter_mut().filter(|entry| entry.close.is_some()) {
            if let Err(mpsc::error::TrySendError::Full(_)) =
                entry.queue.try_send(Arc::clone(update))
            {
                tracing::info!(
                    %account_id,
                    queue_max = self.limits.queue_max,
                    "a subscriber fell behind: closing it"
                );
                entry.close(Closing::FellBehind {
                    queue_max: self.limits.queue_max,
                });
            }
        }
    }

    /// Closes every socket opened with `token`, saying why.
    pub fn close_token(&self, token: &str, closing: &Closing) {
        let mut registry = self.lock();
        for entry in registry.by_account.values_mut().flatten() {
            if entry.token.as_deref() == Some(token) {
                entry.close(closing.clone());
            }
        }
    }

    /// Closes every socket of `account_id`, saying why.
    pub fn close_account(&self, account_id: AccountId, closing: &Closing) {
        let mut registry = self.lock();
        for entry in registry
            .by_account
            .get_mut(&account_id)
            .into_iter()
            .flatten()
        {
            entry.close(closing.clone());
        }
    }

    /// Whether `account_id` holds a socket.
    pub fn is_subscribed(&self, account_id: AccountId) -> bool {
        self.lock().by_account.contains_key(&account_id)
    }

    /// Whether any socket is open.
    pub fn is_empty(&self) -> bool {
        self.lock().by_account.is_empty()
    }

    /// Open sockets, all accounts together.
    pub fn n_sockets(&self) -> usize {
        self.lock().by_account.values().map(Vec::len).sum()
    }

    fn remove(&self, account_id: AccountId, id: u64) {
        self.lock().remove(account_id, id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Registry {
    /// Takes a socket out; nothing when it is out already.
    fn remove(&mut self, account_id: AccountId, id: u64) {
        let Some(entries) = self.by_account.get_mut(&account_id) else {
            return;
        };
        let Some(position) = entries.iter().position(|entry| entry.id == id) else {
            return;
        };
        let entry = entries.swap_remove(position);
        if entries.is_empty() {
            self.by_account.remove(&account_id);
        }
        if let Some(token) = entry.token
            && let Some(n) = self.n_by_token.get_mut(&token)
        {
            *n -= 1;
            if *n == 0 {
                self.n_by_token.remove(&token);
            }
        }
    }
}

/// Reads the runtime's bus for as long as it runs and queues each notification, serialized
/// once, for its account's sockets.
pub async fn forward(subscribers: Arc<Subscribers>, publisher: Publisher, store: Store) {
    let Some(mut bus) = publisher.subscribe().await else {
        return;
    };
    let mut owners: HashMap<SessionId, AccountId> = HashMap::new();
    while let Some(notification) = bus.next().await {
        if subscribers.is_empty() {
            continue;
        }
        let account_id = match &notification {
            Notification::AccountChanged { account_id, .. } => *account_id,
            Notification::SessionDeleted {
                account_id,
                session_id,
            } => {
                owners.remove(session_id);
                *account_id
            }
            Notification::SessionChanged { session_id, .. }
            | Notification::TextDelta { session_id, .. }
            | Notification::ToolCall { session_id, .. }
            | Notification::ApprovalPending { session_id, .. }
            | Notification::ElicitationPending { session_id, .. }
            | Notification::RunFinished { session_id, .. } => match owners.get(session_id) {
                Some(owner) => *owner,
                None => {
                    let Some(owner) = crate::api::session_owner(&store, *session_id).await else {
                        continue;
                    };
                    if owners.len() >= OWNERS_CACHED_MAX {
                        owners.clear();
                    }
                    owners.insert(*session_id, owner);
                    owner
                }
            },
        };
        if !subscribers.is_subscribed(account_id) {
            continue;
        }
        let Ok(text) = serde_json::to_string(&crate::ws::Update::of(notification)) else {
            continue;
        };
        subscribers.deliver(account_id, &Arc::from(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(queue_max: usize, per_account_max: usize, per_token_max: usize) -> SubscriberLimits {
        SubscriberLimits {
            queue_max,
            per_account_max,
            per_token_max,
            ..SubscriberLimits::default()
        }
    }

    fn update(text: &str) -> Arc<str> {
        Arc::from(text)
    }

    #[test]
    fn an_account_s_updates_reach_its_sockets_alone() {
        let subscribers = Subscribers::new(limits(4, 4, 4));
        let alice = AccountId::from_u128(1);
        let bob = AccountId::from_u128(2);
        let mut alice_socket = subscribers.join(alice, None).expect("joins");
        let mut bob_socket = subscribers.join(bob, None).expect("joins");
        subscribers.deliver(bob, &update("for bob"));
        subscribers.deliver(alice, &update("for alice"));
        assert_eq!(
            alice_socket.updates.try_recv().ok().as_deref(),
            Some("for alice")
        );
        assert!(alice_socket.updates.try_recv().is_err(), "nothing else");
        assert_eq!(
            bob_socket.updates.try_recv().ok().as_deref(),
            Some("for bob")
        );
    }

    #[test]
    fn a_socket_that_falls_a_queue_behind_is_told_to_close_and_queued_nothing_more() {
        let subscribers = Subscribers::new(limits(3, 4, 4));
        let account = AccountId::from_u128(1);
        let mut stalled = subscribers.join(account, None).expect("joins");
        let mut reading = subscribers.join(account, None).expect("joins");
        for n in 0..3 {
            subscribers.deliver(account, &update(&n.to_string()));
            assert_eq!(
                reading.updates.try_recv().ok().as_deref(),
                Some(n.to_string().as_str())
            );
            assert!(stalled.closing.try_recv().is_err(), "open after {n}");
        }
        subscribers.deliver(account, &update("one too many"));
        assert_eq!(
            stalled.closing.try_recv().ok(),
            Some(Closing::FellBehind { queue_max: 3 })
        );
        assert_eq!(
            subscribers.n_sockets(),
            2,
            "the stalled socket keeps its place until it goes"
        );
        subscribers.deliver(account, &update("later"));
        let queued: Vec<String> = std::iter::from_fn(|| stalled.updates.try_recv().ok())
            .map(|text| text.to_string())
            .collect();
        assert_eq!(queued, ["0", "1", "2"], "its queue held 3, no more");
        assert_eq!(
            reading.updates.try_recv().ok().as_deref(),
            Some("one too many")
        );
        assert_eq!(reading.updates.try_recv().ok().as_deref(), Some("later"));
        drop(stalled);
        assert_eq!(subscribers.n_sockets(), 1, "gone, it frees its place");
    }

    #[test]
    fn sockets_are_capped_per_account_and_per_token_and_leaving_frees_a_place() {
        let subscribers = Subscribers::new(limits(4, 3, 2));
        let account = AccountId::from_u128(1);
        let first = subscribers.join(account, Some("t")).expect("joins");
        let _second = subscribers.join(account, Some("t")).expect("joins");
        let refused = subscribers
            .join(account, Some("t"))
            .expect_err("over the token's cap");
        assert!(
            refused.to_string().contains("ws_per_token_max"),
            "{refused}"
        );
        let _signed = subscribers.join(account, None).expect("another way in");
        let refused = subscribers
            .join(account, None)
            .expect_err("over the account's cap");
        assert!(
            refused.to_string().contains("ws_per_account_max"),
            "{refused}"
        );
        assert!(
            subscribers.join(AccountId::from_u128(2), Some("u")).is_ok(),
            "another account has its own"
        );
        drop(first);
        assert!(
            subscribers.join(account, Some("t")).is_ok(),
            "a place was freed"
        );
    }

    #[test]
    fn a_revoked_token_closes_its_sockets_alone() {
        let subscribers = Subscribers::new(limits(4, 4, 1));
        let account = AccountId::from_u128(1);
        let mut revoked = subscribers.join(account, Some("t")).expect("joins");
        let mut other = subscribers.join(account, Some("u")).expect("joins");
        subscribers.close_token("t", &Closing::TokenRevoked);
        assert_eq!(revoked.closing.try_recv().ok(), Some(Closing::TokenRevoked));
        assert!(other.closing.try_recv().is_err());
        assert!(
            subscribers.join(account, Some("t")).is_err(),
            "a closed socket keeps its place until its client goes"
        );
        drop(revoked);
        assert!(
            subscribers.join(account, Some("t")).is_ok(),
            "the count of a closed token's sockets is back to none"
        );
    }

    #[test]
    fn every_close_description_fits_a_close_frame() {
        for closing in [
            Closing::FellBehind {
                queue_max: usize::MAX,
            },
            Closing::TokenRevoked,
            Closing::TokenExpired,
            Closing::NoPong {
                ping_interval_ms: u128::from(u64::MAX),
            },
            Closing::Draining,
            Closing::CatchUpFailed,
        ] {
            assert!(closing.description().len() <= 123, "{closing:?}");
        }
    }
}
