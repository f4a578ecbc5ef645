//! The header timeout on every request head of a connection: the first must end within the
//! timeout of the connection's opening, and each later one on a kept-alive connection within
//! the timeout of its first byte; otherwise the connection ends. The HTTP layer (actix-http)
//! times the first head alone: after a response it clears its keep-alive timer at the next
//! head's first byte, and nothing would time the rest of that head (a client sending a byte now
//! and then would hold its connection, one of the few there are, for ever). Its timer for the
//! first head is not used either: it counts from a clock it refreshes every 500 ms, so a
//! timeout under that cuts off heads that came at once.
//!
//! - `HeadWatch` (pure): where a connection is between its requests, from the bytes read from
//!   the client and written to it, and by when the head in progress must end.
//! - `HeadTimedIo`: a connection's stream, read and written through a `HeadWatch`; once a head
//!   is late it reads as ended, and the HTTP layer closes the connection (after a 408 when
//!   nothing was answered on it yet).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_codec::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Where a connection is between its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Between two requests: no head has begun.
    Idle,
    /// A head has begun (the first: the connection is open) and must end by `deadline`.
    /// `line_empty`: nothing but a carriage
    /// return since the last line feed (one more line feed ends the head); `content`: the head
    /// holds more than the empty lines a client may send before a request line.
    Head {
        deadline: Instant,
        line_empty: bool,
        content: bool,
    },
    /// The head ended: what the client sends now is the request's body, timed by the
    /// service's body timeout, until the service answers.
    Request,
    /// The service switched protocols (a WebSocket): no HTTP heads come any more.
    Upgraded,
    /// A head did not end in time: the connection is to end.
    TimedOut,
}

/// Where a connection is between its requests, from its bytes: the first head is due from the
/// connection's opening (a connection that sends nothing holds its place as much as one that
/// sends slowly); a later head begins with the first byte read between two requests; a head
/// ends with the empty line that ends it; the request is over once the service writes a final
/// response (an interim `100 Continue` leaves the body still to come; `101 Switching
/// Protocols` ends HTTP on the connection).
#[derive(Debug, Clone)]
pub struct HeadWatch {
    timeout: Duration,
    phase: Phase,
    /// Whether anything was written to the client.
    answered: bool,
}

impl HeadWatch {
    /// A connection opened at `opened`, whose heads must each end within `timeout`.
    pub fn new(timeout: Duration, opened: Instant) -> Self {
        Self {
            timeout,
            phase: Phase::Head {
                deadline: opened + timeout,
                line_empty: false,
                content: false,
            },
            answered: false,
        }
    }

    /// Takes `bytes` read from the client at `now`.
    pub fn read(&mut self, bytes: &[u8], now: Instant) {
        for &byte in bytes {
            match &mut self.phase {
                Phase::Idle => {
                    self.phase = Phase::Head {
                        deadline: now + self.timeout,
                        line_empty: false,
                        content: false,
                    };
                    self.head_byte(byte);
                }
                Phase::Head { .. } => self.head_byte(byte),
                // A body, or what follows a switch of protocols: not a head.
                Phase::Request | Phase::Upgraded | Phase::TimedOut => return,
            }
        }
    }

    /// Takes one byte of the head in progress.
    fn head_byte(&mut self, byte: u8) {
        let Phase::Head {
            line_empty,
            content,
            ..
        } = &mut self.phase
        else {
            return;
        };
        match byte {
            b'\n' if *line_empty && *content => self.phase = Phase::Request,
            b'\n' => *line_empty = true,
            b'\r' => {}
            _ => {
                *line_empty = false;
                *content = true;
            }
        }
    }

    /// Takes `bytes` the service writes to the client, from the start of one write.
    pub fn wrote(&mut self, bytes: &[u8]) {
        self.answered |= !bytes.is_empty();
        if self.phase != Phase::Request {
            return;
        }
        match answer_kind(bytes) {
            AnswerKind::Interim => {}
            AnswerKind::Switch => self.phase = Phase::Upgraded,
            AnswerKind::Final => self.phase = Phase::Idle,
        }
    }

