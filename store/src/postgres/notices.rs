//! Notices between nodes over PostgreSQL's LISTEN/NOTIFY: what one node tells the others about
//! a session (events committed, text of a run in flight, a run finished, a session changed),
//! so that a subscriber on any node follows a turn that runs on another.
//!
//! Three parts:
//! - [`Notice`] and its wire form, pure and without IO: [`Notice::payloads`] encodes one,
//!   [`Notice::decode`] reads one back.
//! - [`notify_sql`]: the statements that send a notice, as plain data, for the writer to run
//!   inside the transaction whose commit the notice tells of. PostgreSQL delivers a
//!   notification at commit, and only if the transaction commits.
//! - [`Listener`]: a connection of its own that `LISTEN`s on a channel and yields what it hears,
//!   in the order PostgreSQL delivers it (the order of the commits), with a [`Gap`] wherever
//!   something may have been missed.
//!
//! The wire form is one line of fields separated by a space. It starts with the node that sent
//! it (its origin, so a node can tell its own notices from its peers'), then the notice's kind
//! and fields; the last field of a `delta`, a `changed`, an `account` and of the calls takes
//! the rest of the payload, spaces and newlines included:
//!
//! ```text
//! <origin> events <session key> <from seq> <to seq>
//! <origin> delta <session id> <run id> <offset bytes> <chunk>
//! <origin> finished <session id> <run id> <status>
//! <origin> changed <session id> <from seq>:<to seq> or - <reason>
//! <origin> deleted <session id> <account id>
//! <origin> account <account id> <reasons, one a line>
//! <origin> tool <session id> <run id> <seq> <JSON [call id, name, arguments]>
//! <origin> approval <session id> <run id> <JSON [call id, name, arguments]>
//! <origin> elicitation <session id> <run id> <JSON [call id, name, arguments, message, schema]>
//! <origin> missed
//! ```
//!
//! In the last field a backslash is written `\\` and a NUL `\0` (PostgreSQL's text cannot
//! hold a NUL). PostgreSQL refuses a payload of 8000 bytes or more, so a text delta whose
//! payload would be longer is split into several chunks, each cut on a char boundary and
//! carrying the byte offset it starts at in the run's streamed text: a receiver that finds an
//! offset that does not continue the chunk before has missed one, and repairs from the log.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr as _;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::channel::mpsc;
use futures::future::poll_fn;
use futures::{Stream, StreamExt as _};
use seed_events::{AccountId, RunId, RunStatus, SessionId};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use crate::{Error, Result};

/// The channel the nodes share. Every kind of notice goes on this one channel, so a receiver
/// hears them all in commit order (a run's last chunk of text before its end).
pub const CHANNEL: &str = "seed";

/// The longest payload PostgreSQL takes, in bytes: it refuses one of 8000 bytes or more.
pub const NOTIFY_PAYLOAD_BYTES_MAX: usize = 7999;

/// The longest channel name PostgreSQL takes, in bytes (a name is cut at 63).
pub const CHANNEL_BYTES_MAX: usize = 63;

/// What a [`Listener`] holds for its reader by default before it drops notices (and owes the
/// reader a [`Gap::FellBehind`]).
pub const NOTICES_BUFFERED_MAX_DEFAULT: usize = 4096;

/// The first wait before the listener reconnects; it doubles with every failed attempt.
const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to reconnect.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long the listener's connection may sit idle before TCP asks whether the server is still
/// there. A listener is idle for long stretches, and a server gone without a word (a host lost,
/// a network cut) must turn into a [`Gap`] rather than silence: with the interval and the
/// count below, in about a minute.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// The time between two unanswered keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Unanswered keepalive probes after which the connection counts as lost.
const KEEPALIVE_RETRIES: u32 = 3;

/// The longest origin (the sending node's id) a notice carries, in bytes.
pub const ORIGIN_BYTES_MAX: usize = 64;

/// How much of a malformed payload its error shows, in chars.
const MALFORMED_SHOWN_CHARS_MAX: usize = 80;

