//! A small JSON-Schema validator for the subset tool schemas use: `type` (a name or a list),
//! `properties`, `required`, `additionalProperties` (bool or schema), `enum`, `items`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`; `description`,
//! `title` and `default` are annotations. [`validate`] also knows `const`, `anyOf` (some
//! alternative holds) and `oneOf` (exactly one holds), which the answers Code Mode's workflows
//! ask of children use.
//!
//! [`check_schema`] verifies at registration that a tool's schema stays within the tool
//! subset and is well formed, so [`validate`] never meets a keyword it would silently ignore.

use serde_json::{Map, Value};

/// One way arguments fail their schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer to the offending value (`""` for the whole object).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// At most this many violations are reported for one value.
const MAX_VIOLATIONS: usize = 8;

/// Validate `value` against `schema`; an empty vector means valid.
pub fn validate(schema: &Value, value: &Value) -> Vec<Violation> {
    run(schema, value, false)
}

/// [`validate`], refusing top-level properties `schema` does not declare even where it does not
/// say `additionalProperties: false` (a keel tool's arguments are never silently dropped).
pub fn validate_closed(schema: &Value, value: &Value) -> Vec<Violation> {
    run(schema, value, true)
}

/// What a schema that says nothing of `additionalProperties` means at a closed level.
static CLOSED: Value = Value::Bool(false);

fn run(schema: &Value, value: &Value, closed: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut pointer = String::new();
    check(schema, value, &mut pointer, &mut out, closed);
    out
}

fn push(out: &mut Vec<Violation>, pointer: &str, message: String) {
    if out.len() < MAX_VIOLATIONS {
        out.push(Violation {
            pointer: pointer.to_owned(),
            message,
        });
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "integer" => match v {
            Value::Number(n) => {
                n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
            }
            _ => false,
        },
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

/// Check `value` against `schema`; `closed`: undeclared properties of this (top-level) object
/// are refused unless the schema says otherwise.
fn check(
    schema: &Value,
    value: &Value,
    pointer: &mut String,
    out: &mut Vec<Violation>,
    closed: bool,
) {
    let Some(s) = schema.as_object() else { return };
    if let Some(ty) = s.get("type") {
        let ok = match ty {
            Value::String(t) => has_type(value, t),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| has_type(value, t)),
            _ => true,
        };
        if !ok {
            let want = match ty {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            };
            push(
                out,
                pointer,
                format!("expected {want}, got {}", type_name(value)),
            );
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        push(out, pointer, format!("must be one of {}", list.join(", ")));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        push(out, pointer, format!("must be {c}"));
    }
    for key in ["anyOf", "oneOf"] {
        let Some(Value::Array(options)) = s.get(key) else {
            continue;
        };
        let holding = options
            .iter()
            .filter(|o| {
                let mut inner = Vec::new();
                check(o, value, &mut pointer.clone(), &mut inner, false);
                inner.is_empty()
            })
            .count();
        if holding == 0 {
            push(
                out,
                pointer,
                format!("matches none of the {key} alternatives"),
            );
        } else if key == "oneOf" && holding > 1 {
            push(
                out,
                pointer,
                format!("matches {holding} of the oneOf alternatives (exactly one must)"),
            );
        }
    }
    match value {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                push(out, pointer, format!("must be >= {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                push(out, pointer, format!("must be <= {max}"));
            }
        }
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                push(out, pointer, format!("must be at least {min} characters"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                push(out, pointer, format!("must be at most {max} characters"));
            }
        }
        Value::Array(items) => check_array(s, items, pointer, out),
        Value::Object(obj) => check_object(s, obj, pointer, out, closed),
        _ => {}
    }
}

fn check_array(
    s: &Map<String, Value>,
    items: &[Value],
    pointer: &mut String,
    out: &mut Vec<Violation>,
) {
    let n = items.len() as u64;
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        push(out, pointer, format!("must have at least {min} items"));
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        push(out, pointer, format!("must have at most {max} items"));
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(&i.to_string());
            check(item_schema, item, pointer, out, false);
            pointer.truncate(len);
        }
    }
}

