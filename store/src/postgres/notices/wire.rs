//! A notice's wire form, pure and without IO: [`Notice::payloads`] encodes one,
//! [`Notice::decode`] reads one back (the format is in the parent module's documentation).

use std::fmt;

use seed_events::{AccountId, RunId, RunStatus, SessionId};

use super::{MALFORMED_SHOWN_CHARS_MAX, NOTIFY_PAYLOAD_BYTES_MAX, ORIGIN_BYTES_MAX};

/// Something one node tells the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// Events were committed to a session's log, seqs `from_seq..=to_seq`; a receiver reads
    /// them from the log.
    EventsCommitted {
        session_key: i64,
        from_seq: i64,
        to_seq: i64,
    },
    /// A chunk of a run's streamed text: `chunk` starts `offset_bytes` bytes into it.
    TextDelta {
        session_id: SessionId,
        run_id: RunId,
        offset_bytes: u64,
        chunk: String,
    },
    /// A run ended with `status`.
    RunFinished {
        session_id: SessionId,
        run_id: RunId,
        status: RunStatus,
    },
    /// A session's log, title, runs or links changed, for `reason`; `seqs` are the first and
    /// last seq of the events the change appended to its log, when it appended some.
    SessionChanged {
        session_id: SessionId,
        reason: String,
        seqs: Option<(i64, i64)>,
    },
    /// A session of `account_id` was deleted.
    SessionDeleted {
        session_id: SessionId,
        account_id: AccountId,
    },
    /// An account's list of sessions changed, for each of `reasons` (names, without a newline).
    AccountChanged {
        account_id: AccountId,
        reasons: Vec<String>,
    },
    /// The model asked for a tool call, whose `tool_call` event is at `seq`.
    ToolCall {
        session_id: SessionId,
        run_id: RunId,
        seq: i64,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// A call waits for a person's approval.
    ApprovalPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// An MCP server asks the person a question during a call in flight.
    ElicitationPending {
        session_id: SessionId,
        run_id: RunId,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
        message: String,
        requested_schema: serde_json::Value,
    },
    /// The sender lost notices it meant to send (its connection was cut): a receiver resyncs
    /// as after a [`Gap`](super::Gap).
    Missed,
}

/// A notice whose payload PostgreSQL would refuse: a reason of thousands of bytes, or a call
/// with arguments that long; a text delta is split instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a notice of {bytes} bytes is past the {NOTIFY_PAYLOAD_BYTES_MAX} bytes a PostgreSQL \
     notification may carry"
)]
pub struct TooLong {
    pub bytes: usize,
}

/// A payload that is not a notice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed notice {shown:?}: {reason}")]
pub struct Malformed {
    /// The payload's start.
    shown: String,
    reason: String,
}

impl Malformed {
    fn new(payload: &str, reason: impl Into<String>) -> Malformed {
        Malformed {
            shown: payload.chars().take(MALFORMED_SHOWN_CHARS_MAX).collect(),
            reason: reason.into(),
        }
    }