/// Something one node tells the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Events were committed to a session's log, seqs `from_seq..=to_seq`; a receiver reads
    /// them from the log.
    EventsCommitted {
        session_key: i64,
        from_seq: i64,
        to_seq: i64,
    },
    /// A chunk of a run's streamed text: `chunk` starts `offset_bytes` bytes into it.
    TextDelta {
        session_id: SessionId,
        run_id: RunId,
        offset_bytes: u64,
        chunk: String,
    },
    /// A run ended with `status`.
    RunFinished {
        session_id: SessionId,
        run_id: RunId,
        status: RunStatus,
    },
    /// A session's log, title, runs or links changed, for `reason`; `seqs` are the first and
    /// last seq of the events the change appended to its log, when it appended some.
    SessionChanged {
        session_id: SessionId,
        reason: String,
        seqs: Option<(i64, i64)>,
    },
    /// A session of `account_id` was deleted.
    SessionDeleted {
        session_id: SessionId,
        account_id: AccountId,
    },
    /// An account's list of sessions changed, for each of `reasons` (names, without a newline).
    AccountChanged {
        account_id: AccountId,
        reasons: Vec<String>,
    },
    /// The model asked for a tool call, whose `tool_call` event is at `seq`.
    ToolCall {
        session_id: SessionId,
        run_id: RunId,
        seq: i64,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// A call waits for a person's approval.
    ApprovalPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// An MCP server asks the person a question during a call in flight.
    ElicitationPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
        message: String,
        requested_schema: serde_json::Value,
    },
    /// The sender lost notices it meant to send (its connection was cut): a receiver resyncs
    /// as after a [`Gap`].
    Missed,
}

/// A notice whose payload PostgreSQL would refuse: a reason of thousands of bytes, or a call
/// with arguments that long; a text delta is split instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a notice of {bytes} bytes is past the {NOTIFY_PAYLOAD_BYTES_MAX} bytes a PostgreSQL \
     notification may carry"
)]
pub struct TooLong {
    pub bytes: usize,
}

/// A payload that is not a notice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed notice {shown:?}: {reason}")]
pub struct Malformed {
    /// The payload's start.
    shown: String,
    reason: String,
}

impl Malformed {
    fn new(payload: &str, reason: impl Into<String>) -> Malformed {
        Malformed {
            shown: payload.chars().take(MALFORMED_SHOWN_CHARS_MAX).collect(),
            reason: reason.into(),
        }
    }

