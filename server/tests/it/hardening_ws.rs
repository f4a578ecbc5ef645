//! The WebSocket `/v1/subscribe` under clients that misbehave, against a real `seed serve`: one
//! that stops reading is closed once its queue is full (saying so) while the others go on; one
//! that answers no ping is closed; sockets are capped per account and per token; a socket opened
//! with a bearer token is closed when the token expires or is signed out.
//!
//! The sockets here are opened by hand on a plain TCP stream, so that a client can stop reading
//! (with a small receive buffer, the service's sends stall after a few kilobytes) and read the
//! close frame the service sends.

use std::time::Duration;

use actix_codec::Framed;
use awc::ws::{Codec, Frame};
use futures::StreamExt;
use seed_server::client::{Client, next_update};
use seed_server::ws::Update;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Server, new_session, row_counts};

/// How long a test waits for what it expects before it fails: a hang guard, not a measure.
pub(crate) const HANG_GUARD: Duration = Duration::from_secs(60);

/// Waits for `future`, failing the test with `what` if it never comes.
pub(crate) async fn guarded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: nothing within the hang guard"))
}

/// A TCP connection to the service; with `recv_buffer_bytes`, its receive buffer that small.
pub(crate) async fn connect(url: &str, recv_buffer_bytes: Option<u32>) -> TcpStream {
    let address: std::net::SocketAddr = url
        .strip_prefix("http://")
        .expect("an http URL")
        .parse()
        .expect("an address");
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    if let Some(bytes) = recv_buffer_bytes {
        socket.set_recv_buffer_size(bytes).expect("sets the buffer");
    }
    socket.connect(address).await.expect("connects")
}

/// Reads a response head, byte by byte so as not to read past it: its status and its lines.
pub(crate) async fn read_head(stream: &mut TcpStream) -> (u16, String) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = stream.read(&mut byte).await.expect("reads the head");
        assert!(
            n == 1,
            "the connection closed inside a response head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).expect("a UTF-8 head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, head)
}

/// Reads a response body of the head's `Content-Length`.
pub(crate) async fn read_body(stream: &mut TcpStream, head: &str) -> String {
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("reads the body");
    String::from_utf8(body).expect("a UTF-8 body")
}

