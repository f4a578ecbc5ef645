//! Who is asking: a request signed with an account's key (RFC 9421, see `signing`), or a
//! short-lived bearer token that a signed request minted for a browser. One-time login codes
//! (the link `seed serve` prints) mint such a token once.
//!
//! A signed request's nonce is not taken here: it is taken in the same transaction as the
//! request's writes (see `seed_store::RequestNonce`), so a request refused later writes nothing.

use std::collections::HashMap;
use std::sync::Mutex;

use actix_web::HttpRequest;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::VerifyingKey;
use seed_events::AccountId;
use seed_store::{LoginCodeOutcome, MintOutcome, NonceOutcome, RequestNonce, Store};

use crate::error::ApiError;
use crate::signing::{self, RequestParts};

/// How long a minted bearer token is good for, by default: an hour.
pub const TOKEN_TTL_MS_DEFAULT: u64 = 60 * 60 * 1000;
/// Bearer tokens one account may hold at once, by default.
pub const TOKENS_PER_ACCOUNT_MAX_DEFAULT: u32 = 256;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub account_id: AccountId,
    /// The signed request's nonce, to take with its writes; `None` for a bearer token.
    pub nonce: Option<RequestNonce>,
}

/// A random token: 32 bytes, base64url.
pub fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("no random source")))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Public keys by account, as read from the store and ready to verify with: an account's key
/// never changes, so a key read once is good for the life of the process.
#[derive(Debug, Default)]
pub struct KeyCache {
    keys: Mutex<HashMap<AccountId, VerifyingKey>>,
}

impl KeyCache {
    /// The account's public key, `None` for an unknown account or a stored key that is no
    /// ed25519 key.
    pub async fn public_key(
        &self,
        store: &Store,
        account_id: AccountId,
    ) -> Result<Option<VerifyingKey>, ApiError> {
        if let Some(key) = lock(&self.keys).get(&account_id) {
            return Ok(Some(*key));
        }
        let Some(account) = store.get_account(account_id).await? else {
            return Ok(None);
        };
        let Ok(key) = signing::verifying_key(&account.public_key) else {
            return Ok(None);
        };
        lock(&self.keys).insert(account_id, key);
        Ok(Some(key))
    }

    /// Forgets a removed account's key.
    pub fn forget(&self, account_id: AccountId) {
        lock(&self.keys).remove(&account_id);
    }
}

/// How long the login link `seed serve` prints is good for, by default: 10 minutes.
pub const LOGIN_CODE_TTL_SECS_DEFAULT: u64 = 600;

/// Why a login code was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginRefused {
    #[error("the login link was used or is unknown")]
    Unknown,
    #[error(
        "the login link has expired: restart seed serve for a new one, or paste a token from \
         `seed token` into the sign-in form"
    )]
    Expired,
}

/// Bearer tokens and one-time login codes, kept in the store by their SHA-256 (so a restart
/// keeps browsers signed in, and any process sharing the database can check them). An account
/// holds at most `per_account_max` tokens that have not expired; expired ones are swept by the
/// service every minute.
#[derive(Debug, Clone)]
pub struct Tokens {
    store: Store,
    /// How long a minted token is good for.
    ttl_ms: i64,
    /// Tokens one account may hold at once; one more is refused (429).
    per_account_max: i64,
}