    /// Why the payload is not a notice.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl Notice {
    /// The payloads that carry this notice, in order, each at most
    /// [`NOTIFY_PAYLOAD_BYTES_MAX`] bytes: one, but for a text delta too long for one, which
    /// is split into chunks on char boundaries, each with its own offset.
    ///
    /// Panics when `origin` is empty, longer than [`ORIGIN_BYTES_MAX`] or holds anything but
    /// printable ASCII other than a space or a backslash: the origin is the program's own node
    /// id.
    pub fn payloads(&self, origin: &str) -> Result<Vec<String>, TooLong> {
        assert!(
            !origin.is_empty()
                && origin.len() <= ORIGIN_BYTES_MAX
                && origin
                    .bytes()
                    .all(|byte| byte.is_ascii_graphic() && byte != b'\\'),
            "an origin is 1 to {ORIGIN_BYTES_MAX} printable ASCII bytes without a space or a \
             backslash: {origin:?}"
        );
        let body = match self {
            Notice::EventsCommitted {
                session_key,
                from_seq,
                to_seq,
            } => format!("events {session_key} {from_seq} {to_seq}"),
            Notice::TextDelta {
                session_id,
                run_id,
                offset_bytes,
                chunk,
            } => {
                return Ok(delta_payloads(
                    origin,
                    *session_id,
                    *run_id,
                    *offset_bytes,
                    chunk,
                ));
            }
            Notice::RunFinished {
                session_id,
                run_id,
                status,
            } => format!("finished {session_id} {run_id} {}", status.as_str()),
            Notice::SessionChanged {
                session_id,
                reason,
                seqs,
            } => {
                let seqs = match seqs {
                    Some((from, to)) => format!("{from}:{to}"),
                    None => "-".to_owned(),
                };
                with_rest(format!("changed {session_id} {seqs} "), reason)
            }
            Notice::SessionDeleted {
                session_id,
                account_id,
            } => format!("deleted {session_id} {account_id}"),
            Notice::AccountChanged {
                account_id,
                reasons,
            } => with_rest(format!("account {account_id} "), &reasons.join("\n")),
            Notice::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            } => with_rest(
                format!("tool {session_id} {run_id} {seq} "),
                &serde_json::json!([call_id, name, arguments]).to_string(),
            ),
            Notice::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            } => with_rest(
                format!("approval {session_id} {run_id} "),
                &serde_json::json!([call_id, name, arguments]).to_string(),
            ),
            Notice::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            } => with_rest(
                format!("elicitation {session_id} {run_id} "),
                &serde_json::json!([call_id, name, arguments, message, requested_schema])
                    .to_string(),
            ),
            Notice::Missed => "missed".to_owned(),
        };
        let payload = format!("{origin} {body}");
        if payload.len() > NOTIFY_PAYLOAD_BYTES_MAX {
            return Err(TooLong {
                bytes: payload.len(),
            });
        }
        Ok(vec![payload])
    }

    /// The origin and the notice a payload carries (a text delta's payload carries one chunk).
    pub fn decode(payload: &str) -> Result<(String, Notice), Malformed> {
        let malformed = |reason: String| Malformed::new(payload, reason);
        let (origin, body) = payload
            .split_once(' ')
            .ok_or_else(|| malformed("no kind after the origin".to_owned()))?;
        if origin.is_empty() {
            return Err(malformed("an empty origin".to_owned()));
        }
        if body == "missed" {
            return Ok((origin.to_owned(), Notice::Missed));
        }
        let (kind, rest) = body
            .split_once(' ')
            .ok_or_else(|| malformed(format!("no fields after the kind {body:?}")))?;
        let notice = match kind {
            "events" => {
                let ([session_key, from_seq], to_seq) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::EventsCommitted {
                    session_key: number(session_key, "session key").map_err(malformed)?,
                    from_seq: number(from_seq, "first seq").map_err(malformed)?,
                    to_seq: number(to_seq, "last seq").map_err(malformed)?,
                })
            }
            "delta" => {
                let ([session_id, run_id, offset_bytes], chunk) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::TextDelta {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    offset_bytes: number(offset_bytes, "offset").map_err(malformed)?,
                    chunk: unescape(chunk).map_err(malformed)?,
                })
            }
            "finished" => {
                let ([session_id, run_id], status) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::RunFinished {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    status: RunStatus::ALL
                        .into_iter()
                        .find(|known| known.as_str() == status)
                        .ok_or_else(|| malformed(format!("no run status is called {status:?}")))?,
                })
            }
            "changed" => {
                let ([session_id, seqs], reason) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let seqs = match seqs {
                    "-" => None,
                    seqs => {
                        let (from, to) = seqs.split_once(':').ok_or_else(|| {
                            malformed(format!("the seqs {seqs:?} are not <from>:<to>"))
                        })?;
                        Some((
                            number(from, "first seq").map_err(malformed)?,
                            number(to, "last seq").map_err(malformed)?,
                        ))
                    }
                };
                Ok(Notice::SessionChanged {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    reason: unescape(reason).map_err(malformed)?,
                    seqs,
                })
            }
            "deleted" => {
                let ([session_id], account_id) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::SessionDeleted {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    account_id: id(account_id, "account id").map_err(malformed)?,
                })
            }
            "account" => {
                let ([account_id], reasons) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let reasons = unescape(reasons).map_err(malformed)?;
                Ok(Notice::AccountChanged {
                    account_id: id(account_id, "account id").map_err(malformed)?,
                    reasons: reasons.split('\n').map(str::to_owned).collect(),
                })
            }
            "tool" => {
                let ([session_id, run_id, seq], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments) =
                    serde_json::from_str::<(String, String, serde_json::Value)>(
                        &unescape(call).map_err(malformed)?,
                    )
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ToolCall {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    seq: number(seq, "seq").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                })
            }
            "approval" => {
                let ([session_id, run_id], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments) =
                    serde_json::from_str::<(String, String, serde_json::Value)>(
                        &unescape(call).map_err(malformed)?,
                    )
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ApprovalPending {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                })
            }
            "elicitation" => {
                let ([session_id, run_id], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments, message, requested_schema) =
                    serde_json::from_str::<(
                        String,
                        String,
                        serde_json::Value,
                        String,
                        serde_json::Value,
                    )>(&unescape(call).map_err(malformed)?)
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ElicitationPending {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                    message,
                    requested_schema,
                })
            }
            other => Err(malformed(format!("no notice is called {other:?}"))),
        }?;
        Ok((origin.to_owned(), notice))
    }
}

/// `head` followed by `rest`, escaped.
fn with_rest(mut head: String, rest: &str) -> String {
    escape_into(&mut head, rest);
    head
}