    /// By when the head in progress must end: `None` when no head is in progress.
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Head { deadline, .. } => Some(deadline),
            _ => None,
        }
    }

    /// Marks the head in progress late: the connection is to end.
    pub fn time_out(&mut self) {
        self.phase = Phase::TimedOut;
    }

    /// Whether a head came too late and the connection is to end.
    pub fn is_timed_out(&self) -> bool {
        self.phase == Phase::TimedOut
    }

    /// Whether nothing was written to the client yet: a late head may then be answered 408
    /// without cutting into another answer.
    pub fn is_unanswered(&self) -> bool {
        !self.answered
    }
}

/// What a write that answers a request starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnswerKind {
    /// Interim responses alone (`100 Continue`): the request goes on.
    Interim,
    /// `101 Switching Protocols`.
    Switch,
    /// A final response, maybe after interim ones.
    Final,
}

/// What `bytes`, the start of a write to the client, answer: each interim response (a `1xx`
/// status other than 101) is skipped to the empty line that ends it, and what follows decides.
fn answer_kind(mut bytes: &[u8]) -> AnswerKind {
    loop {
        // "HTTP/1.1 " is nine bytes; the status follows.
        match bytes.get(9..12) {
            Some(b"101") => return AnswerKind::Switch,
            Some([b'1', _, _]) => {}
            Some(_) => return AnswerKind::Final,
            // Nothing after the interim answers.
            None if bytes.is_empty() => return AnswerKind::Interim,
            // Too short for a status line: the start of a final answer.
            None => return AnswerKind::Final,
        }
        match bytes.windows(4).position(|window| window == b"\r\n\r\n") {
            Some(end) => bytes = &bytes[end + 4..],
            None => return AnswerKind::Interim,
        }
    }
}

