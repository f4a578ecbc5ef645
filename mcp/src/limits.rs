//! The limits of the MCP client, defined once: every text that states one is built from its
//! constant.

use std::time::Duration;

/// The most bytes of a tool result's text the model reads; a longer text is cut at a char
/// boundary, and a note saying how much was cut takes the last bytes of the budget.
pub const RESULT_TEXT_BYTES_MAX: usize = 64 * 1024;

/// The largest image of a result the model is shown (decoded): the largest an attachment sent
/// as an image may be; a larger one is named in the text, not shown.
pub const RESULT_IMAGE_BYTES_MAX: u64 = seed_projections::attachments::ATTACHMENT_IMAGE_BYTES_MAX;

/// The most images of one result the model is shown; the rest are named in the text.
pub const RESULT_IMAGES_MAX: usize = 4;

/// How long a call may run when the configuration names no timeout (`seed.timeout_ms`).
pub const CALL_TIMEOUT_DEFAULT_MS: u64 = 60_000;

/// The longest timeout the configuration may give a server or a tool.
pub const CALL_TIMEOUT_MS_MAX: u64 = 60 * 60 * 1000;

/// How long one server may take to start, initialize and list its tools, at start and on each
/// restart.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The first wait before a server that exited is started again; it doubles on each failure in
/// a row, up to [`RESTART_BACKOFF_MAX`].
pub const RESTART_BACKOFF_FIRST: Duration = Duration::from_millis(500);

/// The longest wait between two restarts of a server.
pub const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The most characters of a verb name: the stricter of the providers' rules (OpenAI's and
/// Anthropic's `^[a-zA-Z0-9_-]{1,64}$`).
pub const VERB_NAME_CHARS_MAX: usize = 64;

/// The hex digits of the hash that ends a verb name cut to [`VERB_NAME_CHARS_MAX`].
pub const VERB_NAME_HASH_CHARS: usize = 8;

/// The last lines of a stdio server's stderr kept for the error when it fails to start.
pub const STDERR_LINES_KEPT: usize = 5;

/// The most characters of one kept stderr line.
pub const STDERR_LINE_CHARS_MAX: usize = 300;

const _: () = assert!(CALL_TIMEOUT_DEFAULT_MS <= CALL_TIMEOUT_MS_MAX);
const _: () = assert!(VERB_NAME_HASH_CHARS < VERB_NAME_CHARS_MAX / 2);
