//! Request input with no IO: JSON bodies parsed with the failing field named, a field checked
//! against its limit (the limits are in [`crate::limits`]), and keyset paging over a list of
//! sessions.

use seed_events::SessionId;
use serde::de::DeserializeOwned;

use crate::limits::PAGE_ITEMS_MAX;

/// Input that does not fit: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The field's path, e.g. `text` or `arguments.path`; `None` for the body as a whole.
    pub field: Option<String>,
    pub message: String,
}

impl Invalid {
    pub fn field(field: &str, message: impl Into<String>) -> Invalid {
        Invalid {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }
}

/// Parses a JSON body into `T`, naming the field that does not fit.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Invalid> {
    // Every request body is a JSON object. (serde would also take a struct's fields in order
    // as an array, which the API does not offer.)
    if body.iter().find(|byte| !byte.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Invalid {
            field: None,
            message: "the body must be a JSON object".to_owned(),
        });
    }
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut deserializer);
    let value = parsed.map_err(|error| {
        let path = error.path().to_string();
        let message = error.inner().to_string();
        let field = if path != "." && path != "?" {
            Some(path)
        } else {
            // A missing or unknown field is reported at the parent: its name is in the message.
            message
                .split('`')
                .nth(1)
                .filter(|_| message.contains("field"))
                .map(str::to_owned)
        };
        Invalid { field, message }
    })?;
    deserializer.end().map_err(|error| Invalid {
        field: None,
        message: error.to_string(),
    })?;
    Ok(value)
}

/// Parses a query string into `T`, naming the parameter that does not fit (`limit` for
/// `limit=abc`), or the query as a whole when no one parameter is at fault.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, Invalid> {
    let deserializer =
        serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(deserializer).map_err(|error| {
        let path = error.path().to_string();
        let message = error.inner().to_string();
        let field = if path != "." && path != "?" {
            path
        } else {
            // A missing or unknown parameter is reported at the top: its name is in the message.
            message
                .split('`')
                .nth(1)
                .filter(|_| message.contains("field"))
                .map_or_else(|| "query".to_owned(), str::to_owned)
        };
        Invalid {
            field: Some(field),
            message,
        }
    })
}

/// A text field must have between `min` and `max` characters.
pub fn check_chars(field: &str, text: &str, min: usize, max: usize) -> Result<(), Invalid> {
    let n_chars = text.chars().count();
    if n_chars < min {
        return Err(Invalid::field(
            field,
            format!("must have at least {min} characters"),
        ));
    }
    if n_chars > max {
        return Err(Invalid::field(
            field,
            format!("must have at most {max} characters"),
        ));
    }
    Ok(())
}

/// A page size: `default` when absent, else 1 ..= [`PAGE_ITEMS_MAX`].
pub fn page_limit(limit: Option<u64>, default: usize) -> Result<usize, Invalid> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=PAGE_ITEMS_MAX as u64).contains(&n) => Ok(n as usize),
        Some(_) => Err(Invalid::field(
            "limit",
            format!("must be between 1 and {PAGE_ITEMS_MAX}"),
        )),
    }
}

/// Where a page of sessions starts: after the session with this `updated_at` and id, in the
/// order newest update first (ties by id, highest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub updated_at_ms: i64,
    pub session_id: SessionId,
}

impl Cursor {
    pub fn encode(&self) -> String {
        format!("{}_{}", self.updated_at_ms, self.session_id)
    }

    pub fn decode(text: &str) -> Result<Cursor, Invalid> {
        let invalid = || Invalid::field("cursor", "not a cursor this server gave");
        let (updated_at, id) = text.split_once('_').ok_or_else(invalid)?;
        Ok(Cursor {
            updated_at_ms: updated_at.parse().map_err(|_| invalid())?,
            session_id: id.parse().map_err(|_| invalid())?,
        })
    }
}

