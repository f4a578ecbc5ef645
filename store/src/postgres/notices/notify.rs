//! Sending notices: [`notify_sql`], the statements the writer runs inside the transaction whose
//! commit a notice tells of, and [`Notifier`], a connection of its own that sends each notice at
//! once.

use std::fmt;
use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_postgres::{Client, NoTls, Statement};

use super::{Notice, RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN, TooLong};
use crate::{Error, Result};

/// One notification to send: run [`Notify::SQL`] with [`Notify::params`]. Run inside a
/// transaction, it is delivered when the transaction commits, and never if it rolls back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    pub channel: String,
    pub payload: String,
}

impl Notify {
    /// The statement; its parameters are the channel and the payload, both text.
    pub const SQL: &'static str = "SELECT pg_notify($1, $2)";

    /// The statement's parameters, in order.
    pub fn params(&self) -> [&str; 2] {
        [&self.channel, &self.payload]
    }
}

/// The notifications that send `notice` from `origin` on `channel`, in order: one each of its
/// [payloads](Notice::payloads).
pub fn notify_sql(channel: &str, origin: &str, notice: &Notice) -> Result<Vec<Notify>, TooLong> {
    Ok(notice
        .payloads(origin)?
        .into_iter()
        .map(|payload| Notify {
            channel: channel.to_owned(),
            payload,
        })
        .collect())
}

/// Why a notice was not sent.
#[derive(Debug, thiserror::Error)]
pub enum Unsent {
    #[error(transparent)]
    TooLong(#[from] TooLong),
    /// The connection is lost, or could not be made again yet; the notice is lost, and the
    /// next one sent is preceded by a [`Notice::Missed`].
    #[error("the notices' sending connection is lost: {0}")]
    Lost(String),
}

/// Sends notices from one node on a connection of its own, outside any transaction, so each is
/// delivered at once, in the order they are sent (one sender: its receivers hear them in that
/// order); a [`Batch`] of them goes in one statement. A lost connection is made again at a later send, no sooner than a backoff after the
/// last failed attempt; what could not be sent meanwhile is lost, and the first notice sent
/// after it is a [`Notice::Missed`], so receivers resync. Used inside a tokio runtime, which
/// drives the connection.
pub struct Notifier {
    config: tokio_postgres::Config,
    channel: String,
    origin: String,
    /// The connection, and [`SEND_SQL`] prepared on it: parsed and planned once, not at every
    /// batch.
    client: Option<(Client, Statement)>,
    /// Notices were lost since the last one sent.
    missed: bool,
    /// When the next attempt to connect may be made, and the wait after it fails.
    retry: Option<(tokio::time::Instant, Duration)>,
    n_sent: Arc<Sent>,
}

/// The statement a [`Batch`] is sent with: a notification for each payload of the array, in
/// the array's order (a scan of `unnest` yields its elements in order, and each row's
/// `pg_notify` runs as the row is read).
const SEND_SQL: &str = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload";

/// Notices from one origin encoded to be sent together, in the order they were added
/// ([`Notifier::batch`], [`Notifier::send_batch`]).
#[derive(Debug)]
pub struct Batch {
    origin: String,
    payloads: Vec<String>,
    notices: usize,
}

impl Batch {
    /// An empty batch of notices from `origin` (see [`Notice::payloads`] for what an origin
    /// may hold).
    pub fn new(origin: &str) -> Batch {
        Batch {
            origin: origin.to_owned(),
            payloads: Vec::new(),
            notices: 0,
        }
    }

    /// Adds `notice`: all its payloads, after what the batch holds; or, when it is too long,
    /// nothing.
    pub fn add(&mut self, notice: &Notice) -> Result<(), TooLong> {
        self.payloads.extend(notice.payloads(&self.origin)?);
        self.notices += 1;
        Ok(())
    }

    /// How many notices the batch holds.
    pub fn len(&self) -> usize {
        self.notices
    }

    /// Whether the batch holds no notice.
    pub fn is_empty(&self) -> bool {
        self.notices == 0
    }

    /// The payloads the batch sends, in order.
    pub fn payloads(&self) -> &[String] {
        &self.payloads
    }
}

/// What a [`Notifier`] has sent: its notices, and the statements that carried them. Shared
/// ([`Notifier::sent`]), so that whoever made the notifier reads it while a task sends.
#[derive(Debug, Default)]
pub struct Sent {
    notices: AtomicU64,
    statements: AtomicU64,
}

impl Sent {
    /// The notices sent.
    pub fn notices(&self) -> u64 {
        self.notices.load(Ordering::Relaxed)
    }