/// Opens `/v1/subscribe?token=TOKEN` by hand: the status, and the socket when it is 101 (the
/// answer's body otherwise).
pub(crate) async fn open(
    url: &str,
    token: &str,
    recv_buffer_bytes: Option<u32>,
) -> Result<Framed<TcpStream, Codec>, (u16, String)> {
    let mut stream = connect(url, recv_buffer_bytes).await;
    let authority = url.strip_prefix("http://").expect("an http URL");
    let request = format!(
        "GET /v1/subscribe?token={token} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("sends the upgrade");
    let (status, head) = read_head(&mut stream).await;
    if status != 101 {
        return Err((status, read_body(&mut stream, &head).await));
    }
    let codec = Codec::new().client_mode().max_size(64 * 1024 * 1024);
    Ok(Framed::new(stream, codec))
}

/// Opens a socket once a place is free for it (under a hang guard): a socket that closes frees
/// its place when its connection ends, a moment after.
async fn open_once_free(url: &str, token: &str, what: &str) -> Framed<TcpStream, Codec> {
    guarded(what, async {
        loop {
            if let Ok(socket) = open(url, token, None).await {
                break socket;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The close frame's code and description, reading (and never answering) what comes before
/// it; `None` when the socket ends without one. Stops early, with `None`, once `runs_finished`
/// runs were reported finished.
pub(crate) async fn close_frame(
    socket: &mut Framed<TcpStream, Codec>,
    runs_finished: Option<usize>,
) -> Option<(u16, String)> {
    let mut n_finished = 0;
    loop {
        match socket.next().await? {
            Ok(Frame::Close(reason)) => {
                let reason = reason.expect("the close frame says why");
                return Some((
                    u16::from(reason.code),
                    reason.description.unwrap_or_default(),
                ));
            }
            Ok(Frame::Text(text)) => {
                if let Ok(Update::RunFinished { .. }) = serde_json::from_slice(&text) {
                    n_finished += 1;
                    if runs_finished == Some(n_finished) {
                        return None;
                    }
                }
            }
            Ok(_) => {}
            Err(error) => panic!("the socket failed: {error}"),
        }
    }
}

/// A bearer token, minted by a signed request.
pub(crate) async fn mint(client: &Client) -> String {
    let minted: seed_server::api::TokenResponse = client
        .post("/v1/tokens", &json!({}))
        .await
        .expect("a token");
    minted.token
}

/// A client that never reads (the runs' updates pile up at the service) while another socket
/// of the same account reads them all: the stalled one is closed, and holds its place among the
/// account's sockets until it goes.
#[actix_web::test]
async fn a_subscriber_that_stops_reading_is_closed_saying_it_fell_behind_while_others_go_on() {
    const MESSAGES: usize = 128;
    let dir = tempfile::tempdir().expect("tempdir");
    // The stalled socket's close frame waits for room until the test reads it, after its runs
    // (on a loaded machine those take longer than the default 5 s).
    let server = Server::start(
        dir.path(),
        &[
            "--ws-queue-max",
            "16",
            "--ws-per-account-max",
            "2",
            "--ws-close-wait-ms",
            "600000",
        ],
    );
    let client = server.client();
    let token = mint(&client).await;
    let mut stalled = open(&server.url, &token, Some(4096))
        .await
        .expect("the socket opens");
    let mut reading = client.subscribe().await.expect("subscribes");
    let reader = actix_web::rt::spawn(async move {
        let mut n_finished = 0;
        while n_finished < MESSAGES {
            match next_update(&mut reading).await {
                Some(Update::RunFinished { .. }) => n_finished += 1,
                Some(_) => {}
                None => break,
            }
        }
        n_finished
    });
    let session = new_session(&client).await;
    let text = "x".repeat(60_000);
    for _ in 0..MESSAGES {
        let answer = client
            .request(
                "POST",
                &format!("/v1/sessions/{}/messages", session.id),
                Some(&json!({ "text": text, "wait": true })),
            )
            .await
            .expect("sends");
        assert_eq!(answer.status, 200, "{:?}", answer.value());
    }
    let n_finished = guarded("the reading socket's updates", reader)
        .await
        .expect("the reader ran");
    assert_eq!(
        n_finished, MESSAGES,
        "the reading socket heard every run end"
    );
    // The reader has gone, so its place is free; the stalled socket, closed by now, keeps its
    // own while its client holds the connection: it cannot open more than the account may hold.
    let _another = open_once_free(&server.url, &token, "the reader's place").await;
    let (status, body) = open(&server.url, &token, None)
        .await
        .expect_err("the stalled socket still holds its place");
    assert_eq!(status, 429, "{body}");
    // What the stalled socket holds ends with the close frame, before its last run's end.
    let closed = guarded("the stalled socket's close frame", async {
        close_frame(&mut stalled, Some(MESSAGES)).await
    })
    .await;
    let (code, description) = closed.expect("the stalled socket was closed before its last run");
    assert_eq!(code, 1013, "{description}");
    assert!(
        description.contains("fell behind") && description.contains("ws_queue_max"),
        "{description}"
    );
    // Its close frame read, the connection ends and the place is free.
    drop(stalled);
    open_once_free(&server.url, &token, "the stalled socket's place").await;
}

#[actix_web::test]
async fn a_socket_that_answers_no_ping_is_closed_saying_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--ws-ping-interval-ms", "100"]);
    let token = mint(&server.client()).await;
    let mut socket = open(&server.url, &token, None)
        .await
        .expect("the socket opens");
    let closed = guarded("the close frame", close_frame(&mut socket, None)).await;
    let (code, description) = closed.expect("closed with a close frame");
    assert_eq!(code, 1008, "{description}");
    assert!(
        description.contains("no answer to a ping within 100 ms"),
        "{description}"
    );
}

#[actix_web::test]
async fn a_socket_that_answers_pings_stays_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--ws-ping-interval-ms", "50"]);
    let client = server.client();
    let mut subscription = client.subscribe().await.expect("subscribes");
    let session = new_session(&client).await;
    // Pings go on while the socket waits; `next_update` answers each.
    let mut pings = 0;
    while pings < 5 {
        use futures::SinkExt as _;
        match guarded("a ping", subscription.next()).await {
            Some(Ok(Frame::Ping(bytes))) => {
                pings += 1;
                subscription
                    .send(awc::ws::Message::Pong(bytes))
                    .await
                    .expect("pongs");
            }
            Some(Ok(Frame::Close(reason))) => panic!("closed: {reason:?}"),
            Some(Ok(_)) => {}
            other => panic!("the socket ended: {other:?}"),
        }
    }
    client
        .request(
            "POST",
            &format!("/v1/sessions/{}/messages", session.id),
            Some(&json!({ "text": "still there?" })),
        )
        .await
        .expect("sends");
    loop {
        match guarded("the run's end", next_update(&mut subscription)).await {
            Some(Update::RunFinished { .. }) => break,
            Some(_) => {}
            None => panic!("the socket closed"),
        }
    }
}

#[actix_web::test]
async fn sockets_are_capped_per_token_and_per_account_with_a_clear_refusal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(
        dir.path(),
        &["--ws-per-token-max", "2", "--ws-per-account-max", "3"],
    );
    let client = server.client();
    let first = mint(&client).await;
    let second = mint(&client).await;
    let _a = open(&server.url, &first, None).await.expect("opens");
    let b = open(&server.url, &first, None).await.expect("opens");
    let (status, body) = open(&server.url, &first, None)
        .await
        .expect_err("a third socket of the token");
    assert_eq!(status, 429, "{body}");
    let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON error");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|text| text.contains("ws_per_token_max")),
        "{error}"
    );
    let _c = open(&server.url, &second, None).await.expect("opens");
    let (status, body) = open(&server.url, &second, None)
        .await
        .expect_err("a fourth socket of the account");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("ws_per_account_max"), "{body}");
    let before = row_counts(&server.store()).await;
    assert!(
        client.subscribe().await.is_err(),
        "a signed socket counts against the account too"
    );
    assert_eq!(
        row_counts(&server.store()).await,
        before,
        "the refused upgrade's nonce is not taken"
    );
    // A socket that closes frees its place.
    drop(b);
    open_once_free(&server.url, &first, "a place to free").await;
}

#[actix_web::test]
async fn a_socket_is_closed_when_its_token_expires() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--token-ttl-ms", "1000"]);
    let token = mint(&server.client()).await;
    let mut socket = open(&server.url, &token, None)
        .await
        .expect("the socket opens");
    let closed = guarded("the close frame", close_frame(&mut socket, None)).await;
    let (code, description) = closed.expect("closed with a close frame");
    assert_eq!((code, description.as_str()), (1008, "the token expired"));
}

