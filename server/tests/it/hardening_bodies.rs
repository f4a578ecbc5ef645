//! Slow and unauthenticated clients against a real `seed serve`, over plain TCP: a request that
//! is neither signed nor carries a good token is refused (401) before its body is read, however
//! large a body it announces; a signed request whose body dribbles in is refused (408) after the
//! body timeout; a request head that dribbles in, the first on its connection or a later one, is
//! cut off after the header timeout; a bearer token is taken with its scheme in any case, and an
//! account holds a bounded number of them.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Server, new_session, row_counts};
use crate::hardening_ws::{connect, guarded, mint, read_body, read_head};

/// A request head written by hand.
fn head(authority: &str, method: &str, path: &str, fields: &[(&str, String)]) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in fields {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

#[actix_web::test]
async fn an_unauthenticated_request_is_refused_before_its_body_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let authority = server.url.strip_prefix("http://").expect("http");
    let session = new_session(&server.client()).await;
    let before = row_counts(&server.store()).await;
    for (path, length) in [
        ("/v1/sessions".to_owned(), 1_000_000),
        (
            format!("/v1/sessions/{}/attachments?name=big.bin", session.id),
            10_000_000,
        ),
    ] {
        for auth in [
            vec![],
            vec![("Authorization", "Bearer made-up".to_owned())],
            vec![
                ("Signature-Input", "seed=();created=1".to_owned()),
                ("Signature", "seed=:AAAA:".to_owned()),
                ("Content-Digest", "sha-256=:AAAA:".to_owned()),
            ],
        ] {
            let mut stream = connect(&server.url, None).await;
            let mut fields = vec![
                ("Content-Type", "application/octet-stream".to_owned()),
                ("Content-Length", length.to_string()),
            ];
            fields.extend(auth.clone());
            stream
                .write_all(head(authority, "POST", &path, &fields).as_bytes())
                .await
                .expect("sends the head");
            // Not a byte of the body is sent: the answer comes anyway.
            let (status, answer_head) = guarded("the answer", read_head(&mut stream)).await;
            let body = read_body(&mut stream, &answer_head).await;
            assert_eq!(status, 401, "{path} {auth:?}: {body}");
            let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON error");
            assert!(error["error"].is_string(), "{error}");
            // And the connection is closed: the body it announced is never waited for.
            let mut rest = Vec::new();
            guarded("the connection's end", stream.read_to_end(&mut rest))
                .await
                .ok();
            assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
        }
    }
    assert_eq!(row_counts(&server.store()).await, before, "nothing written");
}

#[actix_web::test]
async fn a_signed_request_whose_body_dribbles_in_is_refused_after_the_body_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--body-timeout-ms", "300"]);
    let client = server.client();
    let authority = server.url.strip_prefix("http://").expect("http");
    let before = row_counts(&server.store()).await;
    let body = json!({ "title": "t".repeat(100) }).to_string();
    let mut fields: Vec<(&str, String)> = client
        .signature_fields("POST", "/v1/sessions", body.as_bytes())
        .into_iter()
        .collect();
    fields.push(("Content-Type", "application/json".to_owned()));
    fields.push(("Content-Length", body.len().to_string()));
    let mut stream = connect(&server.url, None).await;
    stream
        .write_all(head(authority, "POST", "/v1/sessions", &fields).as_bytes())
        .await
        .expect("sends the head");
    // Half the body, and the rest never.
    stream
        .write_all(&body.as_bytes()[..body.len() / 2])
        .await
        .expect("sends half");
    let (status, answer_head) = guarded("the answer", read_head(&mut stream)).await;
    let answer = read_body(&mut stream, &answer_head).await;
    assert_eq!(status, 408, "{answer}");
    let error: serde_json::Value = serde_json::from_str(&answer).expect("a JSON error");
    assert!(
        error["error"]
            .as_str()
            .is_some_and(|text| text.contains("300 ms") && text.contains("body_timeout_ms")),
        "{error}"
    );
    assert_eq!(row_counts(&server.store()).await, before, "nothing written");
    // A body that comes in time is taken.
    let created = client
        .request("POST", "/v1/sessions", Some(&json!({})))
        .await
        .expect("answers");
    assert_eq!(created.status, 201, "{:?}", created.value());
}