/// The payloads of a text delta: as many chunks as it takes, each payload at most
/// [`NOTIFY_PAYLOAD_BYTES_MAX`] bytes once escaped, each chunk cut on a char boundary. An
/// empty text is one payload with an empty chunk.
fn delta_payloads(
    origin: &str,
    session_id: SessionId,
    run_id: RunId,
    offset_bytes: u64,
    text: &str,
) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut rest = text;
    let mut offset_bytes = offset_bytes;
    loop {
        let mut payload = format!("{origin} delta {session_id} {run_id} {offset_bytes} ");
        let room = NOTIFY_PAYLOAD_BYTES_MAX - payload.len();
        let mut escaped_bytes = 0;
        let mut end = rest.len();
        for (at, c) in rest.char_indices() {
            escaped_bytes += escaped_len(c);
            if escaped_bytes > room {
                end = at;
                break;
            }
        }
        let (chunk, after) = rest.split_at(end);
        escape_into(&mut payload, chunk);
        payloads.push(payload);
        offset_bytes += u64::try_from(end).expect("a chunk's length fits in 64 bits");
        rest = after;
        if rest.is_empty() {
            return payloads;
        }
    }
}

/// The bytes `c` takes in a payload.
fn escaped_len(c: char) -> usize {
    match c {
        '\\' | '\0' => 2,
        other => other.len_utf8(),
    }
}

/// Appends `text` to `payload` with a backslash written `\\` and a NUL `\0`.
fn escape_into(payload: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => payload.push_str("\\\\"),
            '\0' => payload.push_str("\\0"),
            other => payload.push(other),
        }
    }
}

/// The text [`escape_into`] wrote.
fn unescape(escaped: &str) -> Result<String, String> {
    let mut text = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => text.push('\\'),
            Some('0') => text.push('\0'),
            Some(other) => return Err(format!("an unknown escape \\{other}")),
            None => return Err("a backslash at the end".to_owned()),
        }
    }
    Ok(text)
}

/// The first `N` fields of `text`, separated by a space, and the rest after the next space.
fn leading_fields<const N: usize>(text: &str) -> Option<([&str; N], &str)> {
    let mut parts = text.splitn(N + 1, ' ');
    let fields = std::array::from_fn(|_| parts.next().unwrap_or_default());
    let rest = parts.next()?;
    Some((fields, rest))
}

fn missing(kind: &str) -> String {
    format!("a {kind} notice lacks a field")
}

fn number<T: std::str::FromStr>(field: &str, what: &str) -> Result<T, String> {
    field
        .parse()
        .map_err(|_| format!("the {what} {field:?} is not a number"))
}

fn id<T>(field: &str, what: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: fmt::Display,
{
    T::from_str(field).map_err(|error| format!("the {what} {field:?} is not a uuid: {error}"))
}

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
/// order). A lost connection is made again at a later send, no sooner than a backoff after the
/// last failed attempt; what could not be sent meanwhile is lost, and the first notice sent
/// after it is a [`Notice::Missed`], so receivers resync. Used inside a tokio runtime, which
/// drives the connection.
pub struct Notifier {
    config: tokio_postgres::Config,
    channel: String,
    origin: String,
    client: Option<Client>,
    /// Notices were lost since the last one sent.
    missed: bool,
    /// When the next attempt to connect may be made, and the wait after it fails.
    retry: Option<(tokio::time::Instant, Duration)>,
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
            config.connect_timeout(super::CONNECT_TIMEOUT);
        }
        let mut notifier = Notifier {
            config,
            channel: channel.to_owned(),
            origin: origin.to_owned(),
            client: None,
            missed: false,
            retry: None,
        };
        notifier.client = Some(notifier.open().await.map_err(Error::Postgres)?);
        Ok(notifier)
    }

    async fn open(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = self.config.connect(NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// Sends `notice`: all its payloads, in order. A notice too long is refused and nothing
    /// is sent.
    pub async fn send(&mut self, notice: &Notice) -> Result<(), Unsent> {
        let payloads = notice.payloads(&self.origin)?;
        self.connect_again().await?;
        let mut missed = Vec::new();
        if self.missed {
            missed = Notice::Missed.payloads(&self.origin)?;
        }
        let client = self.client.as_ref().expect("connected just above");
        let mut lost = None;
        for payload in missed.iter().chain(&payloads) {
            if let Err(error) = client.execute(Notify::SQL, &[&self.channel, payload]).await {
                lost = Some(error);
                break;
            }
        }
        if let Some(error) = lost {
            self.client = None;
            self.missed = true;
            return Err(Unsent::Lost(super::describe(&error)));
        }
        self.missed = false;
        Ok(())
    }

    /// Makes the connection again when it was lost and the backoff allows.
    async fn connect_again(&mut self) -> Result<(), Unsent> {
        if self.client.as_ref().is_some_and(Client::is_closed) {
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
                    return Err(Unsent::Lost(super::describe(&error)));
                }
            }
        }
        Ok(())
    }
}

