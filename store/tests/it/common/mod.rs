//! Set-up shared by the store's integration tests.

#![allow(dead_code)]

use seed_events::{AccountId, SessionId};
use seed_store::{Config, NewSession, Store};

pub fn account() -> AccountId {
    AccountId::from_u128(0xacc)
}

pub fn session(idx: u128) -> SessionId {
    SessionId::from_u128(0x5e55_0000 + idx)
}

/// A fresh database in a temp dir, with one account.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Store,
}

impl Fixture {
    pub fn new() -> anyhow::Result<Fixture> {
        Self::with(|_| {})
    }

    pub fn with(configure: impl FnOnce(&mut Config)) -> anyhow::Result<Fixture> {
        let dir = tempfile::tempdir()?;
        let mut config = Config::new(dir.path().join("seed.db"));
        configure(&mut config);
        let store = Store::open(config)?;
        futures::executor::block_on(store.create_account(account(), vec![1, 2, 3], 0))?;
        Ok(Fixture { dir, store })
    }

    pub fn db_path(&self) -> std::path::PathBuf {
        self.store.config().path.clone()
    }

    /// Creates sessions `0..n_sessions` for the fixture's account.
    pub fn create_sessions(&self, n_sessions: u128) -> anyhow::Result<Vec<SessionId>> {
        let mut ids = Vec::new();
        for idx in 0..n_sessions {
            let id = session(idx);
            futures::executor::block_on(self.store.create_session(NewSession::new(
                id,
                account(),
                idx as i64,
            )))?;
            ids.push(id);
        }
        Ok(ids)
    }

    /// A raw connection to the same database, for checks the typed API does not offer.
    pub fn raw(&self) -> anyhow::Result<rusqlite::Connection> {
        let connection = rusqlite::Connection::open(self.db_path())?;
        connection.pragma_update(None, "foreign_keys", true)?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(connection)
    }
}

/// A person's message, as the log takes it.
pub fn user_message(text: &str) -> seed_events::NewEvent {
    seed_events::NewEvent::message(
        seed_events::EventRole::User,
        "user",
        serde_json::json!({ "text": text }),
        3,
    )
}
