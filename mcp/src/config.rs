//! The MCP configuration: the `{"mcpServers": {...}}` JSON that MCP hosts read, with a section
//! of Seed's own per server. Pure: the caller reads the file and passes its text.
//!
//! # The shape
//!
//! ```json
//! {
//!   "mcpServers": {
//!     "files": {
//!       "command": "npx",
//!       "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/shared"],
//!       "env": {"NODE_ENV": "production"},
//!       "cwd": "/srv",
//!       "seed": {
//!         "enabled": true,
//!         "timeout_ms": 30000,
//!         "tools": {
//!           "write_file": {"safe_to_repeat": true, "timeout_ms": 5000},
//!           "delete_file": {"needs_approval": true},
//!           "move_file": {"enabled": false}
//!         }
//!       }
//!     },
//!     "search": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer …"}}
//!   }
//! }
//! ```
//!
//! - A server has a `command` (a stdio child: `args`, `env` added to Seed's own environment,
//!   `cwd`) or a `url` (streamable HTTP: `headers` sent with every request), never both.
//! - `type`, when present, is `"stdio"`, `"http"` or `"streamable-http"` and must agree with
//!   the fields; `"sse"` (the old HTTP+SSE transport) is refused. `disabled: true` (other hosts'
//!   switch) turns the server off as `seed.enabled: false` does.
//! - Other fields of the standard level, at the top or in a server, are tolerated and ignored:
//!   hosts add their own. A `null` standard field counts as absent.
//! - The `seed` section is Seed's: an unknown field in it is an error (a typo must not silently
//!   leave a tool unprotected). `enabled` (default true); `timeout_ms`, the calls' timeout for
//!   every tool of the server (default [`CALL_TIMEOUT_DEFAULT_MS`]); `tools`, by the tool's
//!   name as the server gives it: `enabled` (default true), `safe_to_repeat` (overrides the
//!   tool's annotations either way), `timeout_ms` (overrides the server's), `reconcile` (the
//!   name of another tool of the server that says whether a call of this one, cut off by a
//!   crash, took effect: see [`crate::verb`]), `needs_approval` (whether a call waits for a
//!   person's approval; overrides the tool's annotations either way, by default a tool whose
//!   annotations say `destructiveHint: true` and not `readOnlyHint: true` needs it).
//! - A key twice in one object is an error (JSON parsers keep the last one silently). A server's
//!   name must not be empty, and two names must not fit to the same verb prefix (see
//!   [`crate::names`]).
//!
//! Every error names the field at fault as a path: `mcpServers.files.command: expected a
//! string`; bad JSON names its line and column.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::limits::{CALL_TIMEOUT_DEFAULT_MS, CALL_TIMEOUT_MS_MAX};
use crate::names;

/// The servers, in the file's order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    pub servers: Vec<ServerConfig>,
}

/// One server of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The name in the file: the key under `mcpServers`, the first half of its verb names.
    pub name: String,
    pub transport: Transport,
    /// Off when `seed.enabled` is false or the standard `disabled` is true: not started.
    pub enabled: bool,
    /// The calls' timeout for the server's tools unless a tool names its own.
    pub timeout: Duration,
    /// `seed.tools`, by the tool's name as the server gives it.
    pub tools: BTreeMap<String, ToolConfig>,
}

impl ServerConfig {
    /// The configuration of `tool`: its own entry, or the defaults.
    pub fn tool(&self, tool: &str) -> ToolConfig {
        self.tools.get(tool).cloned().unwrap_or_default()
    }

