//! A client that signs its requests with an account key: what the CLI, the tests and the bench
//! talk to a service with. Runs on an actix system (awc).

use std::time::Duration;

use actix_web::http::Method;
use actix_web::web::Bytes;
use anyhow::Context as _;
use serde::de::DeserializeOwned;

use crate::keys::AccountKey;
use crate::signing::{self, RequestParts, SignatureParams};

/// An answer: status and body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        if !(200..300).contains(&self.status) {
            anyhow::bail!(
                "the service answered {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            );
        }
        serde_json::from_slice(&self.body).context("the service's answer does not parse")
    }

    pub fn value(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// A fresh nonce: a UUIDv7 in 32 hex digits. Those of one process strictly increase (the time
/// to the millisecond, then a randomly seeded counter), and their random bits keep two processes
/// signing with one key apart.
///
/// Time-ordered on purpose: the service keeps each nonce in two b-trees (by key and nonce, and
/// by expiry), and a nonce that sorts after the ones before it goes to the last leaf of each,
/// which the other requests of the same commit write too. A random nonce lands on a random leaf
/// of each: about two more pages for every signed request's commit to write.
pub fn fresh_nonce() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

#[derive(Clone)]
pub struct Client {
    /// `http://host:port`
    base_url: String,
    authority: String,
    key: AccountKey,
    http: awc::Client,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("account_id", &self.key.account_id)
            .finish_non_exhaustive()
    }
}

impl Client {
    pub fn new(base_url: &str, key: AccountKey) -> anyhow::Result<Client> {
        let base_url = base_url.trim_end_matches('/').to_owned();
        let authority = base_url
            .strip_prefix("http://")
            .context("only http:// service URLs are supported")?
            .to_owned();
        // No limit on connections: a load client holds one per concurrent request.
        let http = awc::Client::builder()
            .connector(awc::Connector::new().limit(0))
            .timeout(Duration::from_secs(300))
            .finish();
        Ok(Client {
            base_url,
            authority,
            key,
            http,
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn key(&self) -> &AccountKey {
        &self.key
    }

    /// The fields that sign a request, created now with a fresh nonce.
    pub fn signature_fields(
        &self,
        method: &str,
        path_and_query: &str,
        body: &[u8],
    ) -> Vec<(&'static str, String)> {
        let created = crate::serve::now_ms() / 1000;
        self.signature_fields_at(method, path_and_query, body, created, &fresh_nonce())
    }

    /// The same, with `created` and the nonce given (tests of stale and replayed requests).
    pub fn signature_fields_at(
        &self,
        method: &str,
        path_and_query: &str,
        body: &[u8],
        created: i64,
        nonce: &str,
    ) -> Vec<(&'static str, String)> {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query.to_owned())),
            None => (path_and_query, None),
        };
        let mut parts = RequestParts {
            method: method.to_owned(),
            authority: self.authority.clone(),
            path: path.to_owned(),
            query,
            fields: Default::default(),
        };
        let params = SignatureParams::seed(created, nonce, &self.key.account_id.to_string());
        signing::sign(&self.key.signing_key, &mut parts, body, &params)
            .expect("seed's own components always have values")
    }

    /// Sends a request with the given fields (signed or not) and returns the answer.
    pub async fn send_raw(
        &self,
        method: &str,
        path_and_query: &str,
        body: Vec<u8>,
        fields: &[(&str, String)],
    ) -> anyhow::Result<Answer> {
        let method = Method::from_bytes(method.as_bytes())?;
        let mut request = self
            .http
            .request(method, format!("{}{}", self.base_url, path_and_query));
        for (name, value) in fields {
            request = request.insert_header((*name, value.as_str()));
        }
        let typed = fields
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
        if !body.is_empty() && !typed {
            request = request.insert_header(("Content-Type", "application/json"));
        }
        let mut response = request
            .send_body(body)
            .await
            .map_err(|error| anyhow::anyhow!("request failed: {error}"))?;
        let status = response.status().as_u16();
        let body = response
            .body()
            .limit(64 * 1024 * 1024)
            .await
            .map_err(|error| anyhow::anyhow!("reading the answer failed: {error}"))?;
        Ok(Answer { status, body })
    }

    /// A signed request; `body` is sent as JSON when given.
    pub async fn request(
        &self,
        method: &str,
        path_and_query: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<Answer> {
        let body = body
            .map(|body| body.to_string().into_bytes())
            .unwrap_or_default();
        let fields = self.signature_fields(method, path_and_query, &body);
        self.send_raw(method, path_and_query, body, &fields).await
    }

    /// A signed POST of raw bytes of type `content_type` (an attachment's upload).
    pub async fn upload(
        &self,
        path_and_query: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> anyhow::Result<Answer> {
        let mut fields = self.signature_fields("POST", path_and_query, &bytes);
        fields.push(("Content-Type", content_type.to_owned()));
        self.send_raw("POST", path_and_query, bytes, &fields).await
    }

    pub async fn get<T: DeserializeOwned>(&self, path_and_query: &str) -> anyhow::Result<T> {
        self.request("GET", path_and_query, None).await?.json()
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<T> {
        self.request("POST", path, Some(body)).await?.json()
    }

    /// Opens the subscription WebSocket with a signed upgrade.
    pub async fn subscribe(
        &self,
    ) -> anyhow::Result<actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>> {
        let path = "/v1/subscribe";
        let mut request = self.http.ws(format!("{}{path}", self.base_url));
        for (name, value) in self.signature_fields("GET", path, b"") {
            request = request.set_header(name, value);
        }
        let (_, connection) = request
            .connect()
            .await
            .map_err(|error| anyhow::anyhow!("cannot subscribe: {error}"))?;
        Ok(connection)
    }
}

/// The next update on a subscription: `None` when it closed.
pub async fn next_update(
    connection: &mut actix_codec::Framed<awc::BoxedSocket, awc::ws::Codec>,
) -> Option<crate::ws::Update> {
    use futures::{SinkExt, StreamExt};
    loop {
        match connection.next().await? {
            Ok(awc::ws::Frame::Text(text)) => {
                if let Ok(update) = serde_json::from_slice(&text) {
                    return Some(update);
                }
            }
            Ok(awc::ws::Frame::Ping(bytes)) => {
                let _ = connection.send(awc::ws::Message::Pong(bytes)).await;
            }
            Ok(awc::ws::Frame::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{NONCE_CHARS_MAX, NONCE_CHARS_MIN};

    #[test]
    fn fresh_nonces_strictly_increase_and_fit_the_service_limits() {
        let nonces: Vec<String> = (0..10_000).map(|_| fresh_nonce()).collect();
        for pair in nonces.windows(2) {
            assert!(pair[0] < pair[1], "{} then {}", pair[0], pair[1]);
        }
        for nonce in &nonces {
            assert!((NONCE_CHARS_MIN..=NONCE_CHARS_MAX).contains(&nonce.len()));
            assert!(nonce.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
}
