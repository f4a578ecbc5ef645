//! HTTP Message Signatures (RFC 9421) as Seed uses them, with no IO: the signature base, the
//! `Signature-Input` / `Signature` fields (RFC 9651 structured fields, parsed with `sfv`), the
//! `Content-Digest` of a body (RFC 9530, sha-256), and the checks a request must pass.
//!
//! Seed's requests cover `@method`, `@authority`, `@path`, `@query` and `content-digest`, with
//! the parameters `created`, `nonce` and `keyid` (the account id). The signature is ed25519
//! over the signature base, checked with `verify_strict`.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::limits::{NONCE_CHARS_MAX, NONCE_CHARS_MIN};

/// How far `created` may be from the server's clock, either way.
pub const CREATED_SKEW_SECS_MAX: i64 = 300;
/// The components every Seed request must cover.
pub const REQUIRED_COMPONENTS: [&str; 5] =
    ["@method", "@authority", "@path", "@query", "content-digest"];
/// The label Seed's clients sign under.
pub const LABEL: &str = "seed";

/// Why a signature was refused. Shown to the client (it says what to fix, never a key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("the request is not signed: {0} is missing")]
    Missing(&'static str),
    #[error("malformed {field}: {detail}")]
    Malformed { field: &'static str, detail: String },
    #[error("the signature does not cover {0}")]
    NotCovered(String),
    #[error("the signature parameter {0} is missing")]
    MissingParameter(&'static str),
    #[error("the signature was created {0} s away from now, more than 300 s")]
    Stale(i64),
    #[error("the signature has expired")]
    Expired,
    #[error("unsupported algorithm {0:?}: only ed25519")]
    Algorithm(String),
    #[error("the content digest does not match the body")]
    DigestMismatch,
    #[error("the component {0} has no value in this request")]
    NoValue(String),
    #[error("unknown key")]
    UnknownKey,
    #[error("the signature does not verify")]
    BadSignature,
}

/// The parts of a request a signature can cover.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestParts {
    pub method: String,
    /// Host and port as the client addressed them.
    pub authority: String,
    /// The target path, as sent (percent-encoded).
    pub path: String,
    /// The query without its `?`, `None` when the target has none.
    pub query: Option<String>,
    /// Header fields by lowercase name (several values joined with ", ").
    pub fields: BTreeMap<String, String>,
}

/// A signature parameter's value: RFC 9421 uses integers and strings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    Integer(i64),
    String(String),
}

/// The covered components and parameters of one signature, in the order they were written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureParams {
    pub components: Vec<String>,
    pub params: Vec<(String, ParamValue)>,
}

impl SignatureParams {
    /// Seed's signature parameters for a request created at `created` (unix seconds).
    pub fn seed(created: i64, nonce: &str, keyid: &str) -> SignatureParams {
        SignatureParams {
            components: REQUIRED_COMPONENTS
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
            params: vec![
                ("created".to_owned(), ParamValue::Integer(created)),
                ("nonce".to_owned(), ParamValue::String(nonce.to_owned())),
                ("keyid".to_owned(), ParamValue::String(keyid.to_owned())),
            ],
        }
    }

    fn param(&self, name: &str) -> Option<&ParamValue> {
        self.params
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }

    fn integer(&self, name: &str) -> Option<i64> {
        match self.param(name)? {
            ParamValue::Integer(value) => Some(*value),
            ParamValue::String(_) => None,
        }
    }

    fn string(&self, name: &str) -> Option<&str> {
        match self.param(name)? {
            ParamValue::String(value) => Some(value),
            ParamValue::Integer(_) => None,
        }
    }

    /// The serialized inner list with its parameters: the `@signature-params` value and the
    /// member of `Signature-Input`.
    pub fn serialize(&self) -> String {
        let components: Vec<String> = self.components.iter().map(|c| sf_string(c)).collect();
        let mut out = format!("({})", components.join(" "));
        for (key, value) in &self.params {
            match value {
                ParamValue::Integer(n) => out.push_str(&format!(";{key}={n}")),
                ParamValue::String(s) => out.push_str(&format!(";{key}={}", sf_string(s))),
            }
        }
        out
    }
}