/// The hex SHA-256 of a token or login code: what the store keeps of it.
pub fn token_hash(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

impl Tokens {
    pub fn new(store: Store, ttl_ms: u64, per_account_max: usize) -> Tokens {
        Tokens {
            store,
            ttl_ms: i64::try_from(ttl_ms).unwrap_or(i64::MAX),
            per_account_max: i64::try_from(per_account_max).unwrap_or(i64::MAX),
        }
    }

    /// How long a minted token is good for, in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }

    /// A new token for `account_id` and when it expires, recorded with the signed request's
    /// nonce (when there is one) in one transaction; refused (429) when the account holds its
    /// most, and (401) when the account is gone, with nothing written.
    pub async fn mint(
        &self,
        nonce: Option<RequestNonce>,
        account_id: AccountId,
        now_ms: i64,
    ) -> Result<NonceOutcome<(String, i64)>, ApiError> {
        let token = random_token()?;
        let expires_at_ms = now_ms.saturating_add(self.ttl_ms);
        let outcome = self
            .store
            .mint_token(
                nonce,
                token_hash(&token),
                account_id,
                expires_at_ms,
                now_ms,
                self.per_account_max,
            )
            .await?;
        match outcome {
            NonceOutcome::Replayed => Ok(NonceOutcome::Replayed),
            NonceOutcome::Fresh(MintOutcome::Minted) => {
                Ok(NonceOutcome::Fresh((token, expires_at_ms)))
            }
            NonceOutcome::Fresh(MintOutcome::TooMany { .. }) => Err(ApiError::TooMany(format!(
                "this account holds {} bearer tokens, its most (tokens_per_account_max); sign \
                 one out (DELETE /v1/tokens/current) or wait for one to expire",
                self.per_account_max
            ))),
            NonceOutcome::Fresh(MintOutcome::NoAccount) => Err(ApiError::Unauthorized(
                "the account no longer exists".to_owned(),
            )),
        }
    }

    /// The token's account, while the token is good.
    pub async fn check(&self, token: &str, now_ms: i64) -> Result<Option<AccountId>, ApiError> {
        Ok(self
            .check_until(token, now_ms)
            .await?
            .map(|(account_id, _)| account_id))
    }

    /// The token's account and when the token expires, while it is good.
    pub async fn check_until(
        &self,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<(AccountId, i64)>, ApiError> {
        Ok(self.store.token_account(token_hash(token), now_ms).await?)
    }

    /// Revokes a token: refused from now on. Whether it was good.
    pub async fn revoke(&self, token: &str, now_ms: i64) -> Result<bool, ApiError> {
        Ok(self.store.revoke_token(token_hash(token), now_ms).await?)
    }

    /// Forgets the tokens and login codes that expired; how many tokens.
    pub async fn sweep(&self, now_ms: i64) -> Result<usize, ApiError> {
        let (n_tokens, _) = self.store.sweep_tokens(now_ms).await?;
        Ok(n_tokens)
    }

    /// A one-time login code for the account, good until `expires_at_ms`.
    pub async fn new_login_code(
        &self,
        account_id: AccountId,
        expires_at_ms: i64,
    ) -> Result<String, ApiError> {
        let code = random_token()?;
        self.store
            .add_login_code(token_hash(&code), account_id, expires_at_ms)
            .await?;
        Ok(code)
    }

    /// Takes a login code: its account once, before it expires; refused ever after.
    pub async fn take_login_code(
        &self,
        code: &str,
        now_ms: i64,
    ) -> Result<Result<AccountId, LoginRefused>, ApiError> {
        Ok(
            match self.store.take_login_code(token_hash(code), now_ms).await? {
                LoginCodeOutcome::Taken(account_id) => Ok(account_id),
                LoginCodeOutcome::Expired => Err(LoginRefused::Expired),
                LoginCodeOutcome::Unknown => Err(LoginRefused::Unknown),
            },
        )
    }
}

/// A length of time for a person: "1 hour", "90 minutes", "30 seconds".
pub fn describe_ms(ms: i64) -> String {
    let (n, unit) = match ms {
        ms if ms % 3_600_000 == 0 => (ms / 3_600_000, "hour"),
        ms if ms % 60_000 == 0 => (ms / 60_000, "minute"),
        ms if ms % 1000 == 0 => (ms / 1000, "second"),
        ms => (ms, "millisecond"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

/// The bearer token of an `Authorization` header, its scheme in any case (RFC 9110 §11.1).
pub fn bearer_token(request: &HttpRequest) -> Option<&str> {
    let value = request.headers().get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The signed parts of an actix request.
pub fn request_parts(request: &HttpRequest, covered: &[String]) -> RequestParts {
    let header = |name: &str| {
        let values: Vec<&str> = request
            .headers()
            .get_all(name)
            .filter_map(|value| value.to_str().ok())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    };
    let authority = header("host")
        .or_else(|| request.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    RequestParts {
        method: request.method().as_str().to_owned(),
        authority,
        path: request.uri().path().to_owned(),
        query: request.uri().query().map(str::to_owned),
        fields: covered
            .iter()
            .filter(|name| !name.starts_with('@'))
            .filter_map(|name| header(name).map(|value| (name.clone(), value)))
            .collect(),
    }
}

fn unauthorized(error: signing::Error) -> ApiError {
    tracing::debug!(%error, "request refused");
    ApiError::Unauthorized(error.to_string())
}

/// Who a request's head says is asking, checked before a byte of its body is read: a good
/// bearer token, or a signature that verifies over the head. The signature covers the
/// `Content-Digest` field, so what remains is to check the body against it ([`Self::with_body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadCaller {
    caller: Caller,
    /// The signed `Content-Digest` the body must match; `None` for a bearer token.
    content_digest: Option<String>,
}

impl HeadCaller {
    /// The caller, once the body matches the signed digest.
    pub fn with_body(&self, body: &[u8]) -> Result<Caller, ApiError> {
        if let Some(digest) = &self.content_digest {
            signing::check_content_digest(digest, body).map_err(unauthorized)?;
        }
        Ok(self.caller.clone())
    }
}

/// Authenticates a request from its head alone: a bearer token, or a signature that verifies.
/// A client refused here costs the service no body.
pub async fn authenticate_head(
    store: &Store,
    keys: &KeyCache,
    tokens: &Tokens,
    request: &HttpRequest,
    now_ms: i64,
) -> Result<HeadCaller, ApiError> {
    let headers = request.headers();
    if let Some(token) = bearer_token(request) {
        return match tokens.check(token, now_ms).await? {
            Some(account_id) => Ok(HeadCaller {
                caller: Caller {
                    account_id,
                    nonce: None,
                },
                content_digest: None,
            }),
            None => Err(ApiError::Unauthorized(
                "the token is unknown or expired".to_owned(),
            )),
        };
    }
    let field = |name: &'static str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .ok_or(signing::Error::Missing(name))
    };
    let input = field("signature-input").map_err(unauthorized)?;
    let signature = field("signature").map_err(unauthorized)?;
    let received = signing::parse_signature(input, signature).map_err(unauthorized)?;
    let signed =
        signing::check_params(&received.params, now_ms.div_euclid(1000)).map_err(unauthorized)?;
    let digest = field("content-digest").map_err(unauthorized)?;
    let account_id: AccountId = signed
        .keyid
        .parse()
        .map_err(|_| unauthorized(signing::Error::UnknownKey))?;
    let public_key = keys
        .public_key(store, account_id)
        .await?
        .ok_or_else(|| unauthorized(signing::Error::UnknownKey))?;
    let parts = request_parts(request, &received.params.components);
    let base = signing::signature_base(&parts, &received.params).map_err(unauthorized)?;
    signing::verify(&public_key, &base, &received.signature).map_err(unauthorized)?;
    Ok(HeadCaller {
        caller: Caller {
            account_id,
            nonce: Some(RequestNonce {
                key_id: account_id,
                nonce: signed.nonce,
                // Kept as long as a request created then could still be accepted.
                expires_at_ms: (signed.created + signing::CREATED_SKEW_SECS_MAX + 1) * 1000,
            }),
        },
        content_digest: Some(digest.to_owned()),
    })
}

/// Authenticates a request with its body: its head ([`authenticate_head`]), then the body
/// against the signed digest.
pub async fn authenticate(
    store: &Store,
    keys: &KeyCache,
    tokens: &Tokens,
    request: &HttpRequest,
    body: &[u8],
    now_ms: i64,
) -> Result<Caller, ApiError> {
    authenticate_head(store, keys, tokens, request, now_ms)
        .await?
        .with_body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tokens over a store in a temp dir holding account 7.
    async fn tokens(per_account_max: usize) -> (tempfile::TempDir, Tokens, AccountId) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store =
            Store::open(seed_store::Config::new(dir.path().join("seed.db"))).expect("opens");
        let account = AccountId::from_u128(7);
        store
            .create_account(account, vec![7; 32], 0)
            .await
            .expect("account");
        let tokens = Tokens::new(store, TOKEN_TTL_MS_DEFAULT, per_account_max);
        (dir, tokens, account)
    }

    async fn mint(tokens: &Tokens, account: AccountId, now_ms: i64) -> (String, i64) {
        match tokens.mint(None, account, now_ms).await.expect("mints") {
            NonceOutcome::Fresh(minted) => minted,
            NonceOutcome::Replayed => panic!("no nonce, no replay"),
        }
    }

    #[actix_web::test]
    async fn tokens_expire_and_login_codes_work_once() {
        let (_dir, tokens, account) = tokens(8).await;
        let (token, expires_at_ms) = mint(&tokens, account, 1_000).await;
        assert_eq!(expires_at_ms, 1_000 + TOKEN_TTL_MS_DEFAULT as i64);
        assert_eq!(tokens.check(&token, 1_001).await.ok(), Some(Some(account)));
        assert_eq!(tokens.check(&token, expires_at_ms).await.ok(), Some(None));
        assert_eq!(tokens.check("forged", 1_001).await.ok(), Some(None));
        let code = tokens.new_login_code(account, 2_000).await.expect("code");
        assert_eq!(
            tokens.take_login_code(&code, 1_999).await.ok(),
            Some(Ok(account))
        );
        assert_eq!(
            tokens.take_login_code(&code, 1_999).await.ok(),
            Some(Err(LoginRefused::Unknown))
        );
        assert!(tokens.revoke(&token, 1_002).await.expect("revokes"));
        assert_eq!(tokens.check(&token, 1_003).await.ok(), Some(None));
        assert!(!tokens.revoke(&token, 1_004).await.expect("revokes"));
    }

    #[actix_web::test]
    async fn a_login_code_expires() {
        let (_dir, tokens, account) = tokens(8).await;
        let code = tokens.new_login_code(account, 2_000).await.expect("code");
        let other = tokens.new_login_code(account, 5_000).await.expect("code");
        assert_eq!(
            tokens.take_login_code(&code, 2_000).await.ok(),
            Some(Err(LoginRefused::Expired))
        );
        assert_eq!(
            tokens.take_login_code(&code, 2_000).await.ok(),
            Some(Err(LoginRefused::Unknown)),
            "an expired code is forgotten once refused"
        );
        assert_eq!(
            tokens.take_login_code("forged", 2_000).await.ok(),
            Some(Err(LoginRefused::Unknown))
        );
        assert_eq!(
            tokens.take_login_code(&other, 4_999).await.ok(),
            Some(Ok(account))
        );
        assert!(
            LoginRefused::Expired.to_string().contains("expired"),
            "{}",
            LoginRefused::Expired
        );
    }

    #[actix_web::test]
    async fn an_account_holds_its_most_tokens_and_a_sweep_forgets_the_expired() {
        let (_dir, tokens, account) = tokens(2).await;
        mint(&tokens, account, 1_000).await;
        mint(&tokens, account, 2_000).await;
        let refused = tokens.mint(None, account, 3_000).await;
        assert!(matches!(refused, Err(ApiError::TooMany(_))), "{refused:?}");
        assert_eq!(tokens.store.count_tokens().await.ok(), Some(2));
        // The first token expired: the account has room again, and a sweep forgets it.
        let later = 1_000 + TOKEN_TTL_MS_DEFAULT as i64;
        mint(&tokens, account, later).await;
        assert_eq!(tokens.sweep(later).await.ok(), Some(1));
        assert_eq!(tokens.store.count_tokens().await.ok(), Some(2));
        let stranger = tokens.mint(None, AccountId::from_u128(8), 3_000).await;
        assert!(
            matches!(stranger, Err(ApiError::Unauthorized(_))),
            "{stranger:?}"
        );
    }

    #[test]
    fn the_store_keeps_a_hash_not_the_token() {
        let hash = token_hash("abc");
        assert_eq!(
            hash,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