    /// The statements (each its own transaction) that carried them.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier")
            .field("channel", &self.channel)
            .field("origin", &self.origin)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// Connects to the database `url` names, to send on `channel` as `origin` (see
    /// [`Notice::payloads`] for what an origin may hold).
    pub async fn connect(url: &str, channel: &str, origin: &str) -> Result<Notifier> {
        let mut config = tokio_postgres::Config::from_str(url).map_err(Error::Postgres)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(crate::postgres::CONNECT_TIMEOUT);
        }
        let mut notifier = Notifier {
            config,
            channel: channel.to_owned(),
            origin: origin.to_owned(),
            client: None,
            missed: false,
            retry: None,
            n_sent: Arc::default(),
        };
        notifier.client = Some(notifier.open().await.map_err(Error::Postgres)?);
        Ok(notifier)
    }

    async fn open(&self) -> Result<(Client, Statement), tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(connection);
        let types = [
            tokio_postgres::types::Type::TEXT,
            tokio_postgres::types::Type::TEXT_ARRAY,
        ];
        let statement = client.prepare_typed(SEND_SQL, &types).await?;
        Ok((client, statement))
    }

    /// Sends `notice`: all its payloads, in order. A notice too long is refused and nothing
    /// is sent.
    pub async fn send(&mut self, notice: &Notice) -> Result<(), Unsent> {
        let mut batch = self.batch();
        batch.add(notice)?;
        self.send_batch(batch).await
    }

    /// An empty batch of this notifier's notices.
    pub fn batch(&self) -> Batch {
        Batch::new(&self.origin)
    }

    /// Sends every notice in `batch`, in the order they were added, in one statement: one
    /// transaction, one round trip, and one wake-up of each listening connection, however
    /// many notices it holds. PostgreSQL delivers one of several identical notices a
    /// transaction sends; two notices alike tell the same thing (a change to re-read, a run's
    /// end), and two pieces of text are never alike (each carries its offset), so nothing is
    /// lost by it. An empty batch sends nothing.
    pub async fn send_batch(&mut self, batch: Batch) -> Result<(), Unsent> {
        debug_assert_eq!(
            batch.origin, self.origin,
            "a batch of this notifier's origin"
        );
        if batch.payloads.is_empty() {
            return Ok(());
        }
        self.connect_again().await?;
        let mut payloads = batch.payloads;
        if self.missed {
            let missed = Notice::Missed.payloads(&self.origin)?;
            payloads.splice(0..0, missed);
        }
        let (client, statement) = self.client.as_ref().expect("connected just above");
        if let Err(error) = client.execute(statement, &[&self.channel, &payloads]).await {
            self.client = None;
            self.missed = true;
            return Err(Unsent::Lost(crate::postgres::describe(&error)));
        }
        self.missed = false;
        self.n_sent
            .notices
            .fetch_add(batch.notices as u64, Ordering::Relaxed);
        self.n_sent.statements.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// What this notifier has sent, counted as it sends.
    pub fn sent(&self) -> Arc<Sent> {
        Arc::clone(&self.n_sent)
    }

    /// Makes the connection again when it was lost and the backoff allows.
    async fn connect_again(&mut self) -> Result<(), Unsent> {
        if self
            .client
            .as_ref()
            .is_some_and(|(client, _)| client.is_closed())
        {
            self.client = None;
            self.missed = true;
        }
        if self.client.is_none() {
            if let Some((at, _)) = self.retry
                && tokio::time::Instant::now() < at
            {
                self.missed = true;
                return Err(Unsent::Lost("waiting to connect again".to_owned()));
            }
            match self.open().await {
                Ok(client) => {
                    self.retry = None;
                    self.client = Some(client);
                }
                Err(error) => {
                    let backoff = match self.retry {
                        Some((_, backoff)) => (backoff * 2).min(RECONNECT_BACKOFF_MAX),
                        None => RECONNECT_BACKOFF_MIN,
                    };
                    self.retry = Some((tokio::time::Instant::now() + backoff, backoff));
                    self.missed = true;
                    return Err(Unsent::Lost(crate::postgres::describe(&error)));
                }
            }
        }
        Ok(())
    }
}
