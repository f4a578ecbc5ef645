//! A model provider's stand-in on loopback for the provider tests and the bench: a tiny HTTP/1.1
//! server on `127.0.0.1:0` that answers each request with the next scripted reply (SSE in
//! chunks with delays, an error status, a stream cut mid-way, a stream that hangs), records
//! every request, and says when a client closed a stream it was holding open.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `200`, `text/event-stream`, chunked: each piece written after its delay, then `end`.
    Sse {
        pieces: Vec<(Duration, String)>,
        end: End,
    },
    /// A whole answer with `status`, `headers` and a JSON `body`.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `200` SSE of `n_deltas` pieces, each written `interval` after the last, each carrying
    /// the microseconds since the Unix epoch when it was written (`{STAMP}` in `template` is
    /// replaced by it): for latency measurements.
    Stamped {
        /// Written first.
        head: String,
        template: String,
        n_deltas: usize,
        interval: Duration,
        /// Written after the deltas.
        tail: String,
    },
}

/// How an SSE reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The last chunk, as a server that finished sends it.
    Finish,
    /// The connection closes without the last chunk: the stream broke.
    Cut,
    /// Nothing more is sent; the server waits for the client to close.
    Hang,
}

impl Reply {
    /// SSE of `pieces`, each `delay` after the last, ending normally.
    pub fn sse(pieces: impl IntoIterator<Item = String>, delay: Duration) -> Reply {
        Reply::Sse {
            pieces: pieces.into_iter().map(|piece| (delay, piece)).collect(),
            end: End::Finish,
        }
    }

    /// An error status with a JSON body.
    pub fn status(status: u16, body: serde_json::Value) -> Reply {
        Reply::Status {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The running server; it stops when dropped.
#[derive(Debug)]
pub struct SseServer {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    closed: tokio::sync::Mutex<mpsc::UnboundedReceiver<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SseServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Microseconds since the Unix epoch: the stamp a `Stamped` reply writes.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros() as u64)
        .unwrap_or(0)
}

impl SseServer {
    /// Starts a server that answers the n-th request with `replies[n]` (and 500 past the end).
    pub async fn start(replies: Vec<Reply>) -> anyhow::Result<SseServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let (closed_tx, closed_rx) = mpsc::unbounded_channel();
        let replies = Arc::new(replies);
        let task = tokio::spawn({
            let received = Arc::clone(&received);
            async move {
                loop {
                    let Ok((socket, _)) = listener.accept().await else {
                        return;
                    };
                    let received = Arc::clone(&received);
                    let replies = Arc::clone(&replies);
                    let closed_tx = closed_tx.clone();
                    tokio::spawn(async move {
                        let _ = serve(socket, &received, &replies, &closed_tx).await;
                    });
                }
            }
        });
        Ok(SseServer {
            url,
            received,
            closed: tokio::sync::Mutex::new(closed_rx),
            task,
        })
    }

    /// Every request so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until a client closes a stream the server held open (an `End::Hang` reply);
    /// returns the index of that request, or `None` after `timeout`.
    pub async fn wait_closed(&self, timeout: Duration) -> Option<usize> {
        let mut closed = self.closed.lock().await;
        tokio::time::timeout(timeout, closed.recv())
            .await
            .ok()
            .flatten()
    }
}

/// Reads one request (headers, then a body of `content-length` bytes).
async fn read_request(socket: &mut TcpStream) -> anyhow::Result<Received> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = socket.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the client closed before a whole request");
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let content_length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end..].to_vec();
    while body.len() < content_length {
        let n = socket.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the client closed before a whole body");
        body.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    Ok(Received {
        method,
        path,
        headers,
        body,
    })
}