/// The pause between two bytes of a head that dribbles in.
const DRIBBLE_PAUSE: Duration = Duration::from_millis(100);

/// Sends `bytes` one at a time, `DRIBBLE_PAUSE` apart, watching between them for the service to
/// end the connection. Returns what the service sent before it ended it (empty for a plain
/// close), or `None` when every byte went out and the connection is still open.
async fn dribble(stream: &mut TcpStream, bytes: &[u8]) -> Option<String> {
    for byte in bytes {
        if stream.write_all(&[*byte]).await.is_err() {
            return Some(String::new());
        }
        let mut answer = vec![0u8; 1024];
        match tokio::time::timeout(DRIBBLE_PAUSE, stream.read(&mut answer)).await {
            // Still open: nothing came within the pause.
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => return Some(String::new()),
            Ok(Ok(n)) => {
                answer.truncate(n);
                let mut rest = Vec::new();
                guarded("the connection's end", stream.read_to_end(&mut rest))
                    .await
                    .ok();
                answer.extend(rest);
                return Some(String::from_utf8_lossy(&answer).into_owned());
            }
        }
    }
    None
}

/// A request head that never ends: `n_bytes` of it, a request line and a field that goes on.
fn endless_head(authority: &str, n_bytes: usize) -> Vec<u8> {
    let mut head = format!("GET /healthz HTTP/1.1\r\nHost: {authority}\r\nX-Slow: ").into_bytes();
    head.resize(n_bytes, b'a');
    head
}

#[actix_web::test]
async fn a_request_head_that_dribbles_in_is_cut_off_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--header-timeout-ms", "300"]);
    let authority = server.url.strip_prefix("http://").expect("http");
    let mut stream = connect(&server.url, None).await;
    // 40 bytes take 4 s: far past the 300 ms set, within the 5 s default.
    let answer = dribble(&mut stream, &endless_head(authority, 40))
        .await
        .expect("the connection ends while the head is still coming");
    // The service answers 408 and closes, or closes.
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[actix_web::test]
async fn a_later_request_head_on_a_kept_alive_connection_is_cut_off_after_the_header_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--header-timeout-ms", "300"]);
    let authority = server.url.strip_prefix("http://").expect("http");
    let mut stream = connect(&server.url, None).await;
    // A first request, whole and quick: answered, and the connection kept.
    stream
        .write_all(head(authority, "GET", "/healthz", &[]).as_bytes())
        .await
        .expect("sends a head");
    let (status, answer_head) = guarded("the answer", read_head(&mut stream)).await;
    let body = read_body(&mut stream, &answer_head).await;
    assert_eq!(status, 200, "{body}");
    // The next head dribbles in: 100 bytes would take 10 s.
    let answer = dribble(&mut stream, &endless_head(authority, 100))
        .await
        .expect("the connection ends while the second head is still coming");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[actix_web::test]
async fn a_bearer_token_is_taken_with_its_scheme_in_any_case() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let client = server.client();
    let token = mint(&client).await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let listed = client
            .send_raw(
                "GET",
                "/v1/sessions",
                Vec::new(),
                &[("Authorization", format!("{scheme} {token}"))],
            )
            .await
            .expect("answers");
        assert_eq!(listed.status, 200, "{scheme}: {:?}", listed.value());
    }
}

#[actix_web::test]
async fn an_account_holds_a_bounded_number_of_tokens_and_signing_out_frees_a_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--tokens-per-account-max", "2"]);
    let client = server.client();
    let first = mint(&client).await;
    let _second = mint(&client).await;
    let before = row_counts(&server.store()).await;
    let refused = client
        .request("POST", "/v1/tokens", Some(&json!({})))
        .await
        .expect("answers");
    assert_eq!(refused.status, 429, "{:?}", refused.value());
    assert_eq!(
        row_counts(&server.store()).await,
        before,
        "the refused mint's nonce is not taken"
    );
    assert!(
        refused.value()["error"]
            .as_str()
            .is_some_and(|text| text.contains("tokens_per_account_max")),
        "{:?}",
        refused.value()
    );
    let signed_out = client
        .send_raw(
            "DELETE",
            "/v1/tokens/current",
            Vec::new(),
            &[("Authorization", format!("Bearer {first}"))],
        )
        .await
        .expect("signs out");
    assert_eq!(signed_out.status, 204);
    mint(&client).await;
}
