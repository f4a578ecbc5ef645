//! The fallback namer: an untitled session is named from its first message.

use seed_events::body::kind;
use seed_events::{EventRole, SessionId};

use crate::env::RunEnv;

/// The fallback namer: an untitled session is named from its first message. It never
/// overrides a title the agent or the user gave.
pub(super) async fn name_if_untitled(env: &RunEnv, session_id: SessionId) {
    let log = match env.store.read_events(session_id, 1, 64, 64).await {
        Ok(log) => log,
        Err(error) => {
            tracing::debug!(%session_id, %error, "fallback namer");
            return;
        }
    };
    let Some(first) = log
        .iter()
        .find(|event| event.kind == kind::MESSAGE && event.role == Some(EventRole::User))
    else {
        return;
    };
    let body = first.body();
    let text = body.text().unwrap_or_default();
    let title: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let title: String = title
        .chars()
        .take(seed_events::limits::SESSION_TITLE_FROM_TEXT_CHARS)
        .collect();
    if title.is_empty() {
        return;
    }
    if let Err(error) = env
        .store
        .name_session_if_untitled(session_id, title, (env.clock)())
        .await
    {
        tracing::debug!(%session_id, %error, "fallback namer");
    }
}
