//! Resuming a session's stream on `/v1/subscribe`, against a real `seed serve`: a client that
//! drops its socket mid-answer and reconnects with the last seq and offset it saw gets exactly
//! what it missed, and the text it assembles is the committed answer; a resume point in another
//! account's session, an unknown one or a malformed one is refused before the upgrade.

use actix_codec::Framed;
use awc::ws::{Codec, Frame, Message};
use futures::{SinkExt, StreamExt};
use seed_server::api::{EventInfo, EventsResponse, MessageSessionResponse};
use seed_server::client::Client;
use seed_server::ws::Update;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::common::{Server, new_session};
use crate::hardening_ws::{connect, guarded, mint, read_body, read_head};

type Socket = Framed<TcpStream, Codec>;

/// Opens `/v1/subscribe?token=TOKEN&QUERY` by hand: the socket, or the refusal's status and
/// body.
async fn open(url: &str, token: &str, query: &str) -> Result<Socket, (u16, String)> {
    let mut stream = connect(url, None).await;
    let authority = url.strip_prefix("http://").expect("an http URL");
    let request = format!(
        "GET /v1/subscribe?token={token}&{query} HTTP/1.1\r\nHost: {authority}\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("sends the upgrade");
    let (status, head) = read_head(&mut stream).await;
    if status != 101 {
        return Err((status, read_body(&mut stream, &head).await));
    }
    Ok(Framed::new(
        stream,
        Codec::new().client_mode().max_size(64 * 1024 * 1024),
    ))
}

/// The next update on `socket`, answering pings, under the hang guard.
async fn next(socket: &mut Socket) -> Update {
    guarded("an update", async {
        loop {
            match socket.next().await.expect("the socket is open") {
                Ok(Frame::Text(text)) => break serde_json::from_slice(&text).expect("an update"),
                Ok(Frame::Ping(bytes)) => socket
                    .send(Message::Pong(bytes))
                    .await
                    .expect("answers a ping"),
                Ok(Frame::Close(reason)) => panic!("the socket closed: {reason:?}"),
                Ok(_) => {}
                Err(error) => panic!("the socket failed: {error}"),
            }
        }
    })
    .await
}

/// What a client holds of one session, built from its updates alone: the last seq it saw, the
/// text of the response in flight, and each committed answer with the text streamed for it.
#[derive(Debug, Default)]
struct Held {
    last_seq: i64,
    streaming: String,
    /// (the answer's committed text, the text streamed when it was committed)
    answers: Vec<(String, String)>,
    /// Text deltas taken, all sockets together.
    n_deltas: usize,
}

impl Held {
    /// Takes in `update` of the session; for a change, reads the events it names, as a client
    /// does. Whether the run `run_id` finished.
    async fn take(
        &mut self,
        client: &Client,
        session_id: uuid::Uuid,
        run_id: uuid::Uuid,
        update: Update,
    ) -> bool {
        match update {
            Update::TextDelta {
                session_id: s,
                offset_chars,
                text,
                ..
            } if s.0 == session_id => {
                assert_eq!(
                    offset_chars,
                    self.streaming.chars().count(),
                    "each delta starts where the text held ends: no gap, no repeat \
                     (held {:?}, got {text:?})",
                    self.streaming
                );
                self.streaming.push_str(&text);
                self.n_deltas += 1;
            }
            Update::Events {
                session_id: s,
                events,
            } if s.0 == session_id => self.commit(events),
            Update::SessionChange {
                session_id: s,
                to_seq: Some(to),
                ..
            } if s.0 == session_id && to > self.last_seq => {
                let page: EventsResponse = client
                    .get(&format!(
                        "/v1/sessions/{session_id}/events?from_seq={}&to_seq={to}",
                        self.last_seq + 1
                    ))
                    .await
                    .expect("the events of a change");
                self.commit(page.events);
            }
            Update::RunFinished { run_id: r, .. } => return r.0 == run_id,
            _ => {}
        }
        false
    }

    fn commit(&mut self, events: Vec<EventInfo>) {
        for event in events {
            assert_eq!(
                event.seq,
                self.last_seq + 1,
                "events come in order, each once"
            );
            self.last_seq = event.seq;
            if event.event_type == "message" && event.role.as_deref() == Some("assistant") {
                let text = event.content["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                self.answers
                    .push((text, std::mem::take(&mut self.streaming)));
            }
        }
    }
}

#[actix_web::test]
async fn a_client_that_drops_its_socket_mid_answer_resumes_and_assembles_the_committed_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let token = mint(&client).await;
    let session = new_session(&client).await;
    let id = session.id;
    let mut watcher = open(&server.url, &token, "").await.expect("a watcher");
    let mut socket = open(&server.url, &token, &format!("session={id}&after_seq=0"))
        .await
        .expect("subscribes");
    let words: Vec<String> = (0..120).map(|n| format!("word{n}")).collect();
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{id}/messages"),
            &json!({"text": format!("[slow 40] {}", words.join(" "))}),
        )
        .await
        .expect("sent");
    let run_id = sent.run_id;

    // Read part of the answer, then drop the socket.
    let mut held = Held::default();
    while held.streaming.chars().count() < 20 {
        let update = next(&mut socket).await;
        assert!(
            !held.take(&client, id, run_id, update).await,
            "cut mid-answer"
        );
    }
    assert!(held.answers.is_empty(), "the answer is still in flight");
    drop(socket);
    let (after_seq, offset_chars) = (held.last_seq, held.streaming.chars().count());

    // While it is away, the answer goes on.
    loop {
        if let Update::TextDelta {
            offset_chars: at,
            text,
            ..
        } = next(&mut watcher).await
            && at + text.chars().count() >= offset_chars + 20
        {
            break;
        }
    }
    let mut socket = open(
        &server.url,
        &token,
        &format!("session={id}&after_seq={after_seq}&offset_chars={offset_chars}"),
    )
    .await
    .expect("resumes");
    let n_before = held.n_deltas;
    loop {
        let update = next(&mut socket).await;
        if held.take(&client, id, run_id, update).await {
            break;
        }
    }
    assert!(
        held.n_deltas > n_before,
        "the resumed socket streamed the rest of the answer"
    );
    let committed: EventsResponse = client
        .get(&format!("/v1/sessions/{id}/events"))
        .await
        .expect("events");
    let answer = committed
        .events
        .iter()
        .find(|event| event.event_type == "message" && event.role.as_deref() == Some("assistant"))
        .and_then(|event| event.content["text"].as_str())
        .expect("the committed answer")
        .to_owned();
    assert_eq!(answer, format!("You said: {}", words.join(" ")));
    assert_eq!(
        held.answers,
        [(answer.clone(), answer)],
        "the text streamed across the reconnection is the committed answer, byte for byte"
    );
    assert_eq!(held.last_seq, committed.events.last().expect("events").seq);
}