#[actix_web::test]
async fn signing_out_revokes_the_token_and_closes_its_sockets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let token = mint(&client).await;
    let other = mint(&client).await;
    let mut socket = open(&server.url, &token, None).await.expect("opens");
    let mut other_socket = open(&server.url, &other, None).await.expect("opens");
    let bearer = |token: &str| vec![("Authorization", format!("Bearer {token}"))];
    let listed = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer(&token))
        .await
        .expect("lists");
    assert_eq!(listed.status, 200);
    let signed_out = client
        .send_raw("DELETE", "/v1/tokens/current", Vec::new(), &bearer(&token))
        .await
        .expect("signs out");
    assert_eq!(signed_out.status, 204, "{:?}", signed_out.value());
    let closed = guarded("the close frame", close_frame(&mut socket, None)).await;
    assert_eq!(closed, Some((1008, "the token was revoked".to_owned())));
    for (method, path) in [("GET", "/v1/sessions"), ("DELETE", "/v1/tokens/current")] {
        let refused = client
            .send_raw(method, path, Vec::new(), &bearer(&token))
            .await
            .expect("answers");
        assert_eq!(
            refused.status,
            401,
            "{method} {path}: {:?}",
            refused.value()
        );
    }
    assert_eq!(
        open(&server.url, &token, None)
            .await
            .err()
            .map(|(status, _)| status),
        Some(401)
    );
    // The other token, and its socket, are untouched.
    let listed = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer(&other))
        .await
        .expect("lists");
    assert_eq!(listed.status, 200);
    let session = new_session(&client).await;
    client
        .request(
            "POST",
            &format!("/v1/sessions/{}/messages", session.id),
            Some(&json!({ "text": "hello" })),
        )
        .await
        .expect("sends");
    assert_eq!(
        guarded(
            "the other socket's updates",
            close_frame(&mut other_socket, Some(1))
        )
        .await,
        None,
        "the other socket heard the run end, open"
    );
    // A signed request has no token to sign out.
    let refused = client
        .request("DELETE", "/v1/tokens/current", None)
        .await
        .expect("answers");
    assert_eq!(refused.status, 401, "{:?}", refused.value());
}
