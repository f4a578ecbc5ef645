//! Verb names for MCP tools: `SERVER__TOOL`, fitted to the providers' rules for tool names.
//!
//! The providers take `^[a-zA-Z0-9_-]{1,64}$` (the stricter of OpenAI's and Anthropic's rules).
//! A server's or tool's name is fitted character by character: each character outside that set
//! becomes `_`. A name longer than [`VERB_NAME_CHARS_MAX`] keeps its first characters and ends
//! with `_` and [`VERB_NAME_HASH_CHARS`] hex digits of a hash of the names as the server gave
//! them (SHA-256 of `SERVER`, a zero byte, `TOOL`), so two long names that differ only past the
//! cut stay distinct, and a name is the same on every start. Two tools that still fit to one
//! verb name (`a.b` and `a_b`, or a hash collision) are a [`NameClash`] the caller reports: no
//! tool silently shadows another.

use sha2::{Digest, Sha256};

use crate::limits::{VERB_NAME_CHARS_MAX, VERB_NAME_HASH_CHARS};

/// What joins a server's name and its tool's name in a verb name.
pub const SEPARATOR: &str = "__";

/// Two tools whose verb names are the same.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tools {first_tool:?} of server {first_server:?} and {second_tool:?} of server {second_server:?} \
     both become the verb name {verb_name}: rename one, or disable one in the server's seed.tools"
)]
pub struct NameClash {
    pub verb_name: String,
    pub first_server: String,
    pub first_tool: String,
    pub second_server: String,
    pub second_tool: String,
}

/// Whether a character may stand in a verb name.
fn allowed(character: char) -> bool {
    character.is_ascii_alphanumeric() || character == '_' || character == '-'
}

/// A server's or a tool's name with every character a verb name cannot hold replaced by `_`.
pub fn fit_part(name: &str) -> String {
    name.chars()
        .map(|character| if allowed(character) { character } else { '_' })
        .collect()
}

/// The verb name of `tool` of `server`: `SERVER__TOOL`, fitted (see the module docs).
pub fn verb_name(server: &str, tool: &str) -> String {
    let joined = format!("{}{SEPARATOR}{}", fit_part(server), fit_part(tool));
    // Fitted names are ASCII: one char is one byte.
    if joined.len() <= VERB_NAME_CHARS_MAX {
        return joined;
    }
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0u8]);
    hasher.update(tool.as_bytes());
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let kept = VERB_NAME_CHARS_MAX - 1 - VERB_NAME_HASH_CHARS;
    let name = format!("{}_{}", &joined[..kept], &hash[..VERB_NAME_HASH_CHARS]);
    assert_eq!(
        name.len(),
        VERB_NAME_CHARS_MAX,
        "a cut verb name has the maximum length"
    );
    name
}

/// Whether `name` is a verb name the providers take.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty() && name.len() <= VERB_NAME_CHARS_MAX && name.chars().all(allowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_names_from_a_table() {
        let long_tool = "a".repeat(80);
        // (server, tool, expected verb name)
        let rows: &[(&str, &str, &str)] = &[
            ("files", "read_file", "files__read_file"),
            ("files", "read-file", "files__read-file"),
            ("my.server", "get item", "my_server__get_item"),
            ("grüße", "tool/x", "gr__e__tool_x"),
            ("s", "日本", "s____"),
            // Exactly 64 characters: kept as is.
            (
                "s",
                "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                "s__bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
            ),
            // Over 64: cut, with the hash.
            (
                "server",
                &long_tool,
                "server__aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa_87dfe168",
            ),
        ];
        for (server, tool, expected) in rows {
            let name = verb_name(server, tool);
            assert_eq!(&name, expected, "{server}/{tool}");
            assert!(is_valid(&name), "{name} is valid");
        }
    }

    #[test]
    fn two_long_names_that_differ_past_the_cut_stay_distinct() {
        let first = format!("{}1", "x".repeat(70));
        let second = format!("{}2", "x".repeat(70));
        let first_name = verb_name("s", &first);
        let second_name = verb_name("s", &second);
        assert_ne!(first_name, second_name);
        assert_eq!(first_name.len(), VERB_NAME_CHARS_MAX);
        assert_eq!(first_name[..50], second_name[..50]);
        // Stable: the same names give the same verb name.
        assert_eq!(first_name, verb_name("s", &first));
    }

    #[test]
    fn names_that_clash_from_a_table() {
        // (one tool, another, whether their verb names are the same)
        type Tool<'a> = (&'a str, &'a str);
        let rows: &[(Tool, Tool, bool)] = &[
            (("files", "read"), ("files", "write"), false),
            (("files", "read"), ("web", "read"), false),
            (("files", "read.file"), ("files", "read_file"), true),
            (("a", "b__c"), ("a__b", "c"), true),
            (("a.b", "c"), ("a_b", "c"), true),
        ];
        for ((server, tool), (other_server, other_tool), same) in rows {
            assert_eq!(
                verb_name(server, tool) == verb_name(other_server, other_tool),
                *same,
                "{server}/{tool} and {other_server}/{other_tool}"
            );
        }
    }

    #[test]
    fn a_clash_names_both_tools() {
        let clash = NameClash {
            verb_name: "files__read_file".into(),
            first_server: "files".into(),
            first_tool: "read.file".into(),
            second_server: "files".into(),
            second_tool: "read_file".into(),
        };
        assert_eq!(
            clash.to_string(),
            "tools \"read.file\" of server \"files\" and \"read_file\" of server \"files\" both \
             become the verb name files__read_file: rename one, or disable one in the server's \
             seed.tools"
        );
    }
}
