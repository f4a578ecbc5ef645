//! The limits on a session's own text that more than one layer checks or states: the server's
//! input checks, the `status` and `continue_session` verbs and their descriptions, the names
//! a session is given from a text. Defined once here, the lowest crate they all use; every text
//! that states a limit is built from its constant.

/// The most characters a session's title may have: given by a person (`POST /v1/sessions`),
/// by the agent (`status`) or to a successor (`continue_session`).
pub const SESSION_TITLE_CHARS_MAX: usize = 200;

/// The most characters a session's description (its live status) may have.
pub const SESSION_DESCRIPTION_CHARS_MAX: usize = 1000;

/// The characters of a text kept when a session is named from it: the fallback namer's title
/// from the first message, a delegated child's title from its task.
pub const SESSION_TITLE_FROM_TEXT_CHARS: usize = 60;

const _: () = assert!(SESSION_TITLE_FROM_TEXT_CHARS <= SESSION_TITLE_CHARS_MAX);

/// The most forks one session may have: a person branches by hand, so this bounds a client
/// gone wrong, not a person.
pub const FORKS_PER_SESSION_MAX: usize = 64;

/// The most sessions the lineage around a session shows (`GET /v1/sessions/{id}/lineage`):
/// past it, the sessions nearest the one asked about are kept and the graph says it was cut.
pub const LINEAGE_SESSIONS_MAX: usize = 64;