async fn write_chunk(socket: &mut TcpStream, data: &str) -> std::io::Result<()> {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    socket.write_all(framed.as_bytes()).await?;
    socket.flush().await
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
     cache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

async fn serve(
    mut socket: TcpStream,
    received: &Mutex<Vec<Received>>,
    replies: &[Reply],
    closed: &mpsc::UnboundedSender<usize>,
) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let request = read_request(&mut socket).await?;
    let idx = {
        let mut received = received.lock().unwrap_or_else(PoisonError::into_inner);
        received.push(request);
        received.len() - 1
    };
    let reply = replies.get(idx).cloned().unwrap_or(Reply::Status {
        status: 500,
        headers: Vec::new(),
        body: r#"{"error": {"message": "the script has no more replies"}}"#.to_owned(),
    });
    match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
            socket.flush().await?;
        }
        Reply::Sse { pieces, end } => {
            socket.write_all(SSE_HEAD.as_bytes()).await?;
            for (delay, piece) in pieces {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                write_chunk(&mut socket, &piece).await?;
            }
            match end {
                End::Finish => {
                    socket.write_all(b"0\r\n\r\n").await?;
                    socket.flush().await?;
                }
                End::Cut => {}
                End::Hang => {
                    // The client sends nothing more: a read returns 0 (or fails) only when it
                    // closes the connection.
                    let mut byte = [0u8; 1];
                    let _ = socket.read(&mut byte).await;
                    let _ = closed.send(idx);
                }
            }
        }
        Reply::Stamped {
            head,
            template,
            n_deltas,
            interval,
            tail,
        } => {
            socket.write_all(SSE_HEAD.as_bytes()).await?;
            write_chunk(&mut socket, &head).await?;
            for _ in 0..n_deltas {
                tokio::time::sleep(interval).await;
                let piece = template.replace("{STAMP}", &now_micros().to_string());
                write_chunk(&mut socket, &piece).await?;
            }
            write_chunk(&mut socket, &tail).await?;
            socket.write_all(b"0\r\n\r\n").await?;
            socket.flush().await?;
        }
    }
    Ok(())
}

/// What an answering server ([`SseServer::start_answering`]) replies to a request.
pub type Answer = Box<dyn Fn(&Received) -> Reply + Send + Sync>;

impl SseServer {
    /// Starts a server that answers each request with what `answer` makes of it: for a stand-in
    /// whose replies depend on what it was sent (a prompt cache's usage, a scripted turn). Only
    /// `Reply::Sse` ending with `End::Finish` and `Reply::Status` are served; any other reply is
    /// answered with a 500 naming it.
    pub async fn start_answering(
        answer: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> anyhow::Result<SseServer> {
        let answer: Arc<Answer> = Arc::new(Box::new(answer));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        // No reply hangs, so none is ever reported closed.
        let (_closed_tx, closed_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn({
            let received = Arc::clone(&received);
            async move {
                loop {
                    let Ok((socket, _)) = listener.accept().await else {
                        return;
                    };
                    let received = Arc::clone(&received);
                    let answer = Arc::clone(&answer);
                    tokio::spawn(async move {
                        let _ = serve_answer(socket, &received, answer.as_ref()).await;
                    });
                }
            }
        });
        Ok(SseServer {
            url,
            received,
            closed: tokio::sync::Mutex::new(closed_rx),
            task,
        })
    }
}

async fn serve_answer(
    mut socket: TcpStream,
    received: &Mutex<Vec<Received>>,
    answer: &Answer,
) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let request = read_request(&mut socket).await?;
    let reply = answer(&request);
    received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    let (status, headers, body) = match reply {
        Reply::Sse {
            pieces,
            end: End::Finish,
        } => {
            socket.write_all(SSE_HEAD.as_bytes()).await?;
            for (delay, piece) in pieces {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                write_chunk(&mut socket, &piece).await?;
            }
            socket.write_all(b"0\r\n\r\n").await?;
            return Ok(socket.flush().await?);
        }
        Reply::Status {
            status,
            headers,
            body,
        } => (status, headers, body),
        other => (
            500,
            Vec::new(),
            serde_json::json!({"error": {"message": format!("not served here: {other:?}")}})
                .to_string(),
        ),
    };
    let mut head = format!(
        "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.write_all(body.as_bytes()).await?;
    Ok(socket.flush().await?)
}
