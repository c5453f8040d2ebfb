//! The `tools` declaration the model reads: one TypeScript signature per visible tool,
//! generated from its JSON Schema, sorted by name so the text is byte-stable for the same tool
//! set (the provider's prompt cache depends on it).
//!
//! Mapping: `string`/`number`/`boolean`/`null` → the same TypeScript type, `integer` →
//! `number`, `enum` → a union of literals, `array` → `T[]`, `object` → `{ key: T; key?: T }`
//! (optional unless `required`; `additionalProperties` → an index signature; no `properties` →
//! `Record<string, unknown>`), `anyOf`/`oneOf` and type lists → unions; anything else →
//! `unknown`. Properties come sorted by key, so the text does not depend on how a schema was
//! built (nor on serde_json's `preserve_order`). A property's `description` becomes a `/** … */` comment
//! before it. Every tool
//! resolves to `Promise<string>`: the text of its result.

use keel_protocol::ToolSchema;
use serde_json::{Map, Value};
use std::fmt::Write as _;

/// Deepest nesting rendered; below it a schema is `unknown` (a hostile schema cannot make the
/// declaration unbounded).
const MAX_DEPTH: usize = 8;
/// Longest description kept in a comment, in bytes.
const MAX_DESCRIPTION: usize = 400;

/// The declaration of `tools` for these schemas, sorted by name; `skip` names tools left out
/// (`run_code` itself).
pub fn declaration(schemas: &[ToolSchema], skip: &[&str]) -> String {
    let mut sorted: Vec<&ToolSchema> = schemas
        .iter()
        .filter(|s| !skip.contains(&s.name.as_str()))
        .collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = String::from("declare const tools: {\n");
    for schema in sorted {
        let summary = first_sentence(&schema.description);
        if !summary.is_empty() {
            let _ = writeln!(out, "  /** {} */", comment_text(&summary));
        }
        let _ = writeln!(
            out,
            "  {}(args: {}): Promise<string>;",
            property_name(&schema.name),
            type_of(&schema.parameters, 1, 1)
        );
    }
    out.push_str("};");
    out
}

/// The TypeScript type of `schema` at nesting `depth`, its object members indented for
/// level `indent`.
pub fn type_of(schema: &Value, depth: usize, indent: usize) -> String {
    let Some(obj) = schema.as_object() else {
        // `true` accepts anything; `false` or junk accepts nothing useful.
        return "unknown".into();
    };
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        let parts: Vec<String> = values.iter().map(literal).collect();
        return if parts.is_empty() {
            "never".into()
        } else {
            parts.join(" | ")
        };
    }
    if let Some(c) = obj.get("const") {
        return literal(c);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = obj.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = options
                .iter()
                .map(|o| parenthesised(type_of(o, depth + 1, indent)))
                .collect();
            return union(parts);
        }
    }
    match obj.get("type") {
        Some(Value::String(t)) => named(t, obj, depth, indent),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| parenthesised(named(t, obj, depth, indent)))
                .collect(),
        ),
        _ if obj.contains_key("properties") => object(obj, depth, indent),
        _ => "unknown".into(),
    }
}

fn named(t: &str, obj: &Map<String, Value>, depth: usize, indent: usize) -> String {
    match t {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match obj.get("items") {
            Some(items) => format!("{}[]", parenthesised(type_of(items, depth + 1, indent))),
            None => "unknown[]".into(),
        },
        "object" => object(obj, depth, indent),
        _ => "unknown".into(),
    }
}

fn object(obj: &Map<String, Value>, depth: usize, indent: usize) -> String {
    let props = obj.get("properties").and_then(Value::as_object);
    let extra = match obj.get("additionalProperties") {
        Some(Value::Object(schema)) => Some(type_of(
            &Value::Object(schema.clone()),
            depth + 1,
            indent + 1,
        )),
        Some(Value::Bool(true)) => Some("unknown".to_owned()),
        _ => None,
    };
    let Some(props) = props.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(t) => format!("Record<string, {t}>"),
            None if obj.get("additionalProperties") == Some(&Value::Bool(false)) => {
                "Record<string, never>".into()
            }
            None => "Record<string, unknown>".into(),
        };
    };
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pad = "  ".repeat(indent + 1);
    let mut out = String::from("{\n");
    // Sorted here: a map's order depends on serde_json's `preserve_order`, which another
    // crate of the build may turn on.
    let mut props: Vec<(&String, &Value)> = props.iter().collect();
    props.sort_by(|a, b| a.0.cmp(b.0));
    for (key, schema) in props {
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            let d = d.trim();
            if !d.is_empty() {
                let _ = writeln!(out, "{pad}/** {} */", comment_text(d));
            }
        }
        let optional = if required.contains(&key.as_str()) {
            ""
        } else {
            "?"
        };
        let _ = writeln!(
            out,
            "{pad}{}{optional}: {};",
            property_name(key),
            type_of(schema, depth + 1, indent + 1)
        );
    }
    if let Some(t) = extra {
        let _ = writeln!(out, "{pad}[key: string]: {t};");
    }
    out.push_str(&"  ".repeat(indent));
    out.push('}');
    out
}