/// What a [`Listener`] yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// A notice, and the node that sent it.
    Notice { origin: String, notice: Notice },
    /// Notices may have been missed here: the reader resyncs from the log before it trusts the
    /// notices that follow.
    Gap(Gap),
}

/// Why notices may have been missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// The connection was lost and made again; it listens again from here on.
    Reconnected,
    /// More notices came than the reader's buffer holds (the `buffered_max` of
    /// [`Listener::connect`]), and those that found no room were dropped.
    FellBehind,
    /// A payload was not a notice (logged).
    Unreadable,
}

/// Listens on one channel on a connection of its own and yields what it hears ([`Heard`]), in
/// the order PostgreSQL delivers it. A lost connection is made again, with a backoff, and a
/// [`Gap::Reconnected`] is yielded once it listens again. The connection is closed when the
/// listener is dropped. Made and used inside a tokio runtime with its time driver (the backoff
/// sleeps), which drives the connection.
#[derive(Debug)]
pub struct Listener {
    heard: mpsc::Receiver<Heard>,
    /// The task that drives the connection and fills `heard`; ended when the listener goes.
    relay: tokio::task::AbortHandle,
}

impl Listener {
    /// Connects to the database `url` names, listens on `channel` and returns once it does, so
    /// every notification committed after this returns is heard. At most `buffered_max`
    /// notices wait for the reader; past that they are dropped, and a [`Gap::FellBehind`]
    /// comes before the next notice the reader gets.
    ///
    /// Panics when `channel` is empty, longer than [`CHANNEL_BYTES_MAX`] or holds a NUL: the
    /// channel is the program's own constant.
    pub async fn connect(url: &str, channel: &str, buffered_max: usize) -> Result<Listener> {
        assert!(
            !channel.is_empty() && channel.len() <= CHANNEL_BYTES_MAX && !channel.contains('\0'),
            "a channel name is 1 to {CHANNEL_BYTES_MAX} bytes without a NUL: {channel:?}"
        );
        let mut config = tokio_postgres::Config::from_str(url).map_err(Error::Postgres)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(super::CONNECT_TIMEOUT);
        }
        if config.get_keepalives_idle() > KEEPALIVE_IDLE {
            config.keepalives_idle(KEEPALIVE_IDLE);
        }
        if config.get_keepalives_interval().is_none() {
            config.keepalives_interval(KEEPALIVE_INTERVAL);
        }
        if config.get_keepalives_retries().is_none() {
            config.keepalives_retries(KEEPALIVE_RETRIES);
        }
        let listen = format!("LISTEN \"{}\"", channel.replace('"', "\"\""));
        let connected = Connected::open(&config, &listen).await?;
        let (sender, heard) = mpsc::channel(buffered_max);
        let outbox = Outbox { sender, owed: None };
        let relay = tokio::spawn(keep_listening(config, listen, connected, outbox)).abort_handle();
        Ok(Listener { heard, relay })
    }
}

impl Stream for Listener {
    type Item = Heard;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Heard>> {
        self.heard.poll_next_unpin(cx)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.relay.abort();
    }
}

/// A connection that listens.
struct Connected {
    /// Held so the connection stays open: it closes when its client goes.
    _client: Client,
    /// What the connection hears, in order; it ends when the connection does.
    messages: mpsc::UnboundedReceiver<Result<AsyncMessage, tokio_postgres::Error>>,
}

impl Connected {
    /// Connects and runs `listen`. A task of its own drives the connection and passes on what
    /// it hears until the connection ends (which it does once the client is dropped).
    async fn open(config: &tokio_postgres::Config, listen: &str) -> Result<Connected> {
        let (client, mut connection) = config.connect(NoTls).await?;
        let (sender, messages) = mpsc::unbounded();
        tokio::spawn(async move {
            // After an error or the end, the connection is not polled again.
            while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
                let lost = message.is_err();
                if sender.unbounded_send(message).is_err() || lost {
                    break;
                }
            }
        });
        client.batch_execute(listen).await?;
        Ok(Connected {
            _client: client,
            messages,
        })
    }
}

/// Why a connection stopped being heard.
enum Lost {
    Error(tokio_postgres::Error),
    Closed,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lost::Error(error) => f.write_str(&super::describe(error)),
            Lost::Closed => f.write_str("the server closed the connection"),
        }
    }
}

