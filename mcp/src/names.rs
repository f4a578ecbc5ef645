//! Verb names for MCP tools: `SERVER__TOOL`, fitted to the providers' rules for tool names.
//!
//! The providers take `^[a-zA-Z0-9_-]{1,64}$` (the stricter of OpenAI's and Anthropic's rules).
//! A server's or tool's name is fitted character by character: each character outside that set
//! becomes `_`. A name longer than [`VERB_NAME_CHARS_MAX`] keeps its first characters and ends
//! with `_` and [`VERB_NAME_HASH_CHARS`] hex digits of a hash of the names as the server gave
//! them (SHA-256 of `SERVER`, a zero byte, `TOOL`), so two long names that differ only past the
//! cut stay distinct, and a name is the same on every start. Two tools that still fit to one
//! verb name (`a.b` and `a_b`, or a hash collision) are an error the caller reports: no tool
//! silently shadows another.

use std::collections::BTreeMap;

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

/// Verb names for `(server, tool)` pairs, or the first clash between two of them. The map is
/// keyed by verb name; its values are the `(server, tool)` the name stands for.
pub fn assign<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<BTreeMap<String, (String, String)>, NameClash> {
    let mut by_verb_name: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (server, tool) in tools {
        let name = verb_name(server, tool);
        if let Some((first_server, first_tool)) = by_verb_name.get(&name) {
            return Err(NameClash {
                verb_name: name,
                first_server: first_server.clone(),
                first_tool: first_tool.clone(),
                second_server: server.to_owned(),
                second_tool: tool.to_owned(),
            });
        }
        by_verb_name.insert(name, (server.to_owned(), tool.to_owned()));
    }
    Ok(by_verb_name)
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
    fn clashes_from_a_table() {
        // (tools, expected error or None)
        type Row<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        let rows: &[Row] = &[
            (
                &[("files", "read"), ("files", "write"), ("web", "read")],
                None,
            ),
            (
                &[("files", "read.file"), ("files", "read_file")],
                Some(
                    "tools \"read.file\" of server \"files\" and \"read_file\" of server \"files\" \
                     both become the verb name files__read_file: rename one, or disable one in \
                     the server's seed.tools",
                ),
            ),
            (
                &[("a", "b__c"), ("a__b", "c")],
                Some(
                    "tools \"b__c\" of server \"a\" and \"c\" of server \"a__b\" both become the \
                     verb name a__b__c: rename one, or disable one in the server's seed.tools",
                ),
            ),
        ];
        for (tools, expected) in rows {
            let result = assign(tools.iter().copied());
            match expected {
                None => {
                    let names = result.expect("no clash");
                    assert_eq!(names.len(), tools.len());
                }
                Some(expected) => {
                    assert_eq!(result.expect_err("a clash").to_string(), *expected);
                }
            }
        }
    }
}
