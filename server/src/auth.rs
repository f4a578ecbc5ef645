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
use seed_store::{RequestNonce, Store};

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

/// Bearer tokens and one-time login codes, in memory: a restart signs browsers out. The table is
/// bounded: an account holds at most `per_account_max` tokens, and expired ones are swept (at
/// each mint, and by the service every minute).
#[derive(Debug)]
pub struct Tokens {
    /// How long a minted token is good for.
    ttl_ms: i64,
    /// Tokens one account may hold at once; one more is refused (429).
    per_account_max: usize,
    /// token -> (account, expires_at_ms)
    tokens: Mutex<HashMap<String, (AccountId, i64)>>,
    /// code -> (account, expires_at_ms); each is taken once
    login_codes: Mutex<HashMap<String, (AccountId, i64)>>,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::new(
            TOKEN_TTL_MS_DEFAULT,
            TOKENS_PER_ACCOUNT_MAX_DEFAULT as usize,
        )
    }
}

impl Tokens {
    pub fn new(ttl_ms: u64, per_account_max: usize) -> Tokens {
        Tokens {
            ttl_ms: i64::try_from(ttl_ms).unwrap_or(i64::MAX),
            per_account_max,
            tokens: Mutex::default(),
            login_codes: Mutex::default(),
        }
    }

    /// How long a minted token is good for, in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        self.ttl_ms
    }

    /// A new token for `account_id` and when it expires; refused (429) when the account holds
    /// its most.
    pub fn mint(&self, account_id: AccountId, now_ms: i64) -> Result<(String, i64), ApiError> {
        let token = random_token()?;
        let expires_at_ms = now_ms.saturating_add(self.ttl_ms);
        let mut tokens = lock(&self.tokens);
        tokens.retain(|_, (_, expires)| *expires > now_ms);
        let held = tokens
            .values()
            .filter(|(owner, _)| *owner == account_id)
            .count();
        if held >= self.per_account_max {
            return Err(ApiError::TooMany(format!(
                "this account holds {} bearer tokens, its most (tokens_per_account_max); sign \
                 one out (DELETE /v1/tokens/current) or wait for one to expire",
                self.per_account_max
            )));
        }
        tokens.insert(token.clone(), (account_id, expires_at_ms));
        Ok((token, expires_at_ms))
    }

    pub fn check(&self, token: &str, now_ms: i64) -> Option<AccountId> {
        self.check_until(token, now_ms)
            .map(|(account_id, _)| account_id)
    }

    /// The token's account and when the token expires, while it is good.
    pub fn check_until(&self, token: &str, now_ms: i64) -> Option<(AccountId, i64)> {
        lock(&self.tokens)
            .get(token)
            .filter(|(_, expires)| *expires > now_ms)
            .copied()
    }

    /// Revokes a token: refused from now on. Whether it was held.
    pub fn revoke(&self, token: &str) -> bool {
        lock(&self.tokens).remove(token).is_some()
    }

    /// Revokes every token of a removed account; returns how many.
    pub fn forget_account(&self, account_id: AccountId) -> usize {
        let mut tokens = lock(&self.tokens);
        let before = tokens.len();
        tokens.retain(|_, (owner, _)| *owner != account_id);
        lock(&self.login_codes).retain(|_, (owner, _)| *owner != account_id);
        before - tokens.len()
    }

    /// Forgets the tokens that expired; returns how many.
    pub fn sweep(&self, now_ms: i64) -> usize {
        let mut tokens = lock(&self.tokens);
        let before = tokens.len();
        tokens.retain(|_, (_, expires)| *expires > now_ms);
        before - tokens.len()
    }

    /// Tokens held, expired or not.
    pub fn len(&self) -> usize {
        lock(&self.tokens).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A one-time login code for the account, good until `expires_at_ms`.
    pub fn new_login_code(
        &self,
        account_id: AccountId,
        expires_at_ms: i64,
    ) -> Result<String, ApiError> {
        let code = random_token()?;
        lock(&self.login_codes).insert(code.clone(), (account_id, expires_at_ms));
        Ok(code)
    }

    /// Takes a login code: its account once, before it expires; refused ever after.
    pub fn take_login_code(&self, code: &str, now_ms: i64) -> Result<AccountId, LoginRefused> {
        let mut codes = lock(&self.login_codes);
        // Expired codes go; the one asked for stays long enough to say it expired.
        codes.retain(|key, (_, expires_at_ms)| *expires_at_ms > now_ms || key == code);
        match codes.remove(code) {
            Some((account_id, expires_at_ms)) if expires_at_ms > now_ms => Ok(account_id),
            Some(_) => Err(LoginRefused::Expired),
            None => Err(LoginRefused::Unknown),
        }
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
        return match tokens.check(token, now_ms) {
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

    #[test]
    fn tokens_expire_and_login_codes_work_once() {
        let tokens = Tokens::default();
        let account = AccountId::from_u128(7);
        let (token, expires_at_ms) = tokens.mint(account, 1_000).expect("mints");
        assert_eq!(expires_at_ms, 1_000 + TOKEN_TTL_MS_DEFAULT as i64);
        assert_eq!(tokens.check(&token, 1_001), Some(account));
        assert_eq!(tokens.check(&token, expires_at_ms), None);
        assert_eq!(tokens.check("forged", 1_001), None);
        let code = tokens.new_login_code(account, 2_000).expect("code");
        assert_eq!(tokens.take_login_code(&code, 1_999), Ok(account));
        assert_eq!(
            tokens.take_login_code(&code, 1_999),
            Err(LoginRefused::Unknown)
        );
    }

    #[test]
    fn a_login_code_expires() {
        let tokens = Tokens::default();
        let account = AccountId::from_u128(7);
        let code = tokens.new_login_code(account, 2_000).expect("code");
        let other = tokens.new_login_code(account, 5_000).expect("code");
        assert_eq!(
            tokens.take_login_code(&code, 2_000),
            Err(LoginRefused::Expired)
        );
        assert_eq!(
            tokens.take_login_code(&code, 2_000),
            Err(LoginRefused::Unknown),
            "an expired code is forgotten once refused"
        );
        assert_eq!(
            tokens.take_login_code("forged", 2_000),
            Err(LoginRefused::Unknown)
        );
        assert_eq!(tokens.take_login_code(&other, 4_999), Ok(account));
        assert!(
            LoginRefused::Expired.to_string().contains("expired"),
            "{}",
            LoginRefused::Expired
        );
    }
}