    /// How long a call of `tool` may run.
    pub fn tool_timeout(&self, tool: &str) -> Duration {
        self.tool(tool).timeout.unwrap_or(self.timeout)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio(StdioTransport),
    /// Streamable HTTP.
    Http(HttpTransport),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioTransport {
    pub command: String,
    pub args: Vec<String>,
    /// Added to the environment Seed runs in.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTransport {
    pub url: String,
    /// Sent with every request. Names are valid HTTP header names, values valid header values,
    /// and none is one the transport sets itself (checked here).
    pub headers: BTreeMap<String, String>,
}

/// One tool's entry in `seed.tools`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolConfig {
    pub enabled: bool,
    /// Overrides the class the tool's annotations give, either way.
    pub safe_to_repeat: Option<bool>,
    pub timeout: Option<Duration>,
    /// Another tool of the server that reconciles a cut-off call of this one.
    pub reconcile: Option<String>,
    /// Overrides whether a call waits for a person's approval, either way (the default: when
    /// the tool's annotations say `destructiveHint: true`).
    pub needs_approval: Option<bool>,
}

impl Default for ToolConfig {
    fn default() -> ToolConfig {
        ToolConfig {
            enabled: true,
            safe_to_repeat: None,
            timeout: None,
            reconcile: None,
            needs_approval: None,
        }
    }
}

/// Why a configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("bad JSON at line {line} column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// A key twice in one object.
    #[error("{path}: duplicate {what} (line {line} column {column})")]
    Duplicate {
        path: String,
        /// "server name" under `mcpServers`, else "key".
        what: &'static str,
        line: usize,
        column: usize,
    },
    #[error("{path}: {problem}")]
    Field { path: String, problem: Problem },
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("expected {0}")]
    Expected(&'static str),
    #[error("missing")]
    Missing,
    #[error("must not be empty")]
    Empty,
    #[error("unknown field, expected one of: {0}")]
    UnknownField(&'static str),
    #[error("a server has a command (stdio) or a url (streamable HTTP), not both")]
    BothCommandAndUrl,
    #[error("a server needs a command (stdio) or a url (streamable HTTP)")]
    NeitherCommandNorUrl,
    #[error("only for a server with a {0}")]
    OnlyWith(&'static str),
    #[error("type {kind:?} needs a {needs}")]
    TypeNeeds { kind: String, needs: &'static str },
    #[error("the SSE transport is not supported: use streamable HTTP (type \"http\")")]
    SseUnsupported,
    #[error("unknown type {0:?}, expected one of: stdio, http, streamable-http")]
    UnknownType(String),
    #[error("expected an http:// or https:// URL")]
    NotHttpUrl,
    #[error("not a valid HTTP header name")]
    BadHeaderName,
    #[error("not a valid HTTP header value (visible ASCII, spaces and tabs only)")]
    BadHeaderValue,
    #[error("set by the transport itself")]
    ReservedHeader,
    #[error("expected milliseconds from 1 to {CALL_TIMEOUT_MS_MAX}")]
    TimeoutRange,
    #[error("fits to the same verb name prefix {fitted:?} as server {other:?}")]
    NameClash { fitted: String, other: String },
}

/// Headers the streamable HTTP transport sets itself (compared without case).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

const SEED_FIELDS: &str = "enabled, timeout_ms, tools";
const TOOL_FIELDS: &str = "enabled, safe_to_repeat, timeout_ms, reconcile, needs_approval";

impl McpConfig {
    /// Parses the configuration file's text.
    pub fn parse(json: &str) -> Result<McpConfig, ConfigError> {
        let root = parse_json(json)?;
        let root_fields = object(&root, "")?;
        let Some(servers) = field(root_fields, "mcpServers") else {
            return Err(ConfigError::Field {
                path: "mcpServers".into(),
                problem: Problem::Missing,
            });
        };
        let mut config = McpConfig::default();
        let mut fitted_names: BTreeMap<String, String> = BTreeMap::new();
        for (name, server) in object(servers, "mcpServers")? {
            let path = child_path("mcpServers", name);
            if name.is_empty() {
                return Err(field_error(&path, Problem::Empty));
            }
            let fitted = names::fit_part(name);
            if let Some(other) = fitted_names.get(&fitted) {
                return Err(field_error(
                    &path,
                    Problem::NameClash {
                        fitted,
                        other: other.clone(),
                    },
                ));
            }
            fitted_names.insert(fitted, name.clone());
            config.servers.push(server_config(name, server, &path)?);
        }
        Ok(config)
    }

    /// The servers that are on.
    pub fn enabled(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|server| server.enabled)
    }
}

fn server_config(name: &str, node: &Node, path: &str) -> Result<ServerConfig, ConfigError> {
    let fields = object(node, path)?;
    let get = |key: &str| field(fields, key).filter(|value| !matches!(value, Node::Null));
    let at = |key: &str| child_path(path, key);

    let command = get("command")
        .map(|value| non_empty_string(value, &at("command")))
        .transpose()?;
    let url = get("url")
        .map(|value| string(value, &at("url")))
        .transpose()?;
    let kind = get("type")
        .map(|value| string(value, &at("type")))
        .transpose()?;
    match kind {
        None => {}
        Some("stdio") if command.is_none() => {
            return Err(field_error(
                &at("type"),
                Problem::TypeNeeds {
                    kind: "stdio".into(),
                    needs: "command",
                },
            ));
        }
        Some(kind @ ("http" | "streamable-http")) if url.is_none() => {
            return Err(field_error(
                &at("type"),
                Problem::TypeNeeds {
                    kind: kind.into(),
                    needs: "url",
                },
            ));
        }
        Some("stdio" | "http" | "streamable-http") => {}
        Some("sse") => return Err(field_error(&at("type"), Problem::SseUnsupported)),
        Some(other) => {
            return Err(field_error(&at("type"), Problem::UnknownType(other.into())));
        }
    }

    let transport = match (command, url) {
        (Some(_), Some(_)) => return Err(field_error(path, Problem::BothCommandAndUrl)),
        (None, None) => return Err(field_error(path, Problem::NeitherCommandNorUrl)),
        (Some(command), None) => {
            if get("headers").is_some() {
                return Err(field_error(&at("headers"), Problem::OnlyWith("url")));
            }
            let args = get("args")
                .map(|value| strings(value, &at("args")))
                .transpose()?
                .unwrap_or_default();
            let env = get("env")
                .map(|value| string_map(value, &at("env")))
                .transpose()?
                .unwrap_or_default();
            let cwd = get("cwd")
                .map(|value| non_empty_string(value, &at("cwd")).map(PathBuf::from))
                .transpose()?;
            Transport::Stdio(StdioTransport {
                command: command.to_owned(),
                args,
                env,
                cwd,
            })
        }
        (None, Some(url)) => {
            for key in ["args", "env", "cwd"] {
                if get(key).is_some() {
                    return Err(field_error(&at(key), Problem::OnlyWith("command")));
                }
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(field_error(&at("url"), Problem::NotHttpUrl));
            }
            let headers = get("headers")
                .map(|value| string_map(value, &at("headers")))
                .transpose()?
                .unwrap_or_default();
            for (header, value) in &headers {
                let header_path = child_path(&at("headers"), header);
                if header.is_empty() || !header.bytes().all(is_header_name_byte) {
                    return Err(field_error(&header_path, Problem::BadHeaderName));
                }
                if RESERVED_HEADERS
                    .iter()
                    .any(|reserved| reserved.eq_ignore_ascii_case(header))
                {
                    return Err(field_error(&header_path, Problem::ReservedHeader));
                }
                if !value
                    .bytes()
                    .all(|byte| byte == b'\t' || (b' '..=b'~').contains(&byte))
                {
                    return Err(field_error(&header_path, Problem::BadHeaderValue));
                }
            }
            Transport::Http(HttpTransport {
                url: url.to_owned(),
                headers,
            })
        }
    };

    let disabled = get("disabled")
        .map(|value| boolean(value, &at("disabled")))
        .transpose()?
        .unwrap_or(false);
    let mut server = ServerConfig {
        name: name.to_owned(),
        transport,
        enabled: !disabled,
        timeout: Duration::from_millis(CALL_TIMEOUT_DEFAULT_MS),
        tools: BTreeMap::new(),
    };
    if let Some(seed) = field(fields, "seed") {
        seed_section(&mut server, seed, &at("seed"))?;
    }
    Ok(server)
}

/// Reads the `seed` section into `server`.
fn seed_section(server: &mut ServerConfig, node: &Node, path: &str) -> Result<(), ConfigError> {
    for (key, value) in object(node, path)? {
        let at = child_path(path, key);
        match key.as_str() {
            "enabled" => server.enabled = server.enabled && boolean(value, &at)?,
            "timeout_ms" => server.timeout = millis(value, &at)?,
            "tools" => {
                for (tool, entry) in object(value, &at)? {
                    let tool_path = child_path(&at, tool);
                    let mut config = ToolConfig::default();
                    for (key, value) in object(entry, &tool_path)? {
                        let at = child_path(&tool_path, key);
                        match key.as_str() {
                            "enabled" => config.enabled = boolean(value, &at)?,
                            "safe_to_repeat" => config.safe_to_repeat = Some(boolean(value, &at)?),
                            "needs_approval" => config.needs_approval = Some(boolean(value, &at)?),
                            "timeout_ms" => config.timeout = Some(millis(value, &at)?),
                            "reconcile" => {
                                let name = string(value, &at)?;
                                if name.is_empty() {
                                    return Err(field_error(&at, Problem::Empty));
                                }
                                config.reconcile = Some(name.to_owned());
                            }
                            _ => return Err(field_error(&at, Problem::UnknownField(TOOL_FIELDS))),
                        }
                    }
                    server.tools.insert(tool.clone(), config);
                }
            }
            _ => return Err(field_error(&at, Problem::UnknownField(SEED_FIELDS))),
        }
    }
    Ok(())
}

/// A token character of RFC 9110 (what a header name is made of).
fn is_header_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn field_error(path: &str, problem: Problem) -> ConfigError {
    ConfigError::Field {
        path: path.to_owned(),
        problem,
    }
}

/// `parent.key`, or `parent["key"]` when the key is not a plain name.
fn child_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "_-".contains(character));
    match (parent.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{parent}.{key}"),
        (_, false) => format!("{parent}[{}]", serde_json::Value::from(key)),
    }
}