fn check_object(
    s: &Map<String, Value>,
    obj: &Map<String, Value>,
    pointer: &mut String,
    out: &mut Vec<Violation>,
    closed: bool,
) {
    let additional = s.get("additionalProperties").or(closed.then_some(&CLOSED));
    let props = s.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = s.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(name) {
                push(out, pointer, format!("missing required property '{name}'"));
            }
        }
    }
    for (key, v) in obj {
        let len = pointer.len();
        pointer.push('/');
        pointer.push_str(key);
        match props.and_then(|p| p.get(key)) {
            Some(prop_schema) => check(prop_schema, v, pointer, out, false),
            None => match additional {
                Some(Value::Bool(false)) => {
                    let mut known: Vec<&str> = props
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    known.sort_unstable();
                    push(
                        out,
                        pointer,
                        format!("unknown property (allowed: {})", known.join(", ")),
                    );
                }
                Some(extra @ Value::Object(_)) => check(extra, v, pointer, out, false),
                _ => {}
            },
        }
        pointer.truncate(len);
    }
}

/// Render violations for the model: `/offset: expected integer, got string; …`.
pub fn describe(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| {
            let at = if v.pointer.is_empty() {
                "arguments"
            } else {
                v.pointer.as_str()
            };
            format!("{at}: {}", v.message)
        })
        .collect();
    parts.join("; ")
}

/// A schema outside the supported subset, or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid schema at {pointer}: {message}")]
pub struct SchemaDefect {
    /// Where in the schema.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

const TYPES: &[&str] = &[
    "null", "boolean", "integer", "number", "string", "array", "object",
];

/// Check that a tool's parameter schema is an object schema within the supported subset.
pub fn check_schema(schema: &Value) -> Result<(), SchemaDefect> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(defect(
            "",
            "a tool's parameters must be a schema of type \"object\"",
        ));
    }
    check_node(schema, "")
}

/// The check of a schema from outside keel ([`crate::Tool::foreign_schema`]): an object schema
/// whose `properties`, if any, is an object of schemas. Other keywords pass through (the
/// validator ignores the ones it does not know).
pub fn check_foreign_schema(schema: &Value) -> Result<(), SchemaDefect> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(defect(
            "",
            "a tool's parameters must be a schema of type \"object\"",
        ));
    }
    match schema.get("properties") {
        None => Ok(()),
        Some(Value::Object(props)) => match props
            .iter()
            .find(|(_, v)| !v.is_object() && !v.is_boolean())
        {
            Some((name, _)) => Err(defect(
                &format!("/properties/{name}"),
                "a schema must be an object",
            )),
            None => Ok(()),
        },
        Some(_) => Err(defect("/properties", "must be an object")),
    }
}

fn defect(pointer: &str, message: impl Into<String>) -> SchemaDefect {
    SchemaDefect {
        pointer: pointer.to_owned(),
        message: message.into(),
    }
}

