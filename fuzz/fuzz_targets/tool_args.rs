//! Tool-argument parsing and schema validation, the pipeline's first phase for a model's tool
//! call ([`keel_tools::pipeline::parse_and_validate`]) against a built-in tool's schema.
//!
//! Input: byte 0 picks the built-in tool (modulo their number); the rest, as UTF-8, is the raw
//! `arguments` string. Checked: nothing panics; accepted arguments are a JSON object (every
//! built-in's schema is `type: object`); the schema validator gives the same verdict on the
//! value read back from its own serialisation.
#![no_main]

use keel_tools::pipeline::parse_and_validate;
use keel_tools::{ArgsShape, BuiltinConfig, ToolRegistry};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static TOOLS: LazyLock<Vec<(String, serde_json::Value, ArgsShape)>> = LazyLock::new(|| {
    let reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    reg.schemas()
        .into_iter()
        .filter_map(|s| {
            let shape = reg.get(&s.name)?.shape();
            Some((s.name, s.parameters, shape))
        })
        .collect()
});

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let tools = &*TOOLS;
    assert!(!tools.is_empty());
    let (name, params, shape) = &tools[usize::from(pick) % tools.len()];
    match parse_and_validate(name, params, *shape, raw) {
        Ok(args) => {
            assert!(
                args.is_object(),
                "{name} accepted non-object arguments {args}"
            );
            let text = serde_json::to_string(&args).expect("a Value serialises");
            assert!(
                parse_and_validate(name, params, *shape, &text).is_ok(),
                "{name}: re-serialised arguments {text} rejected"
            );
        }
        Err(e) => assert!(e.to_string().contains(name.as_str())),
    }
});
