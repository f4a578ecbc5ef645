//! An account's quota of sessions against a real `seed serve`: creating one past it is refused
//! with 429 and a JSON error that names the setting, and writes nothing; another account has
//! its own, and deleting a session makes room again.

use crate::common::{Server, new_session, row_counts};

#[actix_web::test]
async fn a_session_past_the_accounts_quota_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--account-sessions-max", "2"]);
    let client = server.client();
    let store = server.store();
    new_session(&client).await;
    let kept = new_session(&client).await;
    let before = row_counts(&store).await;

    let refused = client
        .request("POST", "/v1/sessions", Some(&serde_json::json!({})))
        .await
        .expect("an answer");
    assert_eq!(refused.status, 429, "{:?}", refused.value());
    assert_eq!(
        refused.value(),
        serde_json::json!({
            "error": "the account has 2 sessions, the most it may have (account_sessions_max); \
                      delete some to create another"
        })
    );
    assert_eq!(row_counts(&store).await, before, "nothing was written");

    // Another account's sessions are its own.
    let other = server.client_with(server.add_account());
    new_session(&other).await;
    // A deleted session makes room for another.
    let deleted = client
        .request("DELETE", &format!("/v1/sessions/{}", kept.id), None)
        .await
        .expect("an answer");
    assert!(
        (200..300).contains(&deleted.status),
        "{:?}",
        deleted.value()
    );
    new_session(&client).await;
}
