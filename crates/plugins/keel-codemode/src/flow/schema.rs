//! The JSON answers of children: finding the JSON value in an answer's text, and checking it
//! against a JSON Schema with keel's one validator ([`keel_tools::schema`]: `type`,
//! `properties`, `required`, `additionalProperties`, `items`, `enum`, `const`,
//! `anyOf`/`oneOf`, `minItems`/`maxItems`, `minLength`/`maxLength`, `minimum`/`maximum`).
//! Keywords outside it are ignored.

use keel_tools::schema::Violation;
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

/// How an answer's JSON value fails its schema: each violation as `the answer: what` or
/// `/pointer: what`, `; `-joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.0))]
pub struct Mismatch(pub Vec<Violation>);

fn describe(violations: &[Violation]) -> String {
    let parts: Vec<String> = violations
        .iter()
        .map(|v| match v.pointer.as_str() {
            "" => format!("the answer: {}", v.message),
            at => format!("{at}: {}", v.message),
        })
        .collect();
    parts.join("; ")
}

/// Check `value` against `schema` ([`keel_tools::schema::validate`], the validator tool
/// arguments use); what is wrong otherwise.
pub fn validate(value: &Value, schema: &Value) -> Result<(), Mismatch> {
    let violations = keel_tools::schema::validate(schema, value);
    if violations.is_empty() {
        return Ok(());
    }
    Err(Mismatch(violations))
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
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            "kind": {"const": "report"},
            "ref": {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        }, "additionalProperties": false});
        let validate = |v: &Value, s: &Value| validate(v, s).map_err(|e| e.to_string());
        assert_eq!(validate(&json!({"n": 2, "tags": ["a"]}), &s), Ok(()));
        assert_eq!(
            validate(&json!({"n": "2", "tags": []}), &s),
            Err("/n: expected integer, got string".into())
        );
        assert_eq!(
            validate(&json!({"n": 2}), &s),
            Err("the answer: missing required property 'tags'".into())
        );
        assert_eq!(
            validate(&json!({"n": 2, "tags": ["c"]}), &s),
            Err("/tags/0: must be one of \"a\", \"b\"".into())
        );
        assert!(validate(&json!({"n": 0, "tags": []}), &s).is_err_and(|e| e.contains(">= 1")));
        assert!(
            validate(&json!({"n": 1, "tags": [], "x": 1}), &s)
                .is_err_and(|e| e.contains("/x: unknown property"))
        );
        assert_eq!(
            validate(
                &json!({"n": 1, "tags": [], "kind": "memo", "ref": true}),
                &s
            ),
            Err("/kind: must be \"report\"; /ref: matches none of the oneOf alternatives".into())
        );
    }
}