fn field<'a>(fields: &'a [(String, Node)], key: &str) -> Option<&'a Node> {
    fields
        .iter()
        .find(|(name, _)| name == key)
        .map(|(_, value)| value)
}

fn object<'a>(node: &'a Node, path: &str) -> Result<&'a [(String, Node)], ConfigError> {
    match node {
        Node::Object(fields) => Ok(fields),
        _ => Err(field_error(
            if path.is_empty() { "(top level)" } else { path },
            Problem::Expected("an object"),
        )),
    }
}

fn string<'a>(node: &'a Node, path: &str) -> Result<&'a str, ConfigError> {
    match node {
        Node::String(text) => Ok(text),
        _ => Err(field_error(path, Problem::Expected("a string"))),
    }
}

fn non_empty_string<'a>(node: &'a Node, path: &str) -> Result<&'a str, ConfigError> {
    let text = string(node, path)?;
    if text.is_empty() {
        return Err(field_error(path, Problem::Empty));
    }
    Ok(text)
}

fn boolean(node: &Node, path: &str) -> Result<bool, ConfigError> {
    match node {
        Node::Bool(value) => Ok(*value),
        _ => Err(field_error(path, Problem::Expected("true or false"))),
    }
}

fn millis(node: &Node, path: &str) -> Result<Duration, ConfigError> {
    match node {
        Node::Number(number) => match number.as_u64() {
            Some(ms @ 1..=CALL_TIMEOUT_MS_MAX) => Ok(Duration::from_millis(ms)),
            _ => Err(field_error(path, Problem::TimeoutRange)),
        },
        _ => Err(field_error(path, Problem::TimeoutRange)),
    }
}