/// An RFC 9651 string: quoted, with `\` and `"` escaped.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The value of one covered component in this request.
fn component_value(parts: &RequestParts, component: &str) -> Result<String, Error> {
    Ok(match component {
        "@method" => parts.method.to_uppercase(),
        "@authority" => parts.authority.to_lowercase(),
        "@path" => {
            if parts.path.is_empty() {
                "/".to_owned()
            } else {
                parts.path.clone()
            }
        }
        // An absent query is the leading `?` alone (RFC 9421, 2.2.7).
        "@query" => format!("?{}", parts.query.as_deref().unwrap_or("")),
        name if name.starts_with('@') => return Err(Error::NoValue(name.to_owned())),
        name => parts
            .fields
            .get(name)
            .map(|value| value.trim().to_owned())
            .ok_or_else(|| Error::NoValue(name.to_owned()))?,
    })
}

/// The signature base (RFC 9421, 2.5): one line per covered component, then
/// `@signature-params`; lines joined by `\n`, no trailing newline.
pub fn signature_base(parts: &RequestParts, params: &SignatureParams) -> Result<String, Error> {
    let mut base = String::new();
    for component in &params.components {
        let value = component_value(parts, component)?;
        base.push_str(&format!("{}: {value}\n", sf_string(component)));
    }
    base.push_str(&format!("\"@signature-params\": {}", params.serialize()));
    Ok(base)
}

/// `Content-Digest` for a body: `sha-256=:…:`.
pub fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", BASE64.encode(Sha256::digest(body)))
}

/// Checks a `Content-Digest` field against the body: its `sha-256` member must match.
pub fn check_content_digest(field: &str, body: &[u8]) -> Result<(), Error> {
    let malformed = |detail: String| Error::Malformed {
        field: "Content-Digest",
        detail,
    };
    let dictionary = sfv::Parser::new(field)
        .parse_dictionary()
        .map_err(|error| malformed(error.to_string()))?;
    let Some(sfv::ListEntry::Item(item)) = dictionary.get("sha-256") else {
        return Err(malformed("no sha-256 member".to_owned()));
    };
    let sfv::BareItem::ByteSequence(digest) = &item.bare_item else {
        return Err(malformed("sha-256 is not a byte sequence".to_owned()));
    };
    if digest.as_slice() == Sha256::digest(body).as_slice() {
        Ok(())
    } else {
        Err(Error::DigestMismatch)
    }
}

/// A signature as received: its label, parameters and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSignature {
    pub label: String,
    pub params: SignatureParams,
    pub signature: Vec<u8>,
}

/// Parses `Signature-Input` and `Signature`; takes the first label that both carry.
pub fn parse_signature(input: &str, signature: &str) -> Result<ReceivedSignature, Error> {
    let malformed = |field: &'static str, detail: String| Error::Malformed { field, detail };
    let inputs = sfv::Parser::new(input)
        .parse_dictionary()
        .map_err(|error| malformed("Signature-Input", error.to_string()))?;
    let signatures = sfv::Parser::new(signature)
        .parse_dictionary()
        .map_err(|error| malformed("Signature", error.to_string()))?;
    let (label, entry) = inputs
        .iter()
        .find(|(label, _)| signatures.contains_key(label.as_str()))
        .ok_or_else(|| malformed("Signature", "no label matches Signature-Input".to_owned()))?;
    let sfv::ListEntry::InnerList(list) = entry else {
        return Err(malformed("Signature-Input", "not an inner list".to_owned()));
    };
    let mut components = Vec::new();
    for item in &list.items {
        match &item.bare_item {
            sfv::BareItem::String(name) if item.params.is_empty() => {
                components.push(name.as_str().to_owned())
            }
            _ => {
                return Err(malformed(
                    "Signature-Input",
                    "a component is not a plain string".to_owned(),
                ));
            }
        }
    }
    let mut params = Vec::new();
    for (key, value) in &list.params {
        let value = match value {
            sfv::BareItem::Integer(n) => ParamValue::Integer(i64::from(*n)),
            sfv::BareItem::String(s) => ParamValue::String(s.as_str().to_owned()),
            _ => {
                return Err(malformed(
                    "Signature-Input",
                    format!("parameter {} is neither integer nor string", key.as_str()),
                ));
            }
        };
        params.push((key.as_str().to_owned(), value));
    }
    let Some(sfv::ListEntry::Item(item)) = signatures.get(label.as_str()) else {
        return Err(malformed("Signature", "not an item".to_owned()));
    };
    let sfv::BareItem::ByteSequence(bytes) = &item.bare_item else {
        return Err(malformed("Signature", "not a byte sequence".to_owned()));
    };
    Ok(ReceivedSignature {
        label: label.as_str().to_owned(),
        params: SignatureParams { components, params },
        signature: bytes.clone(),
    })
}