    /// Why the payload is not a notice.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl Notice {
    /// The payloads that carry this notice, in order, each at most
    /// [`NOTIFY_PAYLOAD_BYTES_MAX`] bytes: one, but for a text delta too long for one, which
    /// is split into chunks on char boundaries, each with its own offset.
    ///
    /// Panics when `origin` is empty, longer than [`ORIGIN_BYTES_MAX`] or holds anything but
    /// printable ASCII other than a space or a backslash: the origin is the program's own node
    /// id.
    pub fn payloads(&self, origin: &str) -> Result<Vec<String>, TooLong> {
        assert!(
            !origin.is_empty()
                && origin.len() <= ORIGIN_BYTES_MAX
                && origin
                    .bytes()
                    .all(|byte| byte.is_ascii_graphic() && byte != b'\\'),
            "an origin is 1 to {ORIGIN_BYTES_MAX} printable ASCII bytes without a space or a \
             backslash: {origin:?}"
        );
        let body = match self {
            Notice::EventsCommitted {
                session_key,
                from_seq,
                to_seq,
            } => format!("events {session_key} {from_seq} {to_seq}"),
            Notice::TextDelta {
                session_id,
                run_id,
                offset_bytes,
                chunk,
            } => {
                return Ok(delta_payloads(
                    origin,
                    *session_id,
                    *run_id,
                    *offset_bytes,
                    chunk,
                ));
            }
            Notice::RunFinished {
                session_id,
                run_id,
                status,
            } => format!("finished {session_id} {run_id} {}", status.as_str()),
            Notice::SessionChanged {
                session_id,
                reason,
                seqs,
            } => {
                let seqs = match seqs {
                    Some((from, to)) => format!("{from}:{to}"),
                    None => "-".to_owned(),
                };
                with_rest(format!("changed {session_id} {seqs} "), reason)
            }
            Notice::SessionDeleted {
                session_id,
                account_id,
            } => format!("deleted {session_id} {account_id}"),
            Notice::AccountChanged {
                account_id,
                reasons,
            } => with_rest(format!("account {account_id} "), &reasons.join("\n")),
            Notice::ToolCall {
                session_id,
                run_id,
                seq,
                call_id,
                name,
                arguments,
            } => with_rest(
                format!("tool {session_id} {run_id} {seq} "),
                &serde_json::json!([call_id, name, arguments]).to_string(),
            ),
            Notice::ApprovalPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
            } => with_rest(
                format!("approval {session_id} {run_id} "),
                &serde_json::json!([call_id, name, arguments]).to_string(),
            ),
            Notice::ElicitationPending {
                session_id,
                run_id,
                call_id,
                name,
                arguments,
                message,
                requested_schema,
            } => with_rest(
                format!("elicitation {session_id} {run_id} "),
                &serde_json::json!([call_id, name, arguments, message, requested_schema])
                    .to_string(),
            ),
            Notice::Missed => "missed".to_owned(),
        };
        let payload = format!("{origin} {body}");
        if payload.len() > NOTIFY_PAYLOAD_BYTES_MAX {
            return Err(TooLong {
                bytes: payload.len(),
            });
        }
        Ok(vec![payload])
    }

    /// The origin and the notice a payload carries (a text delta's payload carries one chunk).
    pub fn decode(payload: &str) -> Result<(String, Notice), Malformed> {
        let malformed = |reason: String| Malformed::new(payload, reason);
        let (origin, body) = payload
            .split_once(' ')
            .ok_or_else(|| malformed("no kind after the origin".to_owned()))?;
        if origin.is_empty() {
            return Err(malformed("an empty origin".to_owned()));
        }
        if body == "missed" {
            return Ok((origin.to_owned(), Notice::Missed));
        }
        let (kind, rest) = body
            .split_once(' ')
            .ok_or_else(|| malformed(format!("no fields after the kind {body:?}")))?;
        let notice = match kind {
            "events" => {
                let ([session_key, from_seq], to_seq) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::EventsCommitted {
                    session_key: number(session_key, "session key").map_err(malformed)?,
                    from_seq: number(from_seq, "first seq").map_err(malformed)?,
                    to_seq: number(to_seq, "last seq").map_err(malformed)?,
                })
            }
            "delta" => {
                let ([session_id, run_id, offset_bytes], chunk) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::TextDelta {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    offset_bytes: number(offset_bytes, "offset").map_err(malformed)?,
                    chunk: unescape(chunk).map_err(malformed)?,
                })
            }
            "finished" => {
                let ([session_id, run_id], status) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::RunFinished {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    status: RunStatus::ALL
                        .into_iter()
                        .find(|known| known.as_str() == status)
                        .ok_or_else(|| malformed(format!("no run status is called {status:?}")))?,
                })
            }
            "changed" => {
                let ([session_id, seqs], reason) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let seqs = match seqs {
                    "-" => None,
                    seqs => {
                        let (from, to) = seqs.split_once(':').ok_or_else(|| {
                            malformed(format!("the seqs {seqs:?} are not <from>:<to>"))
                        })?;
                        Some((
                            number(from, "first seq").map_err(malformed)?,
                            number(to, "last seq").map_err(malformed)?,
                        ))
                    }
                };
                Ok(Notice::SessionChanged {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    reason: unescape(reason).map_err(malformed)?,
                    seqs,
                })
            }
            "deleted" => {
                let ([session_id], account_id) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                Ok(Notice::SessionDeleted {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    account_id: id(account_id, "account id").map_err(malformed)?,
                })
            }
            "account" => {
                let ([account_id], reasons) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let reasons = unescape(reasons).map_err(malformed)?;
                Ok(Notice::AccountChanged {
                    account_id: id(account_id, "account id").map_err(malformed)?,
                    reasons: reasons.split('\n').map(str::to_owned).collect(),
                })
            }
            "tool" => {
                let ([session_id, run_id, seq], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments) =
                    serde_json::from_str::<(String, String, serde_json::Value)>(
                        &unescape(call).map_err(malformed)?,
                    )
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ToolCall {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    seq: number(seq, "seq").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                })
            }
            "approval" => {
                let ([session_id, run_id], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments) =
                    serde_json::from_str::<(String, String, serde_json::Value)>(
                        &unescape(call).map_err(malformed)?,
                    )
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ApprovalPending {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                })
            }
            "elicitation" => {
                let ([session_id, run_id], call) =
                    leading_fields(rest).ok_or_else(|| malformed(missing(kind)))?;
                let (call_id, name, arguments, message, requested_schema) =
                    serde_json::from_str::<(
                        String,
                        String,
                        serde_json::Value,
                        String,
                        serde_json::Value,
                    )>(&unescape(call).map_err(malformed)?)
                    .map_err(|error| malformed(format!("the call is not its JSON: {error}")))?;
                Ok(Notice::ElicitationPending {
                    session_id: id(session_id, "session id").map_err(malformed)?,
                    run_id: id(run_id, "run id").map_err(malformed)?,
                    call_id,
                    name,
                    arguments,
                    message,
                    requested_schema,
                })
            }
            other => Err(malformed(format!("no notice is called {other:?}"))),
        }?;
        Ok((origin.to_owned(), notice))
    }
}

