//! Hearing notices: [`Listener`], a connection of its own that `LISTEN`s on a channel and yields
//! what it hears in the order PostgreSQL delivers it, with a [`Gap`] wherever something may have
//! been missed.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr as _;
use std::task::{Context, Poll};

use futures::channel::mpsc;
use futures::future::poll_fn;
use futures::{Stream, StreamExt as _};
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::{
    CHANNEL_BYTES_MAX, KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_RETRIES, Notice,
    RECONNECT_BACKOFF_MAX, RECONNECT_BACKOFF_MIN,
};
use crate::{Error, Result};

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
            config.connect_timeout(crate::postgres::CONNECT_TIMEOUT);
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
            Lost::Error(error) => f.write_str(&crate::postgres::describe(error)),
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