/// What a checked signature names: who signed, and the nonce to take once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub keyid: String,
    pub nonce: String,
    pub created: i64,
}

/// The checks that need no key: the required components are covered, `created` is within
/// [`CREATED_SKEW_SECS_MAX`] of `now_secs`, `expires` (if any) is ahead, `alg` (if any) is
/// ed25519, and a nonce and a key id are present.
pub fn check_params(params: &SignatureParams, now_secs: i64) -> Result<Signed, Error> {
    for required in REQUIRED_COMPONENTS {
        if !params.components.iter().any(|c| c == required) {
            return Err(Error::NotCovered(required.to_owned()));
        }
    }
    let created = params
        .integer("created")
        .ok_or(Error::MissingParameter("created"))?;
    if (now_secs - created).abs() > CREATED_SKEW_SECS_MAX {
        return Err(Error::Stale(now_secs - created));
    }
    if params
        .integer("expires")
        .is_some_and(|expires| expires <= now_secs)
    {
        return Err(Error::Expired);
    }
    if let Some(alg) = params.param("alg")
        && *alg != ParamValue::String("ed25519".to_owned())
    {
        return Err(Error::Algorithm(format!("{alg:?}")));
    }
    let nonce = params
        .string("nonce")
        .ok_or(Error::MissingParameter("nonce"))?;
    if !(NONCE_CHARS_MIN..=NONCE_CHARS_MAX).contains(&nonce.len()) {
        return Err(Error::Malformed {
            field: "Signature-Input",
            detail: format!(
                "the nonce must have {NONCE_CHARS_MIN} to {NONCE_CHARS_MAX} characters"
            ),
        });
    }
    let keyid = params
        .string("keyid")
        .ok_or(Error::MissingParameter("keyid"))?;
    Ok(Signed {
        keyid: keyid.to_owned(),
        nonce: nonce.to_owned(),
        created,
    })
}

/// A stored public key as a key to verify with. Decompressing the point is a good part of a
/// verification's cost, so callers keep the result. A key that is no curve point is unknown.
pub fn verifying_key(public_key: &[u8]) -> Result<VerifyingKey, Error> {
    let public_key: &[u8; 32] = public_key.try_into().map_err(|_| Error::UnknownKey)?;
    VerifyingKey::from_bytes(public_key).map_err(|_| Error::UnknownKey)
}

/// Verifies an ed25519 signature over the base, strictly (no small-order keys, canonical `S`).
pub fn verify(key: &VerifyingKey, base: &str, signature: &[u8]) -> Result<(), Error> {
    let signature: &[u8; 64] = signature.try_into().map_err(|_| Error::BadSignature)?;
    key.verify_strict(base.as_bytes(), &Signature::from_bytes(signature))
        .map_err(|_| Error::BadSignature)
}

