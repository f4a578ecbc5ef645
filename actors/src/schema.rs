//! The argument check the shipped verbs share: a call's arguments are checked against the
//! verb's own JSON schema (a subset of it), so that an error names the field; and the same
//! check as JSON Schema reads it, for a person's action ([`check_arguments`]).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::verb::{VerbOutput, parse_arguments};

/// Parses a call's arguments into `T` after checking them against `schema` (the verb's
/// [`Verb::parameters`]), so that an invalid argument is answered with an error naming the
/// field: `invalid arguments for <verb>: <field>: <problem>`.
///
/// The schema subset checked: `type` (object, array, string, integer, number, boolean), `enum`,
/// `properties`, `required`, `additionalProperties: false`, `items`, `minimum`, `maximum`,
/// `minLength`, `maxLength` (in characters) and `maxItems`. A `null` for a property that is not
/// required counts as absent.
pub(crate) fn parse_checked<T: DeserializeOwned>(
    verb: &str,
    schema: &Value,
    mut arguments: Value,
) -> Result<T, VerbOutput> {
    if let Err(problem) = check(schema, &mut arguments, "", Nulls::Absent) {
        return Err(VerbOutput::error(format!(
            "invalid arguments for {verb}: {problem}"
        )));
    }
    parse_arguments(verb, arguments)
}

/// What is wrong with a verb's arguments, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentProblem {
    /// The path to the field (`steps[1].state`), or `arguments` for the whole object.
    pub field: String,
    pub problem: String,
}

impl std::fmt::Display for ArgumentProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// Checks `arguments` against a verb's schema (the subset `parse_checked` describes) as JSON
/// Schema reads it, for a person's action: a `null` is a value of the wrong type, not an absent
/// field (a model's call is let off that).
pub fn check_arguments(schema: &Value, arguments: &Value) -> Result<(), ArgumentProblem> {
    check(schema, &mut arguments.clone(), "", Nulls::Typed)
}

/// Checks a model's call's `arguments` against a verb's schema (the subset `parse_checked`
/// describes), as `parse_checked` does before it parses them: a `null` for a property that
/// is not required counts as absent, and a whole number written as a float (`5.0`) where an
/// integer is wanted is rewritten as one. For a verb that hands its arguments on as JSON (an
/// MCP server's tool) rather than parsing them.
pub fn check_call_arguments(schema: &Value, arguments: &mut Value) -> Result<(), ArgumentProblem> {
    check(schema, arguments, "", Nulls::Absent)
}

/// How a `null` for a property that is not required counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nulls {
    /// As if the property were absent (what models send for "nothing").
    Absent,
    /// As a value, checked against the property's type (JSON Schema).
    Typed,
}

/// Checks `value` against `schema`. A number with no fractional part where an integer is
/// wanted (`5.0`) is one, as in JSON Schema, and is rewritten as an integer for the parse.
fn check(
    schema: &Value,
    value: &mut Value,
    path: &str,
    nulls: Nulls,
) -> Result<(), ArgumentProblem> {
    let at = |problem: String| ArgumentProblem {
        field: if path.is_empty() {
            "arguments".to_owned()
        } else {
            path.to_owned()
        },
        problem,
    };
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<String> = allowed
            .iter()
            .map(|name| {
                name.as_str()
                    .map_or_else(|| name.to_string(), str::to_owned)
            })
            .collect();
        return Err(at(format!(
            "expected one of {}, got {value}",
            names.join(", ")
        )));
    }
    let Some(kind) = schema.get("type").and_then(Value::as_str) else {
        return Ok(());
    };
    if kind == "integer"
        && let Some(number) = value.as_f64().filter(|number| {
            !(value.is_i64() || value.is_u64())
                && number.fract() == 0.0
                && number.abs() < 9_007_199_254_740_992.0
        })
    {
        *value = Value::from(number as i64);
    }
    let fits = match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        return Err(at(format!(
            "expected {}, got {}",
            kind_with_article(kind),
            describe(value)
        )));
    }
    match value {
        Value::Object(fields) => check_object(schema, fields, path, nulls),
        Value::Array(items) => {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                return Err(at(format!("at most {max} items, got {}", items.len())));
            }
            if let Some(item_schema) = schema.get("items") {
                for (idx, item) in items.iter_mut().enumerate() {
                    check(item_schema, item, &format!("{path}[{idx}]"), nulls)?;
                }
            }
            Ok(())
        }
        Value::String(text) => {
            let n_chars = text.chars().count() as u64;
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && n_chars < min
            {
                return Err(at(if min == 1 {
                    "must not be empty".to_owned()
                } else {
                    format!("at least {min} characters, got {n_chars}")
                }));
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && n_chars > max
            {
                return Err(at(format!("at most {max} characters, got {n_chars}")));
            }
            Ok(())
        }
        Value::Number(number) => {
            let as_f64 = number.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && as_f64 < min
            {
                return Err(at(format!("at least {min}, got {number}")));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && as_f64 > max
            {
                return Err(at(format!("at most {max}, got {number}")));
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) => Ok(()),
    }
}

fn check_object(
    schema: &Value,
    fields: &mut serde_json::Map<String, Value>,
    path: &str,
    nulls: Nulls,
) -> Result<(), ArgumentProblem> {
    let field_path = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let empty = serde_json::Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    // A misspelt name first: it explains a missing required field too.
    if closed && let Some(name) = fields.keys().find(|name| !properties.contains_key(*name)) {
        let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
        known.sort_unstable();
        return Err(ArgumentProblem {
            field: field_path(name),
            problem: format!("unknown field (expected {})", known.join(", ")),
        });
    }
    for name in &required {
        if fields.get(*name).is_none_or(Value::is_null) {
            return Err(ArgumentProblem {
                field: field_path(name),
                problem: "required".to_owned(),
            });
        }
    }
    for (name, value) in fields.iter_mut() {
        if let Some(property) = properties.get(name)
            && (nulls == Nulls::Typed || !value.is_null())
        {
            check(property, value, &field_path(name), nulls)?;
        }
    }
    Ok(())
}

fn kind_with_article(kind: &str) -> String {
    match kind {
        "object" | "array" | "integer" => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