fn union(parts: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    if seen.is_empty() {
        "unknown".into()
    } else {
        seen.join(" | ")
    }
}

/// Wrap a union (or a function-looking type) so `[]` or `|` binds as meant.
fn parenthesised(t: String) -> String {
    if t.contains(" | ") && !t.starts_with('{') {
        format!("({t})")
    } else {
        t
    }
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        _ => "unknown".into(),
    }
}

/// A property key as TypeScript accepts it: bare when it is an identifier, quoted otherwise.
fn property_name(key: &str) -> String {
    let mut chars = key.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        key.to_owned()
    } else {
        Value::from(key).to_string()
    }
}

/// Text safe inside `/** … */`: one line, no comment terminator, capped.
fn comment_text(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let safe = one_line.replace("*/", "* /");
    if safe.len() <= MAX_DESCRIPTION {
        return safe;
    }
    let cut = safe.floor_char_boundary(MAX_DESCRIPTION);
    format!("{}…", &safe[..cut])
}

/// The first sentence of a tool's description (the whole text when it has no full stop); a
/// full stop after `e.g` or `i.e` ends no sentence.
fn first_sentence(text: &str) -> String {
    let text = text.trim();
    let end = text.match_indices(". ").map(|(at, _)| at).find(|&at| {
        let before = &text[..at];
        !(before.ends_with("e.g") || before.ends_with("i.e"))
    });
    match end {
        Some(end) => text[..=end].to_owned(),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn schema(name: &str, description: &str, parameters: Value) -> ToolSchema {
        ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }

    #[test]
    fn every_supported_keyword_maps_to_its_typescript_type() {
        let params = json!({"type": "object", "required": ["path", "mode"], "properties": {
            "path": {"type": "string", "description": "Where. Relative */ or absolute."},
            "offset": {"type": "integer", "minimum": 1},
            "ratio": {"type": "number"},
            "all": {"type": "boolean"},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "either": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]},
            "one": {"oneOf": [{"type": "null"}, {"type": "boolean"}]},
            "maybe": {"type": ["string", "null"]},
            "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]}},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object"},
            "odd-key": {}
        }});
        let got = declaration(&[schema("x", "Does x, e.g. y. More detail.", params)], &[]);
        let want = r#"declare const tools: {
  /** Does x, e.g. y. */
  x(args: {
    all?: boolean;
    either?: string | number[];
    env?: Record<string, string>;
    free?: Record<string, unknown>;
    items?: {
      k: string;
    }[];
    maybe?: string | null;
    mode: "a" | "b";
    "odd-key"?: unknown;
    offset?: number;
    one?: null | boolean;
    /** Where. Relative * / or absolute. */
    path: string;
    ratio?: number;
    tags?: string[];
  }): Promise<string>;
};"#;
        assert_eq!(got, want);
    }

    #[test]
    fn tools_are_sorted_skipped_and_the_text_is_stable() {
        let a = schema("b_tool", "B.", json!({"type": "object", "properties": {}}));
        let b = schema("a_tool", "A.", json!({"type": "object", "properties": {}}));
        let c = schema(
            "run_code",
            "R.",
            json!({"type": "object", "properties": {}}),
        );
        let one = declaration(&[a.clone(), b.clone(), c.clone()], &["run_code"]);
        let two = declaration(&[c, b, a], &["run_code"]);
        assert_eq!(one, two);
        assert_eq!(
            one,
            "declare const tools: {\n  /** A. */\n  a_tool(args: Record<string, unknown>): Promise<string>;\n  /** B. */\n  b_tool(args: Record<string, unknown>): Promise<string>;\n};"
        );
    }

    #[test]
    fn deep_or_junk_schemas_end_in_unknown() {
        let mut deep = json!({"type": "string"});
        for _ in 0..20 {
            deep = json!({"type": "array", "items": deep});
        }
        let t = type_of(&deep, 0, 0);
        assert!(t.starts_with("unknown[][]") && !t.contains("string"), "{t}");
        assert_eq!(type_of(&json!(true), 0, 0), "unknown");
        assert_eq!(type_of(&json!({"type": "frob"}), 0, 0), "unknown");
        assert_eq!(type_of(&json!({"enum": []}), 0, 0), "never");
    }
}