impl From<Cursor> for seed_store::SessionsAfter {
    fn from(cursor: Cursor) -> Self {
        seed_store::SessionsAfter {
            updated_at_ms: cursor.updated_at_ms,
            session_id: cursor.session_id,
        }
    }
}

impl From<seed_store::SessionsAfter> for Cursor {
    fn from(after: seed_store::SessionsAfter) -> Self {
        Cursor {
            updated_at_ms: after.updated_at_ms,
            session_id: after.session_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        text: String,
        wait: Option<bool>,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn json_errors_name_the_field() {
        let field = |body: &str| parse_json::<Body>(body.as_bytes()).map_err(|e| e.field);
        assert!(field(r#"{"text": "hi"}"#).is_ok());
        assert_eq!(field(r#"{}"#), Err(Some("text".to_owned())));
        assert_eq!(field(r#"{"text": 1}"#), Err(Some("text".to_owned())));
        assert_eq!(
            field(r#"{"text": "a", "wait": "yes"}"#),
            Err(Some("wait".to_owned()))
        );
        assert_eq!(
            field(r#"{"text": "a", "extra": 1}"#),
            Err(Some("extra".to_owned()))
        );
        assert_eq!(
            field(r#"{"text": "a", "inner": {"n": -1}}"#),
            Err(Some("inner.n".to_owned()))
        );
        assert_eq!(field(r#"{"text": "a""#), Err(None));
        assert_eq!(field(r#"{"text": "a"} x"#), Err(None));
        assert_eq!(field(""), Err(None));
        // A struct's fields given in order as an array are not a body the API takes.
        assert_eq!(field(r#"["hi"]"#), Err(None));
        assert_eq!(field(r#"  [null, null]"#), Err(None));
        assert!(field(" \n {\"text\": \"hi\"}").is_ok());
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Params {
        limit: Option<u64>,
        wait: Option<bool>,
        code: Option<String>,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Required {
        #[allow(dead_code)]
        code: String,
    }

    #[test]
    fn query_errors_name_the_parameter() {
        let field = |query: &str| parse_query::<Params>(query).map_err(|e| e.field);
        assert_eq!(
            parse_query::<Params>("limit=5&wait=true&code=a%20b"),
            Ok(Params {
                limit: Some(5),
                wait: Some(true),
                code: Some("a b".to_owned()),
            })
        );
        assert!(field("").is_ok());
        assert_eq!(field("limit=abc"), Err(Some("limit".to_owned())));
        assert_eq!(field("limit=-1"), Err(Some("limit".to_owned())));
        assert_eq!(field("limit=2&wait=maybe"), Err(Some("wait".to_owned())));
        assert_eq!(
            parse_query::<Required>("").map_err(|e| e.field),
            Err(Some("code".to_owned()))
        );
    }

    #[test]
    fn limits() {
        assert!(check_chars("text", "", 1, 5).is_err());
        assert!(check_chars("text", "héllo", 1, 5).is_ok());
        assert_eq!(
            check_chars("title", "abcdef", 0, 5).map_err(|e| e.field),
            Err(Some("title".to_owned()))
        );
        assert_eq!(page_limit(None, 50), Ok(50));
        assert_eq!(page_limit(Some(1), 50), Ok(1));
        assert!(page_limit(Some(0), 50).is_err());
        assert_eq!(
            page_limit(Some(PAGE_ITEMS_MAX as u64), 50),
            Ok(PAGE_ITEMS_MAX)
        );
        assert!(page_limit(Some(PAGE_ITEMS_MAX as u64 + 1), 50).is_err());
    }

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_refused() {
        let cursor = Cursor {
            updated_at_ms: 1_800_000_000_000,
            session_id: SessionId::from_u128(7),
        };
        assert_eq!(Cursor::decode(&cursor.encode()), Ok(cursor));
        let after: seed_store::SessionsAfter = cursor.into();
        assert_eq!(Cursor::from(after), cursor);
        assert!(Cursor::decode("nope").is_err());
        assert!(Cursor::decode("1_nope").is_err());
    }
}
