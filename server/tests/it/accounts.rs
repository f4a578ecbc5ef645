//! Removing an account (`DELETE /v1/account`) against a real `seed serve`: everything it held
//! goes, its key signs nothing more, its bearer tokens die with it and its sockets are closed;
//! the service's own account is refused. Bearer tokens are kept by their hash and outlive a
//! restart.

use serde_json::json;

use crate::common::{Server, new_session, row_counts};
use crate::hardening_ws::{close_frame, guarded, mint, open};

#[actix_web::test]
async fn a_removed_accounts_data_tokens_and_sockets_go_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let local = server.client();
    let kept = new_session(&local).await;
    let before = row_counts(&server.store()).await;

    let client = server.client_with(server.add_account());
    let session = new_session(&client).await;
    let sent = client
        .request(
            "POST",
            &format!("/v1/sessions/{}/messages", session.id),
            Some(&json!({ "text": "remember me", "wait": true })),
        )
        .await
        .expect("sends");
    assert_eq!(sent.value()["status"], "succeeded", "{:?}", sent.value());
    let token = mint(&client).await;
    let mut socket = open(&server.url, &token, None).await.expect("opens");
    let bearer = vec![("Authorization", format!("Bearer {token}"))];

    // The service's own account is not removed.
    let refused = local
        .request("DELETE", "/v1/account", None)
        .await
        .expect("answers");
    assert_eq!(refused.status, 409, "{:?}", refused.value());

    let removed = client
        .send_raw("DELETE", "/v1/account", Vec::new(), &bearer)
        .await
        .expect("removes");
    assert_eq!(removed.status, 204, "{:?}", removed.value());
    let closed = guarded("the close frame", close_frame(&mut socket, None)).await;
    assert_eq!(closed, Some((1008, "the account was removed".to_owned())));

    // Its token and its key are refused from now on, and its token opens no socket.
    let by_token = client
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer)
        .await
        .expect("answers");
    assert_eq!(by_token.status, 401, "{:?}", by_token.value());
    let signed = client
        .request("GET", "/v1/sessions", None)
        .await
        .expect("answers");
    assert_eq!(signed.status, 401, "{:?}", signed.value());
    assert_eq!(
        open(&server.url, &token, None)
            .await
            .err()
            .map(|(status, _)| status),
        Some(401)
    );

    // Every row it held is gone; the other account's are as they were.
    assert_eq!(row_counts(&server.store()).await, before);
    let listed: seed_server::api::ListSessionsResponse =
        local.get("/v1/sessions").await.expect("lists");
    let ids: Vec<_> = listed.sessions.iter().map(|session| session.id).collect();
    assert_eq!(ids, [kept.id]);
}

/// A bearer token is kept in the database by its hash: it outlives a restart of the service,
/// and the database files never hold the token itself.
#[actix_web::test]
async fn a_bearer_token_outlives_a_restart_and_the_database_holds_only_its_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let token = mint(&server.client()).await;
    let data_dir = server.data_dir.clone();
    assert!(server.terminate().success(), "seed serve drained");

    for name in ["seed.db", "seed.db-wal"] {
        let Ok(bytes) = std::fs::read(data_dir.join(name)) else {
            continue;
        };
        assert!(
            !bytes
                .windows(token.len())
                .any(|window| window == token.as_bytes()),
            "{name} holds the token itself"
        );
    }

    let server = Server::start(dir.path(), &[]);
    let bearer = vec![("Authorization", format!("Bearer {token}"))];
    let listed = server
        .client()
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer)
        .await
        .expect("answers");
    assert_eq!(listed.status, 200, "{:?}", listed.value());
    let signed_out = server
        .client()
        .send_raw("DELETE", "/v1/tokens/current", Vec::new(), &bearer)
        .await
        .expect("answers");
    assert_eq!(signed_out.status, 204);
    let refused = server
        .client()
        .send_raw("GET", "/v1/sessions", Vec::new(), &bearer)
        .await
        .expect("answers");
    assert_eq!(refused.status, 401);
}
