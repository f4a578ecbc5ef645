//! A small pool of read-only connections, each on its own thread, so async callers never block
//! on SQLite. WAL lets them read while the writer writes; each read sees every commit that had
//! finished when it started.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;

use crate::sql::Connection;
use crossbeam_channel::Sender;
use futures::channel::oneshot;

use crate::spin::Replies;
use crate::{Config, Error, Result};

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

pub(crate) struct Readers {
    sender: Option<Sender<ReadJob>>,
    /// Inline mode ([`Config::inline`]): one connection, read on the caller's thread.
    inline: Option<std::sync::Mutex<Connection>>,
    threads: Vec<JoinHandle<()>>,
    /// How callers wait for their rows (shared with the writer).
    replies: Arc<Replies>,
    /// How many times the readers waited on the database server's answers (PostgreSQL's
    /// round trips; 0 on SQLite).
    round_trips: Arc<AtomicU64>,
}

impl Readers {
    pub(crate) fn start(config: &Config, replies: Arc<Replies>) -> Result<Readers> {
        let round_trips = Arc::new(AtomicU64::new(0));
        if config.inline {
            return Ok(Readers {
                sender: None,
                inline: Some(std::sync::Mutex::new(crate::sql::Connection::open_reader(
                    config,
                )?)),
                threads: Vec::new(),
                replies,
                round_trips,
            });
        }
        let (sender, receiver) = crossbeam_channel::unbounded::<ReadJob>();
        let mut threads = Vec::new();
        for reader_idx in 0..config.n_readers.max(1) {
            let connection = crate::sql::Connection::open_reader(config)?;
            let receiver = receiver.clone();
            let thread = std::thread::Builder::new()
                .name(format!("seed-store-reader-{reader_idx}"))
                .spawn(move || {
                    while let Ok(job) = receiver.recv() {
                        job(&connection);
                    }
                })?;
            threads.push(thread);
        }
        Ok(Readers {
            sender: Some(sender),
            inline: None,
            threads,
            replies,
            round_trips,
        })
    }

    /// How many times the readers waited on the database server's answers: PostgreSQL's round
    /// trips, 0 on SQLite.
    pub(crate) fn n_round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Runs `read` on a pooled connection and returns what it found. A read that met its
    /// connection closed by the server (PostgreSQL restarted, or cut it off, since the
    /// connection's last statement) runs once more, on the connection opened anew: a read
    /// changes nothing, and otherwise each pooled connection would fail one caller after the
    /// database came back.
    pub(crate) async fn read<T, F>(&self, mut read: F) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T> + Send + 'static,
        T: Send + 'static,
    {
        if let Some(inline) = &self.inline {
            let connection = inline.lock().map_err(|_| Error::Closed)?;
            let before = connection.n_round_trips();
            let outcome = read_again_if_closed(&connection, &mut read);
            self.round_trips
                .fetch_add(connection.n_round_trips() - before, Ordering::Relaxed);
            return outcome;
        }
        let (reply, outcome) = oneshot::channel();
        let round_trips = Arc::clone(&self.round_trips);
        let job: ReadJob = Box::new(move |connection| {
            let before = connection.n_round_trips();
            let outcome = read_again_if_closed(connection, &mut read);
            // Counted before the caller hears back.
            round_trips.fetch_add(connection.n_round_trips() - before, Ordering::Relaxed);
            let _ = reply.send(outcome);
        });
        self.sender
            .as_ref()
            .ok_or(Error::Closed)?
            .send(job)
            .map_err(|_| Error::Closed)?;
        self.replies
            .wait(outcome)
            .await
            .map_err(|_| Error::Closed)?
    }
}

/// `read` on `connection`, and once more when the server had closed the connection.
fn read_again_if_closed<T>(
    connection: &Connection,
    read: &mut impl FnMut(&Connection) -> Result<T>,
) -> Result<T> {
    match read(connection) {
        Err(error) if error.is_connection_closed() => {
            tracing::info!(%error, "a read met its connection closed; reading again");
            read(connection)
        }
        outcome => outcome,
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        self.sender = None;
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("a store reader thread panicked");
            }
        }
    }
}
