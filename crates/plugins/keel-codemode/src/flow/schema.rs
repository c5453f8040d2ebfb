//! The JSON answers of children: finding the JSON value in an answer's text, and checking it
//! against a JSON Schema (the subset models are asked for: `type`, `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `anyOf`/`oneOf`, `minItems`/`maxItems`,
//! `minLength`/`maxLength`, `minimum`/`maximum`). Keywords outside it are ignored.

use serde_json::Value;

/// The JSON value an answer carries: the whole text, else its last ```` ``` ```` block, else
/// the span from its first `{` (or `[`) to its last `}` (or `]`).
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str(trimmed) {
        return Some(v);
    }
    let mut blocks = trimmed.split("```").skip(1).step_by(2).collect::<Vec<_>>();
    while let Some(block) = blocks.pop() {
        let body = block.strip_prefix("json").unwrap_or(block);
        if let Ok(v) = serde_json::from_str(body.trim()) {
            return Some(v);
        }
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(a), Some(b)) = (trimmed.find(open), trimmed.rfind(close))
            && a < b
            && let Some(span) = trimmed.get(a..=b)
            && let Ok(v) = serde_json::from_str(span)
        {
            return Some(v);
        }
    }
    None
}

/// Check `value` against `schema`; the first mismatch, as `path: what`.
pub fn validate(value: &Value, schema: &Value) -> Result<(), String> {
    check(value, schema, "$")
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
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

fn check(v: &Value, s: &Value, path: &str) -> Result<(), String> {
    let Some(s) = s.as_object() else {
        return Ok(());
    };
    match s.get("type") {
        Some(Value::String(t)) if !has_type(v, t) => {
            return Err(format!("{path}: expected {t}, got {}", type_name(v)));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| has_type(v, t)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            return Err(format!(
                "{path}: expected {}, got {}",
                names.join(" or "),
                type_name(v)
            ));
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        return Err(format!(
            "{path}: {v} is not one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return Err(format!("{path}: expected {c}, got {v}"));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = s.get(key)
            && !options.iter().any(|o| check(v, o, path).is_ok())
        {
            return Err(format!("{path}: matches none of the {key} alternatives"));
        }
    }
    let bound = |k: &str| s.get(k).and_then(Value::as_f64);
    if let Some(n) = v.as_f64() {
        if let Some(min) = bound("minimum")
            && n < min
        {
            return Err(format!("{path}: {n} is below the minimum {min}"));
        }
        if let Some(max) = bound("maximum")
            && n > max
        {
            return Err(format!("{path}: {n} is above the maximum {max}"));
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as f64;
        if bound("minLength").is_some_and(|m| len < m)
            || bound("maxLength").is_some_and(|m| len > m)
        {
            return Err(format!(
                "{path}: a string of {len} characters is out of bounds"
            ));
        }
    }
    if let Some(items) = v.as_array() {
        let len = items.len() as f64;
        if bound("minItems").is_some_and(|m| len < m) || bound("maxItems").is_some_and(|m| len > m)
        {
            return Err(format!("{path}: {len} items is out of bounds"));
        }
        if let Some(item_schema) = s.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item, item_schema, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(Value::Array(required)) = s.get("required") {
            for key in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(key) {
                    return Err(format!("{path}: missing required property {key:?}"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (key, item) in obj {
            let sub = format!("{path}.{key}");
            match (
                props.and_then(|p| p.get(key)),
                s.get("additionalProperties"),
            ) {
                (Some(ps), _) => check(item, ps, &sub)?,
                (None, Some(Value::Bool(false))) => {
                    return Err(format!("{path}: property {key:?} is not allowed"));
                }
                (None, Some(extra @ Value::Object(_))) => check(item, extra, &sub)?,
                (None, _) => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_found_in_prose_and_fences() {
        assert_eq!(extract_json(" {\"a\":1} "), Some(json!({"a": 1})));
        assert_eq!(
            extract_json("Here:\n```json\n{\"a\": [1]}\n```\nDone."),
            Some(json!({"a": [1]}))
        );
        assert_eq!(
            extract_json("I did it. {\"status\": \"done\"}"),
            Some(json!({"status": "done"}))
        );
        assert_eq!(extract_json("no json here"), None);
    }

    #[test]
    fn mismatches_name_the_path() {
        let s = json!({"type": "object", "required": ["n", "tags"], "properties": {
            "n": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}}
        }, "additionalProperties": false});
        assert_eq!(validate(&json!({"n": 2, "tags": ["a"]}), &s), Ok(()));
        assert_eq!(
            validate(&json!({"n": "2", "tags": []}), &s),
            Err("$.n: expected integer, got string".into())
        );
        assert_eq!(
            validate(&json!({"n": 2}), &s),
            Err("$: missing required property \"tags\"".into())
        );
        assert!(
            validate(&json!({"n": 2, "tags": ["c"]}), &s)
                .is_err_and(|e| e.starts_with("$.tags[0]: \"c\" is not one of"))
        );
        assert!(validate(&json!({"n": 0, "tags": []}), &s).is_err_and(|e| e.contains("minimum")));
        assert!(
            validate(&json!({"n": 1, "tags": [], "x": 1}), &s)
                .is_err_and(|e| e.contains("not allowed"))
        );
    }
}