/// What a connection whose first head is late is told before it is closed.
const REQUEST_TIMEOUT_ANSWER: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// A connection's stream whose request heads must each end within the header timeout: once one
/// is late, reading it gives the end of the stream (the HTTP layer then closes the connection,
/// after the answer to any request in flight), with a 408 written first when nothing was
/// answered on the connection yet. A timer, polled while a head is in progress, wakes the
/// connection's task at the deadline.
#[derive(Debug)]
pub struct HeadTimedIo<T> {
    io: T,
    watch: HeadWatch,
    /// Armed at the deadline of the head in progress, while one is read in more than one go.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> HeadTimedIo<T> {
    /// `io`, opened now, whose heads must each end within `timeout`.
    pub fn new(io: T, timeout: Duration) -> Self {
        Self {
            io,
            watch: HeadWatch::new(timeout, Instant::now()),
            timer: None,
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for HeadTimedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.watch.is_timed_out() {
            return Poll::Ready(Ok(()));
        }
        let filled = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.watch.read(&buf.filled()[filled..], Instant::now());
        }
        let Some(deadline) = this.watch.deadline() else {
            // No head in progress: nothing to wake the task for.
            this.timer = None;
            return polled;
        };
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.deadline() != deadline {
            timer.as_mut().reset(deadline);
        }
        if timer.as_mut().poll(cx).is_ready() {
            tracing::debug!("a request head did not arrive within the header timeout");
            if this.watch.is_unanswered() {
                // At most a few bytes on a connection that has sent nothing: they go at
                // once, or the connection is closed without them.
                let _ = Pin::new(&mut this.io).poll_write(cx, REQUEST_TIMEOUT_ANSWER);
            }
            this.watch.time_out();
            // Bytes read now are given; the next read gives the end.
            if polled.is_pending() {
                return Poll::Ready(Ok(()));
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for HeadTimedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled
            && n > 0
        {
            this.watch.wrote(buf);
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_millis(300);

    /// A watch on a connection opened at `opened` that took one whole request and answered it.
    fn after_one_request(opened: Instant) -> HeadWatch {
        let mut watch = HeadWatch::new(TIMEOUT, opened);
        watch.read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", opened);
        watch.wrote(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        watch
    }

    #[test]
    fn the_first_head_is_due_from_the_connections_opening_to_the_empty_line_that_ends_it() {
        let opened = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, opened);
        assert_eq!(watch.deadline(), Some(opened + TIMEOUT), "before any byte");
        watch.read(b"GET / HTTP/1.1\r\n", opened + Duration::from_millis(100));
        watch.read(b"Host: x\r\n", opened + Duration::from_millis(200));
        assert_eq!(watch.deadline(), Some(opened + TIMEOUT));
        watch.read(b"\r\n", opened + Duration::from_millis(250));
        assert_eq!(watch.deadline(), None);
    }

    #[test]
    fn a_later_head_is_due_from_its_first_byte() {
        let opened = Instant::now();
        let mut watch = after_one_request(opened);
        assert_eq!(watch.deadline(), None, "nothing is due between requests");
        let later = opened + Duration::from_secs(20);
        watch.read(b"G", later);
        assert_eq!(watch.deadline(), Some(later + TIMEOUT));
        // Later bytes of the same head keep its deadline.
        watch.read(b"ET / HTTP/1.1\r\n", later + Duration::from_millis(200));
        assert_eq!(watch.deadline(), Some(later + TIMEOUT));
        // An answer still being written leaves the new head timed.
        watch.wrote(b"more of the last answer's body");
        assert_eq!(watch.deadline(), Some(later + TIMEOUT));
        watch.read(b"\r\n", later + Duration::from_millis(250));
        assert_eq!(watch.deadline(), None);
    }

    #[test]
    fn the_end_of_a_head_is_found_across_reads_and_with_bare_line_feeds() {
        let now = Instant::now();
        for chunks in [
            vec![&b"GET / HTTP/1.1\r\nHost: x\r"[..], b"\n\r", b"\n"],
            vec![b"GET / HTTP/1.1\nHost: x\n\n"],
            vec![b"GET / HTTP/1.1\r\n", b"\r\n"],
        ] {
            let mut watch = HeadWatch::new(TIMEOUT, now);
            for chunk in &chunks {
                watch.read(chunk, now);
            }
            assert_eq!(watch.deadline(), None, "{chunks:?}");
        }
    }

    #[test]
    fn empty_lines_before_a_request_line_do_not_end_its_head() {
        let now = Instant::now();
        let mut watch = after_one_request(now);
        watch.read(b"\r\n\r\n\r\nGET / HT", now);
        assert_eq!(watch.deadline(), Some(now + TIMEOUT));
    }

    #[test]
    fn a_body_is_not_a_head() {
        let opened = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, opened);
        watch.read(b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", opened);
        assert_eq!(watch.deadline(), None);
        watch.read(b"cd", opened + Duration::from_secs(10));
        assert_eq!(watch.deadline(), None, "the body is timed elsewhere");
        watch.wrote(b"HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(watch.deadline(), None, "nothing read since");
    }

    #[test]
    fn an_interim_answer_leaves_the_body_to_come() {
        let now = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, now);
        watch.read(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", now);
        watch.wrote(b"HTTP/1.1 100 Continue\r\n\r\n");
        watch.read(b"a body", now);
        assert_eq!(watch.deadline(), None);
        // An interim answer and a final one in one write end the request.
        watch.wrote(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n");
        watch.read(b"G", now);
        assert_eq!(watch.deadline(), Some(now + TIMEOUT));
    }

    #[test]
    fn after_switching_protocols_nothing_is_a_head() {
        let now = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, now);
        watch.read(b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", now);
        watch.wrote(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        watch.read(b"\x81\x05frame", now);
        assert_eq!(watch.deadline(), None);
        watch.wrote(b"HTTP/1.1 200 looks like an answer\r\n\r\n");
        watch.read(b"GET", now);
        assert_eq!(watch.deadline(), None);
    }

    #[test]
    fn a_late_head_leaves_the_connection_timed_out() {
        let now = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, now);
        watch.read(b"GET", now);
        assert!(!watch.is_timed_out());
        watch.time_out();
        assert!(watch.is_timed_out());
        watch.read(b" / HTTP/1.1\r\n\r\n", now);
        assert!(watch.is_timed_out(), "nothing after brings it back");
        assert_eq!(watch.deadline(), None);
    }

    #[test]
    fn a_connection_is_unanswered_until_something_is_written_to_it() {
        let now = Instant::now();
        let mut watch = HeadWatch::new(TIMEOUT, now);
        assert!(watch.is_unanswered());
        watch.read(b"GET / HTTP/1.1\r\n\r\n", now);
        watch.wrote(b"");
        assert!(watch.is_unanswered());
        assert!(!after_one_request(now).is_unanswered());
    }
}