/// The answer the client held part of is committed while it is away, and the next one streams:
/// the catch-up's events hold the first answer whole, and the text in flight comes from its
/// start, not from the offset the client held of the first.
#[actix_web::test]
async fn a_client_away_while_its_answer_was_committed_gets_it_in_the_events_and_the_next_from_its_start()
 {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let token = mint(&client).await;
    let session = new_session(&client).await;
    let id = session.id;
    let mut watcher = open(&server.url, &token, "").await.expect("a watcher");
    let mut socket = open(&server.url, &token, &format!("session={id}"))
        .await
        .expect("subscribes");
    let first: Vec<String> = (0..30).map(|n| format!("first{n}")).collect();
    let sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{id}/messages"),
            &json!({"text": format!("[slow 20] {}", first.join(" "))}),
        )
        .await
        .expect("sent");
    let mut held = Held::default();
    while held.streaming.chars().count() < 20 {
        let update = next(&mut socket).await;
        assert!(
            !held.take(&client, id, sent.run_id, update).await,
            "cut mid-answer"
        );
    }
    drop(socket);
    let (after_seq, offset_chars) = (held.last_seq, held.streaming.chars().count());
    let held_part = held.streaming.clone();
    loop {
        if let Update::RunFinished { run_id, .. } = next(&mut watcher).await
            && run_id.0 == sent.run_id
        {
            break;
        }
    }
    let second: Vec<String> = (0..100).map(|n| format!("second{n}")).collect();
    let next_sent: MessageSessionResponse = client
        .post(
            &format!("/v1/sessions/{id}/messages"),
            &json!({"text": format!("[slow 40] {}", second.join(" "))}),
        )
        .await
        .expect("sent");
    loop {
        if let Update::TextDelta {
            run_id,
            offset_chars: at,
            text,
            ..
        } = next(&mut watcher).await
            && run_id.0 == next_sent.run_id
            && at + text.chars().count() >= 20
        {
            break;
        }
    }
    let mut socket = open(
        &server.url,
        &token,
        &format!("session={id}&after_seq={after_seq}&offset_chars={offset_chars}"),
    )
    .await
    .expect("resumes");
    loop {
        let update = next(&mut socket).await;
        if held.take(&client, id, next_sent.run_id, update).await {
            break;
        }
    }
    let first_answer = format!("You said: {}", first.join(" "));
    let second_answer = format!("You said: {}", second.join(" "));
    assert_eq!(
        held.answers,
        [
            (first_answer, held_part),
            (second_answer.clone(), second_answer)
        ],
        "the first answer from the events (its start streamed before), the second streamed \
         whole across the reconnection"
    );
}

#[actix_web::test]
async fn a_resume_point_in_another_account_s_session_an_unknown_one_or_a_malformed_one_is_refused()
{
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let token = mint(&client).await;
    let session = new_session(&client).await;
    let id = session.id;
    client
        .post(
            &format!("/v1/sessions/{id}/messages"),
            &json!({"text": "a secret", "wait": true}),
        )
        .await
        .map(|_: MessageSessionResponse| ())
        .expect("answered");
    let other = server.client_with(server.add_account());
    let other_token = mint(&other).await;

    let refusal = |query: String, token: String| {
        let url = server.url.clone();
        async move {
            match open(&url, &token, &query).await {
                Ok(_) => panic!("{query}: upgraded"),
                Err((status, body)) => (status, body),
            }
        }
    };
    let (status, body) = refusal(format!("session={id}&after_seq=0"), other_token.clone()).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("session not found"), "{body}");
    assert!(!body.contains("secret"), "no data: {body}");
    let unknown = uuid::Uuid::from_u128(42);
    let (status, body) = refusal(format!("session={unknown}"), token.clone()).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = refusal("after_seq=3".to_owned(), token.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("session"), "{body}");
    let (status, body) = refusal(format!("session={id}&after_seq=-1"), token.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("after_seq"), "{body}");
    let (status, body) = refusal(format!("session={id}&after_seq=99"), token.clone()).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("log ends before it"), "{body}");
    // The owner resumes it.
    let mut socket = open(&server.url, &token, &format!("session={id}&after_seq=1"))
        .await
        .expect("the owner resumes");
    match next(&mut socket).await {
        Update::Events { session_id, events } => {
            assert_eq!(session_id.0, id);
            assert_eq!(events.first().map(|event| event.seq), Some(2));
        }
        other => panic!("the catch-up comes first, not {other:?}"),
    }
}