fn check_node(schema: &Value, at: &str) -> Result<(), SchemaDefect> {
    let s = schema
        .as_object()
        .ok_or_else(|| defect(at, "a schema must be an object"))?;
    for (key, v) in s {
        let here = format!("{at}/{key}");
        match key.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) if !a.is_empty() => a.iter().collect(),
                    Value::String(_) => vec![v],
                    _ => return Err(defect(&here, "must be a type name or a non-empty list")),
                };
                for n in names {
                    if !n.as_str().is_some_and(|n| TYPES.contains(&n)) {
                        return Err(defect(&here, format!("unknown type {n}")));
                    }
                }
            }
            "properties" => {
                let props = v
                    .as_object()
                    .ok_or_else(|| defect(&here, "must be an object"))?;
                for (name, sub) in props {
                    check_node(sub, &format!("{here}/{name}"))?;
                }
            }
            "required" => {
                let props = s.get("properties").and_then(Value::as_object);
                let list = v
                    .as_array()
                    .ok_or_else(|| defect(&here, "must be an array"))?;
                for name in list {
                    let name = name
                        .as_str()
                        .ok_or_else(|| defect(&here, "names must be strings"))?;
                    if !props.is_some_and(|p| p.contains_key(name)) {
                        return Err(defect(
                            &here,
                            format!("'{name}' is not a declared property"),
                        ));
                    }
                }
            }
            "additionalProperties" => match v {
                Value::Bool(_) => {}
                other => check_node(other, &here)?,
            },
            "items" => check_node(v, &here)?,
            "enum" => {
                if v.as_array().is_none_or(|a| a.is_empty()) {
                    return Err(defect(&here, "must be a non-empty array"));
                }
            }
            "minimum" | "maximum" => {
                if !v.is_number() {
                    return Err(defect(&here, "must be a number"));
                }
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                if !v.is_u64() {
                    return Err(defect(&here, "must be a non-negative integer"));
                }
            }
            "description" | "title" => {
                if !v.is_string() {
                    return Err(defect(&here, "must be a string"));
                }
            }
            "default" => {}
            other => return Err(defect(&here, format!("unsupported keyword '{other}'"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type":"object","properties":{
            "path":{"type":"string","minLength":1},
            "n":{"type":"integer","minimum":1,"maximum":10},
            "mode":{"type":"string","enum":["a","b"]},
            "list":{"type":"array","items":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]}}
        },"required":["path"],"additionalProperties":false})
    }

    #[test]
    fn valid_arguments_pass() {
        let v = json!({"path":"x","n":3,"mode":"a","list":[{"x":true}]});
        assert_eq!(validate(&schema(), &v), vec![]);
        assert_eq!(validate(&schema(), &json!({"path":"x","n":3.0})), vec![]);
    }

    #[test]
    fn violations_name_the_pointer() {
        let v = json!({"n":"3","mode":"c","list":[{}],"extra":1});
        let mut got: Vec<String> = describe(&validate(&schema(), &v))
            .split("; ")
            .map(str::to_owned)
            .collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                "/extra: unknown property (allowed: list, mode, n, path)",
                "/list/0: missing required property 'x'",
                "/mode: must be one of \"a\", \"b\"",
                "/n: expected integer, got string",
                "arguments: missing required property 'path'",
            ]
        );
        assert_eq!(validate(&schema(), &json!([])).len(), 1);
        assert_eq!(validate(&schema(), &json!({"path":"x","n":11})).len(), 1);
    }

    #[test]
    fn check_schema_rejects_unsupported_shapes() {
        assert!(check_schema(&schema()).is_ok());
        assert!(check_schema(&json!({"type":"string"})).is_err());
        assert!(check_schema(&json!({"type":"object","oneOf":[]})).is_err());
        assert!(check_schema(&json!({"type":"object","required":["x"]})).is_err());
        assert!(check_schema(&json!({"type":"object","properties":{"x":{"type":"int"}}})).is_err());
    }

    #[test]
    fn const_any_of_and_one_of_are_checked() {
        let s = json!({"type": "object", "properties": {
            "kind": {"const": "report"},
            "n": {"anyOf": [{"type": "integer", "minimum": 10}, {"type": "string"}]},
            "x": {"oneOf": [{"type": "integer"}, {"type": "number"}]}
        }});
        assert_eq!(
            validate(&s, &json!({"kind": "report", "n": 12, "x": 1.5})),
            vec![]
        );
        let got = validate(&s, &json!({"kind": "other", "n": 3, "x": 2}));
        let messages: Vec<(String, String)> =
            got.into_iter().map(|v| (v.pointer, v.message)).collect();
        assert_eq!(
            messages,
            vec![
                ("/kind".to_owned(), "must be \"report\"".to_owned()),
                (
                    "/n".to_owned(),
                    "matches none of the anyOf alternatives".to_owned()
                ),
                (
                    "/x".to_owned(),
                    "matches 2 of the oneOf alternatives (exactly one must)".to_owned()
                ),
            ]
        );
    }
}