/// `head` followed by `rest`, escaped.
fn with_rest(mut head: String, rest: &str) -> String {
    escape_into(&mut head, rest);
    head
}

/// The payloads of a text delta: as many chunks as it takes, each payload at most
/// [`NOTIFY_PAYLOAD_BYTES_MAX`] bytes once escaped, each chunk cut on a char boundary. An
/// empty text is one payload with an empty chunk.
fn delta_payloads(
    origin: &str,
    session_id: SessionId,
    run_id: RunId,
    offset_bytes: u64,
    text: &str,
) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut rest = text;
    let mut offset_bytes = offset_bytes;
    loop {
        let mut payload = format!("{origin} delta {session_id} {run_id} {offset_bytes} ");
        let room = NOTIFY_PAYLOAD_BYTES_MAX - payload.len();
        let mut escaped_bytes = 0;
        let mut end = rest.len();
        for (at, c) in rest.char_indices() {
            escaped_bytes += escaped_len(c);
            if escaped_bytes > room {
                end = at;
                break;
            }
        }
        let (chunk, after) = rest.split_at(end);
        escape_into(&mut payload, chunk);
        payloads.push(payload);
        offset_bytes += u64::try_from(end).expect("a chunk's length fits in 64 bits");
        rest = after;
        if rest.is_empty() {
            return payloads;
        }
    }
}

/// The bytes `c` takes in a payload.
fn escaped_len(c: char) -> usize {
    match c {
        '\\' | '\0' => 2,
        other => other.len_utf8(),
    }
}

/// Appends `text` to `payload` with a backslash written `\\` and a NUL `\0`.
fn escape_into(payload: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => payload.push_str("\\\\"),
            '\0' => payload.push_str("\\0"),
            other => payload.push(other),
        }
    }
}

/// The text [`escape_into`] wrote.
fn unescape(escaped: &str) -> Result<String, String> {
    let mut text = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => text.push('\\'),
            Some('0') => text.push('\0'),
            Some(other) => return Err(format!("an unknown escape \\{other}")),
            None => return Err("a backslash at the end".to_owned()),
        }
    }
    Ok(text)
}

/// The first `N` fields of `text`, separated by a space, and the rest after the next space.
fn leading_fields<const N: usize>(text: &str) -> Option<([&str; N], &str)> {
    let mut parts = text.splitn(N + 1, ' ');
    let fields = std::array::from_fn(|_| parts.next().unwrap_or_default());
    let rest = parts.next()?;
    Some((fields, rest))
}

fn missing(kind: &str) -> String {
    format!("a {kind} notice lacks a field")
}

fn number<T: std::str::FromStr>(field: &str, what: &str) -> Result<T, String> {
    field
        .parse()
        .map_err(|_| format!("the {what} {field:?} is not a number"))
}

fn id<T>(field: &str, what: &str) -> Result<T, String>
where
    T: std::str::FromStr,
    T::Err: fmt::Display,
{
    T::from_str(field).map_err(|error| format!("the {what} {field:?} is not a uuid: {error}"))
}
