//! Bearer tokens and one-time login codes, kept by their SHA-256 (the caller hashes; the
//! database never holds a token itself). In the database rather than in a process, a restart
//! keeps browsers signed in and a request may reach any process that shares the database.
//! Both go with their account (`ON DELETE CASCADE`).

use crate::params;
use crate::sql::{Connection, OptionalExtension};
use seed_events::AccountId;

use crate::nonces::{NonceOutcome, RequestNonce, take_nonce};
use crate::{Error, Result, Store};

/// What minting a token came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MintOutcome {
    /// Recorded: the token is good until its expiry.
    Minted,
    /// The account holds its most tokens already: nothing was written.
    TooMany { held: i64 },
    /// The account does not exist (removed a moment before): nothing was written.
    NoAccount,
}

/// What taking a login code found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginCodeOutcome {
    /// The code was good: its account. It is gone now.
    Taken(AccountId),
    /// The code had expired; it is gone now.
    Expired,
    /// No such code (used before, or never made).
    Unknown,
}

fn account_id(text: &str) -> Result<AccountId> {
    text.parse()
        .map_err(|_| Error::corrupt("bearer_tokens", format_args!("account id {text:?}")))
}

/// Checks, then takes the nonce, then writes: a refusal (no account, too many tokens, a
/// replayed nonce) writes nothing.
fn mint(
    connection: &Connection,
    nonce: Option<&RequestNonce>,
    token_hash: &str,
    account: AccountId,
    expires_at_ms: i64,
    now_ms: i64,
    per_account_max: i64,
) -> Result<NonceOutcome<MintOutcome>> {
    let exists = connection
        .prepare_cached("SELECT 1 FROM accounts WHERE id = ?1")?
        .query_row(params![account.to_string()], |_| Ok(()))
        .optional()?
        .is_some();
    if !exists {
        return Ok(NonceOutcome::Fresh(MintOutcome::NoAccount));
    }
    let held: i64 = connection
        .prepare_cached(
            "SELECT COUNT(*) FROM bearer_tokens WHERE account_id = ?1 AND expires_at > ?2",
        )?
        .query_row(params![account.to_string(), now_ms], |row| row.get(0))?;
    if held >= per_account_max {
        return Ok(NonceOutcome::Fresh(MintOutcome::TooMany { held }));
    }
    if !take_nonce(connection, nonce)? {
        return Ok(NonceOutcome::Replayed);
    }
    connection
        .prepare_cached(
            "INSERT INTO bearer_tokens (token_hash, account_id, expires_at) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![token_hash, account.to_string(), expires_at_ms])?;
    Ok(NonceOutcome::Fresh(MintOutcome::Minted))
}

fn token_account(
    connection: &Connection,
    token_hash: &str,
    now_ms: i64,
) -> Result<Option<(AccountId, i64)>> {
    let found: Option<(String, i64)> = connection
        .prepare_cached(
            "SELECT account_id, expires_at FROM bearer_tokens \
             WHERE token_hash = ?1 AND expires_at > ?2",
        )?
        .query_row(params![token_hash, now_ms], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    found
        .map(|(account, expires_at_ms)| Ok((account_id(&account)?, expires_at_ms)))
        .transpose()
}

fn take_login_code(
    connection: &Connection,
    code_hash: &str,
    now_ms: i64,
) -> Result<LoginCodeOutcome> {
    let found: Option<(String, i64)> = connection
        .prepare_cached(
            "DELETE FROM login_codes WHERE code_hash = ?1 RETURNING account_id, expires_at",
        )?
        .query_row(params![code_hash], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    Ok(match found {
        None => LoginCodeOutcome::Unknown,
        Some((_, expires_at_ms)) if expires_at_ms <= now_ms => LoginCodeOutcome::Expired,
        Some((account, _)) => LoginCodeOutcome::Taken(account_id(&account)?),
    })
}

impl Store {
    /// Records a bearer token (by its hash) for `account` until `expires_at_ms`, unless the
    /// account holds `per_account_max` tokens that have not expired. A signed request's nonce
    /// is taken in the same transaction, only when the token is recorded.
    pub async fn mint_token(
        &self,
        nonce: Option<RequestNonce>,
        token_hash: String,
        account: AccountId,
        expires_at_ms: i64,
        now_ms: i64,
        per_account_max: i64,
    ) -> Result<NonceOutcome<MintOutcome>> {
        self.write(None, move |connection| {
            mint(
                connection,
                nonce.as_ref(),
                &token_hash,
                account,
                expires_at_ms,
                now_ms,
                per_account_max,
            )
        })
        .await
    }

    /// The account of a token that has not expired, and when it expires.
    pub async fn token_account(
        &self,
        token_hash: String,
        now_ms: i64,
    ) -> Result<Option<(AccountId, i64)>> {
        self.read(move |connection| token_account(connection, &token_hash, now_ms))
            .await
    }

    /// Revokes a token; whether it was good (held and not expired).
    pub async fn revoke_token(&self, token_hash: String, now_ms: i64) -> Result<bool> {
        self.write(None, move |connection| {
            let expires_at_ms: Option<i64> = connection
                .prepare_cached(
                    "DELETE FROM bearer_tokens WHERE token_hash = ?1 RETURNING expires_at",
                )?
                .query_row(params![token_hash], |row| row.get(0))
                .optional()?;
            Ok(expires_at_ms.is_some_and(|expires_at_ms| expires_at_ms > now_ms))
        })
        .await
    }

    /// Records a one-time login code (by its hash) for `account`, good until `expires_at_ms`.
    pub async fn add_login_code(
        &self,
        code_hash: String,
        account: AccountId,
        expires_at_ms: i64,
    ) -> Result<()> {
        self.write(None, move |connection| {
            connection
                .prepare_cached(
                    "INSERT INTO login_codes (code_hash, account_id, expires_at) \
                     VALUES (?1, ?2, ?3)",
                )?
                .execute(params![code_hash, account.to_string(), expires_at_ms])?;
            Ok(())
        })
        .await
    }

    /// Takes a login code: its account once, before it expires. A code is gone once asked
    /// for, expired or not.
    pub async fn take_login_code(
        &self,
        code_hash: String,
        now_ms: i64,
    ) -> Result<LoginCodeOutcome> {
        self.write(None, move |connection| {
            take_login_code(connection, &code_hash, now_ms)
        })
        .await
    }

    /// Forgets the tokens and login codes that expired by `now_ms`; how many of each.
    pub async fn sweep_tokens(&self, now_ms: i64) -> Result<(usize, usize)> {
        self.write(None, move |connection| {
            let tokens = connection
                .prepare_cached("DELETE FROM bearer_tokens WHERE expires_at <= ?1")?
                .execute(params![now_ms])?;
            let codes = connection
                .prepare_cached("DELETE FROM login_codes WHERE expires_at <= ?1")?
                .execute(params![now_ms])?;
            Ok((tokens, codes))
        })
        .await
    }

    /// Tokens held, expired or not (a figure for metrics and tests).
    pub async fn count_tokens(&self) -> Result<i64> {
        self.read(|connection| {
            connection
                .prepare_cached("SELECT COUNT(*) FROM bearer_tokens")?
                .query_row(params![], |row| row.get(0))
        })
        .await
    }
}