/// The fields a client adds to sign a request: `Content-Digest`, `Signature-Input`,
/// `Signature`. `parts.fields` must not yet hold `content-digest`; it is added from `body`.
pub fn sign(
    key: &SigningKey,
    parts: &mut RequestParts,
    body: &[u8],
    params: &SignatureParams,
) -> Result<Vec<(&'static str, String)>, Error> {
    let digest = content_digest(body);
    parts
        .fields
        .insert("content-digest".to_owned(), digest.clone());
    let base = signature_base(parts, params)?;
    let signature = key.sign(base.as_bytes());
    Ok(vec![
        ("Content-Digest", digest),
        ("Signature-Input", format!("{LABEL}={}", params.serialize())),
        (
            "Signature",
            format!("{LABEL}=:{}:", BASE64.encode(signature.to_bytes())),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9421, B.1.4: the ed25519 test key (the last 32 bytes of its PKCS#8 and SPKI forms).
    fn rfc_key() -> (SigningKey, Vec<u8>) {
        let private = BASE64
            .decode("MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF")
            .expect("base64");
        let public = BASE64
            .decode("MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=")
            .expect("base64");
        let seed: [u8; 32] = private[private.len() - 32..].try_into().expect("32 bytes");
        (
            SigningKey::from_bytes(&seed),
            public[public.len() - 32..].to_vec(),
        )
    }

    /// RFC 9421, B.2: the test request.
    fn rfc_request() -> RequestParts {
        RequestParts {
            method: "POST".to_owned(),
            authority: "example.com".to_owned(),
            path: "/foo".to_owned(),
            query: Some("param=Value&Pet=dog".to_owned()),
            fields: [
                ("date", "Tue, 20 Apr 2021 02:07:55 GMT"),
                ("content-type", "application/json"),
                ("content-length", "18"),
                (
                    "content-digest",
                    "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:",
                ),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        }
    }

    #[test]
    fn rfc_9421_b_2_6_ed25519() {
        let input = r#"sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519""#;
        let signature = "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:";
        let received = parse_signature(input, signature).expect("parses");
        assert_eq!(received.label, "sig-b26");
        let base = signature_base(&rfc_request(), &received.params).expect("base");
        assert_eq!(
            base,
            "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n\
             \"@method\": POST\n\
             \"@path\": /foo\n\
             \"@authority\": example.com\n\
             \"content-type\": application/json\n\
             \"content-length\": 18\n\
             \"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\");created=1618884473;keyid=\"test-key-ed25519\""
        );
        let (key, public) = rfc_key();
        assert_eq!(key.verifying_key().to_bytes().as_slice(), public.as_slice());
        let public = verifying_key(&public).expect("a key");
        // ed25519 is deterministic: signing the base gives the RFC's signature byte for byte.
        assert_eq!(
            key.sign(base.as_bytes()).to_bytes().to_vec(),
            received.signature
        );
        assert_eq!(verify(&public, &base, &received.signature), Ok(()));
        let mut tampered = base.clone();
        tampered.push(' ');
        assert_eq!(
            verify(&public, &tampered, &received.signature),
            Err(Error::BadSignature)
        );
    }

    #[test]
    fn rfc_9421_query_components() {
        // RFC 9421, 2.2.7: the query with its `?`, and `?` alone when there is none.
        let mut parts = rfc_request();
        assert_eq!(
            component_value(&parts, "@query"),
            Ok("?param=Value&Pet=dog".to_owned())
        );
        parts.query = None;
        assert_eq!(component_value(&parts, "@query"), Ok("?".to_owned()));
        assert_eq!(
            component_value(&parts, "@status"),
            Err(Error::NoValue("@status".to_owned()))
        );
    }

    #[test]
    fn content_digest_rfc_9530_example() {
        // RFC 9530's example body and its sha-256 digest.
        let body = br#"{"hello": "world"}"#;
        assert_eq!(
            content_digest(body),
            "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:"
        );
        assert_eq!(check_content_digest(&content_digest(body), body), Ok(()));
        assert_eq!(
            check_content_digest(&content_digest(b"other"), body),
            Err(Error::DigestMismatch)
        );
        assert!(matches!(
            check_content_digest("sha-512=:AAAA:", body),
            Err(Error::Malformed { .. })
        ));
    }

    fn seed_parts() -> RequestParts {
        RequestParts {
            method: "POST".to_owned(),
            authority: "127.0.0.1:8080".to_owned(),
            path: "/v1/sessions".to_owned(),
            query: None,
            fields: BTreeMap::new(),
        }
    }

    #[test]
    fn a_seed_request_signs_and_verifies() {
        let (key, public) = rfc_key();
        let public = verifying_key(&public).expect("a key");
        let params = SignatureParams::seed(1_800_000_000, "n0nce-n0nce-n0nce", "acct");
        let mut parts = seed_parts();
        let fields = sign(&key, &mut parts, b"{}", &params).expect("signs");
        let field = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
                .expect("field")
        };
        assert_eq!(
            field("Signature-Input"),
            r#"seed=("@method" "@authority" "@path" "@query" "content-digest");created=1800000000;nonce="n0nce-n0nce-n0nce";keyid="acct""#
        );
        let received =
            parse_signature(&field("Signature-Input"), &field("Signature")).expect("parses");
        assert_eq!(received.params, params);
        let signer = check_params(&received.params, 1_800_000_100).expect("fresh");
        assert_eq!(signer.keyid, "acct");
        assert_eq!(signer.nonce, "n0nce-n0nce-n0nce");
        check_content_digest(&field("Content-Digest"), b"{}").expect("digest");
        let base = signature_base(&parts, &received.params).expect("base");
        assert_eq!(verify(&public, &base, &received.signature), Ok(()));
        // Another path, method or query does not verify.
        for change in [
            |p: &mut RequestParts| p.path = "/v1/sessions/x".to_owned(),
            |p: &mut RequestParts| p.method = "DELETE".to_owned(),
            |p: &mut RequestParts| p.query = Some("limit=1".to_owned()),
            |p: &mut RequestParts| p.authority = "evil:80".to_owned(),
        ] {
            let mut other = parts.clone();
            change(&mut other);
            let base = signature_base(&other, &received.params).expect("base");
            assert_eq!(
                verify(&public, &base, &received.signature),
                Err(Error::BadSignature)
            );
        }
    }

    #[test]
    fn parameter_checks() {
        let now = 1_800_000_000;
        let ok = SignatureParams::seed(now, "0123456789abcdef", "k");
        assert!(check_params(&ok, now).is_ok());
        assert_eq!(check_params(&ok, now + 301), Err(Error::Stale(301)));
        assert!(check_params(&ok, now - 300).is_ok());
        let mut uncovered = ok.clone();
        uncovered.components.retain(|c| c != "content-digest");
        assert_eq!(
            check_params(&uncovered, now),
            Err(Error::NotCovered("content-digest".to_owned()))
        );
        let mut no_nonce = ok.clone();
        no_nonce.params.retain(|(k, _)| k != "nonce");
        assert_eq!(
            check_params(&no_nonce, now),
            Err(Error::MissingParameter("nonce"))
        );
        let short = SignatureParams::seed(now, "short", "k");
        assert!(matches!(
            check_params(&short, now),
            Err(Error::Malformed { .. })
        ));
        let mut rsa = ok.clone();
        rsa.params.push((
            "alg".to_owned(),
            ParamValue::String("rsa-pss-sha512".to_owned()),
        ));
        assert!(matches!(check_params(&rsa, now), Err(Error::Algorithm(_))));
        let mut expired = ok;
        expired
            .params
            .push(("expires".to_owned(), ParamValue::Integer(now)));
        assert_eq!(check_params(&expired, now), Err(Error::Expired));
    }

    #[test]
    fn malformed_fields_are_refused() {
        assert!(matches!(
            parse_signature("seed=(", "seed=:AA==:"),
            Err(Error::Malformed { .. })
        ));
        assert!(matches!(
            parse_signature(r#"seed=("@method");created=1"#, "other=:AA==:"),
            Err(Error::Malformed { .. })
        ));
        assert!(matches!(
            parse_signature(r#"seed=("@method");created=1.5"#, "seed=:AA==:"),
            Err(Error::Malformed { .. })
        ));
    }
}