fn strings(node: &Node, path: &str) -> Result<Vec<String>, ConfigError> {
    let Node::Array(items) = node else {
        return Err(field_error(path, Problem::Expected("an array of strings")));
    };
    items
        .iter()
        .enumerate()
        .map(|(index, item)| string(item, &format!("{path}[{index}]")).map(str::to_owned))
        .collect()
}

fn string_map(node: &Node, path: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    object(node, path)?
        .iter()
        .map(|(key, value)| {
            string(value, &child_path(path, key)).map(|value| (key.clone(), value.to_owned()))
        })
        .collect()
}

/// A JSON value that keeps its objects' order and was checked for duplicate keys.
#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

/// The text as a [`Node`], refusing a key that appears twice in one object.
fn parse_json(json: &str) -> Result<Node, ConfigError> {
    let duplicate = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let parsed = NodeSeed {
        path: String::new(),
        duplicate: &duplicate,
    }
    .deserialize(&mut deserializer)
    .and_then(|node| deserializer.end().map(|()| node));
    parsed.map_err(|error| {
        let (line, column) = (error.line(), error.column());
        if let Some((parent, path)) = duplicate.take() {
            let what = if parent == "mcpServers" {
                "server name"
            } else {
                "key"
            };
            return ConfigError::Duplicate {
                path,
                what,
                line,
                column,
            };
        }
        let message = error.to_string();
        let suffix = format!(" at line {line} column {column}");
        ConfigError::Json {
            line,
            column,
            message: message.strip_suffix(&suffix).unwrap_or(&message).to_owned(),
        }
    })
}

/// Deserializes a [`Node`] at `path`; a duplicate key's parent and path go to `duplicate` (serde_json
/// adds the line and column to the error).
struct NodeSeed<'a> {
    path: String,
    duplicate: &'a RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for NodeSeed<'_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for NodeSeed<'_> {
    type Value = Node;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Node, E> {
        Ok(Node::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Node, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Node, E> {
        Ok(Node::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Node, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Node::Null, Node::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Node, E> {
        Ok(Node::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Node, E> {
        Ok(Node::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(NodeSeed {
            path: format!("{}[{}]", self.path, items.len()),
            duplicate: self.duplicate,
        })? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut fields: Vec<(String, Node)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = child_path(&self.path, &key);
            if fields.iter().any(|(existing, _)| *existing == key) {
                *self.duplicate.borrow_mut() = Some((self.path.clone(), path));
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(NodeSeed {
                path,
                duplicate: self.duplicate,
            })?;
            fields.push((key, value));
        }
        Ok(Node::Object(fields))
    }
}

#[cfg(test)]
mod tests;