/// Passes on what `connected` hears; when it is lost, connects again (waiting longer after
/// each failure) and yields a gap once it listens again. Ends when the listener is dropped.
async fn keep_listening(
    config: tokio_postgres::Config,
    listen: String,
    mut connected: Connected,
    mut outbox: Outbox,
) {
    loop {
        let Some(lost) = outbox.relay(&mut connected.messages).await else {
            return;
        };
        tracing::warn!(error = %lost, "the notices' connection was lost; connecting again");
        drop(connected);
        let mut backoff = RECONNECT_BACKOFF_MIN;
        connected = loop {
            tokio::time::sleep(backoff).await;
            match Connected::open(&config, &listen).await {
                Ok(connected) => break connected,
                Err(error) => {
                    tracing::warn!(%error, "connecting the notices' connection again failed");
                    backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
            }
        };
        if !outbox.offer(Heard::Gap(Gap::Reconnected)) {
            return;
        }
    }
}

/// The sending side of a listener's buffer, which never waits for the reader: what does not
/// fit is dropped, and a gap is owed.
struct Outbox {
    sender: mpsc::Sender<Heard>,
    /// A gap the reader must get before anything else: something was dropped for want of
    /// room since the last item it got.
    owed: Option<Gap>,
}

impl Outbox {
    /// Passes on what a connection hears until it is lost (`Some`), or the reader is gone
    /// (`None`).
    async fn relay(
        &mut self,
        messages: &mut mpsc::UnboundedReceiver<Result<AsyncMessage, tokio_postgres::Error>>,
    ) -> Option<Lost> {
        poll_fn(|cx| {
            loop {
                if !self.poll_owed(cx) {
                    return Poll::Ready(None);
                }
                let message = match messages.poll_next_unpin(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(None) => return Poll::Ready(Some(Lost::Closed)),
                    Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Lost::Error(error))),
                    Poll::Ready(Some(Ok(message))) => message,
                };
                let AsyncMessage::Notification(notification) = message else {
                    continue;
                };
                let heard = match Notice::decode(notification.payload()) {
                    Ok((origin, notice)) => Heard::Notice { origin, notice },
                    Err(error) => {
                        tracing::warn!(%error, "a notification that is not a notice");
                        Heard::Gap(Gap::Unreadable)
                    }
                };
                if !self.offer(heard) {
                    return Poll::Ready(None);
                }
            }
        })
        .await
    }

    /// Sends the owed gap when there is room for it (and wakes the task when room comes).
    /// False when the reader is gone.
    fn poll_owed(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(gap) = self.owed else {
            return true;
        };
        match self.sender.poll_ready(cx) {
            Poll::Ready(Ok(())) => {
                self.owed = None;
                self.sender.start_send(Heard::Gap(gap)).is_ok()
            }
            Poll::Ready(Err(_)) => false,
            Poll::Pending => true,
        }
    }

    /// Queues `heard` for the reader, after the gap it is owed; what finds no room is dropped
    /// and owes a gap. False when the reader is gone.
    fn offer(&mut self, heard: Heard) -> bool {
        if let Some(gap) = self.owed {
            match self.sender.try_send(Heard::Gap(gap)) {
                Ok(()) => self.owed = None,
                // Still owed: it covers `heard`, dropped too.
                Err(error) if error.is_full() => return true,
                Err(_) => return false,
            }
        }
        match self.sender.try_send(heard) {
            Ok(()) => true,
            Err(error) if error.is_full() => {
                self.owed = Some(match error.into_inner() {
                    Heard::Gap(gap) => gap,
                    Heard::Notice { .. } => Gap::FellBehind,
                });
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionId {
        SessionId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001)
    }

    fn run() -> RunId {
        RunId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0002)
    }

    const ORIGIN: &str = "0190aaaa-0000-7000-8000-00000000000a";

    fn account() -> AccountId {
        AccountId::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0003)
    }

    fn one_payload(notice: &Notice) -> String {
        let mut payloads = notice.payloads(ORIGIN).expect("a notice that fits");
        assert_eq!(payloads.len(), 1, "{payloads:?}");
        payloads.remove(0)
    }

    #[test]
    fn each_notice_has_its_wire_form_and_reads_back() {
        let cases = [
            (
                Notice::EventsCommitted {
                    session_key: 42,
                    from_seq: 7,
                    to_seq: 9,
                },
                "events 42 7 9".to_owned(),
            ),
            (
                Notice::TextDelta {
                    session_id: session(),
                    run_id: run(),
                    offset_bytes: 12,
                    chunk: "two words\nand a \\ and a \0 ✓".to_owned(),
                },
                format!(
                    "delta {} {} 12 two words\nand a \\\\ and a \\0 ✓",
                    session(),
                    run()
                ),
            ),
            (
                Notice::TextDelta {
                    session_id: session(),
                    run_id: run(),
                    offset_bytes: 0,
                    chunk: String::new(),
                },
                format!("delta {} {} 0 ", session(), run()),
            ),
            (
                Notice::RunFinished {
                    session_id: session(),
                    run_id: run(),
                    status: RunStatus::Canceled,
                },
                format!("finished {} {} canceled", session(), run()),
            ),
            (
                Notice::SessionChanged {
                    session_id: session(),
                    reason: "title".to_owned(),
                    seqs: None,
                },
                format!("changed {} - title", session()),
            ),
            (
                Notice::SessionChanged {
                    session_id: session(),
                    reason: "a reason with spaces".to_owned(),
                    seqs: Some((3, 5)),
                },
                format!("changed {} 3:5 a reason with spaces", session()),
            ),
            (
                Notice::SessionDeleted {
                    session_id: session(),
                    account_id: account(),
                },
                format!("deleted {} {}", session(), account()),
            ),
            (
                Notice::AccountChanged {
                    account_id: account(),
                    reasons: vec!["session-updated".to_owned(), "session-continued".to_owned()],
                },
                format!("account {} session-updated\nsession-continued", account()),
            ),
            (
                Notice::ToolCall {
                    session_id: session(),
                    run_id: run(),
                    seq: 8,
                    call_id: "call 1".to_owned(),
                    name: "read".to_owned(),
                    arguments: serde_json::json!({"path": "a\\b"}),
                },
                format!(
                    "tool {} {} 8 [\"call 1\",\"read\",{{\"path\":\"a\\\\\\\\b\"}}]",
                    session(),
                    run()
                ),
            ),
            (
                Notice::ApprovalPending {
                    session_id: session(),
                    run_id: run(),
                    call_id: "c".to_owned(),
                    name: "bash".to_owned(),
                    arguments: serde_json::json!({"command": "ls"}),
                },
                format!(
                    "approval {} {} [\"c\",\"bash\",{{\"command\":\"ls\"}}]",
                    session(),
                    run()
                ),
            ),
            (
                Notice::ElicitationPending {
                    session_id: session(),
                    run_id: run(),
                    call_id: "c".to_owned(),
                    name: "mcp".to_owned(),
                    arguments: serde_json::json!({}),
                    message: "which?".to_owned(),
                    requested_schema: serde_json::json!({"type": "object"}),
                },
                format!(
                    "elicitation {} {} [\"c\",\"mcp\",{{}},\"which?\",{{\"type\":\"object\"}}]",
                    session(),
                    run()
                ),
            ),
            (Notice::Missed, "missed".to_owned()),
        ];
        for (notice, wire) in cases {
            let wire = format!("{ORIGIN} {wire}");
            assert_eq!(one_payload(&notice), wire);
            assert_eq!(
                Notice::decode(&wire),
                Ok((ORIGIN.to_owned(), notice)),
                "{wire:?}"
            );
        }
    }

    #[test]
    fn malformed_payloads_are_errors_that_say_why() {
        let (s, r) = (session(), run());
        let cases = [
            ("gossip".to_owned(), "no fields after the kind"),
            ("events".to_owned(), "no fields after the kind"),
            ("events 1 2".to_owned(), "lacks a field"),
            (
                "events 1 2 3 4".to_owned(),
                "last seq \"3 4\" is not a number",
            ),
            (
                "events x 2 3".to_owned(),
                "session key \"x\" is not a number",
            ),
            ("gossip 1 2".to_owned(), "no notice is called \"gossip\""),
            (format!("delta {s} {r} 5"), "lacks a field"),
            (
                format!("delta {s} {r} -5 text"),
                "offset \"-5\" is not a number",
            ),
            (
                format!("delta nope {r} 5 text"),
                "session id \"nope\" is not a uuid",
            ),
            (format!("delta {s} {s}x 5 text"), "run id"),
            (format!("delta {s} {r} 5 a \\n b"), "an unknown escape \\n"),
            (
                format!("delta {s} {r} 5 ends in \\"),
                "a backslash at the end",
            ),
            (
                format!("finished {s} {r} exploded"),
                "no run status is called \"exploded\"",
            ),
            (format!("finished {s} {r}"), "lacks a field"),
            (format!("changed {s} -"), "lacks a field"),
            (format!("changed {s} 3 events"), "are not <from>:<to>"),
            (
                format!("changed {s} 3:x events"),
                "last seq \"x\" is not a number",
            ),
            (
                format!("deleted {s} nope"),
                "account id \"nope\" is not a uuid",
            ),
            (format!("tool {s} {r} 1 [1]"), "the call is not its JSON"),
        ];
        assert!(
            Notice::decode("lonely")
                .expect_err("no kind")
                .reason()
                .contains("no kind after the origin")
        );
        for (payload, reason) in cases {
            let payload = format!("{ORIGIN} {payload}");
            let error = Notice::decode(&payload).expect_err(&payload);
            assert!(error.reason().contains(reason), "{payload:?}: {error}");
            assert!(error.to_string().starts_with("malformed notice"), "{error}");
        }
    }

    #[test]
    fn a_notice_past_the_limit_is_refused_and_the_limit_itself_is_not() {
        let changed = |reason_bytes: usize| Notice::SessionChanged {
            session_id: session(),
            reason: "r".repeat(reason_bytes),
            seqs: None,
        };
        let head = format!("{ORIGIN} changed {} - ", session()).len();
        let fits = changed(NOTIFY_PAYLOAD_BYTES_MAX - head);
        assert_eq!(one_payload(&fits).len(), NOTIFY_PAYLOAD_BYTES_MAX);
        assert_eq!(
            changed(NOTIFY_PAYLOAD_BYTES_MAX - head + 1).payloads(ORIGIN),
            Err(TooLong {
                bytes: NOTIFY_PAYLOAD_BYTES_MAX + 1
            })
        );
        let sql = notify_sql(CHANNEL, ORIGIN, &fits).expect("it fits");
        assert_eq!(sql.len(), 1);
        assert_eq!(sql[0].params(), [CHANNEL, one_payload(&fits).as_str()]);
        assert_eq!(Notify::SQL, "SELECT pg_notify($1, $2)");
    }

    /// splitmix64: the random texts below come from a seed, so a failure names the seed that
    /// replays it.
    struct Random(u64);

    impl Random {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A text of up to `bytes_max` bytes, drawn from a few alphabets: one, two, three and four
    /// bytes a char, and the chars the payload escapes.
    fn random_text(random: &mut Random, bytes_max: u64) -> String {
        const ALPHABETS: [&[char]; 5] = [
            &['a', 'b', ' ', '\n'],
            &['é', 'ß', 'ж'],
            &['✓', '中', '€'],
            &['🦀', '𝄞'],
            &['\\', '\0'],
        ];
        // Some texts mix every alphabet; others hold one alone (all four-byte chars, all
        // escapes), which are the ones that find an off-by-one at a chunk's end.
        let only = random.below(ALPHABETS.len() as u64 + 1) as usize;
        let bytes = random.below(bytes_max + 1) as usize;
        let mut text = String::new();
        while text.len() < bytes {
            let alphabet = match ALPHABETS.get(only) {
                Some(alphabet) => alphabet,
                None => ALPHABETS[random.below(ALPHABETS.len() as u64) as usize],
            };
            text.push(alphabet[random.below(alphabet.len() as u64) as usize]);
        }
        text
    }

    #[test]
    fn a_split_delta_reassembles_to_its_text_in_payloads_postgres_takes() {
        for seed in 0..300_u64 {
            let mut random = Random(seed);
            let text = random_text(&mut random, 40_000);
            let offset_bytes = random.below(1 << 40);
            let notice = Notice::TextDelta {
                session_id: session(),
                run_id: run(),
                offset_bytes,
                chunk: text.clone(),
            };
            let payloads = notice
                .payloads(ORIGIN)
                .expect("a delta is split, never too long");
            let mut reassembled = String::new();
            for payload in &payloads {
                assert!(
                    payload.len() <= NOTIFY_PAYLOAD_BYTES_MAX,
                    "seed {seed}: a payload of {} bytes",
                    payload.len()
                );
                let Ok((
                    _,
                    Notice::TextDelta {
                        offset_bytes: chunk_offset,
                        chunk,
                        ..
                    },
                )) = Notice::decode(payload)
                else {
                    panic!("seed {seed}: not a delta: {payload:?}");
                };
                assert_eq!(
                    chunk_offset,
                    offset_bytes + reassembled.len() as u64,
                    "seed {seed}: a chunk that does not continue the one before"
                );
                assert!(
                    !chunk.is_empty() || text.is_empty(),
                    "seed {seed}: an empty chunk"
                );
                reassembled.push_str(&chunk);
            }
            assert!(
                reassembled == text,
                "seed {seed}: the text does not reassemble"
            );
            // No more chunks than the text needs: all but the last are nearly full.
            for payload in &payloads[..payloads.len() - 1] {
                assert!(
                    payload.len() > NOTIFY_PAYLOAD_BYTES_MAX - 4,
                    "seed {seed}: a short chunk of {} bytes before the last",
                    payload.len()
                );
            }
        }
    }
}
