//! The default tool set's schemas: valid, stable, and small.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tools::schema::check_schema;
use keel_tools::{BuiltinConfig, ToolRegistry, default_tool_schemas_bytes};
use pretty_assertions::assert_eq;
use serde_json::Value;

/// Budget for the default tools' schemas (the request also carries a ~3 KB system prompt and
/// must stay under 12 KB; room is left for job_output/job_list/job_kill/subagent).
const SCHEMA_BUDGET: usize = 8 * 1024;

#[test]
fn default_tools_are_registered_in_a_fixed_order() {
    let reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    let names: Vec<&str> = reg.names().collect();
    assert_eq!(
        names,
        vec![
            "read",
            "write",
            "edit",
            "glob",
            "grep",
            "bash",
            "working_directory",
            "todo_write",
            "exit_plan_mode",
            "ask_user_question"
        ]
    );
}

#[test]
fn every_schema_is_a_valid_object_schema_with_descriptions() {
    let reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    for schema in reg.schemas() {
        assert!(
            check_schema(&schema.parameters).is_ok(),
            "{}: {:?}",
            schema.name,
            check_schema(&schema.parameters)
        );
        assert!(
            schema.description.len() >= 40,
            "{} is under-described",
            schema.name
        );
        let props = schema.parameters["properties"].as_object().unwrap();
        assert!(!props.is_empty(), "{}", schema.name);
        // A tool whose every argument is optional (`working_directory`) lists none.
        let none = Vec::new();
        let required = schema.parameters["required"].as_array().unwrap_or(&none);
        for required in required {
            assert!(props.contains_key(required.as_str().unwrap()));
        }
    }
}

#[test]
fn request_tools_are_byte_stable_and_within_budget() {
    let a = ToolRegistry::with_builtins(&BuiltinConfig::default());
    let b = ToolRegistry::with_builtins(&BuiltinConfig::default());
    let bytes_a = serde_json::to_vec(&a.request_tools()).unwrap();
    assert_eq!(bytes_a, serde_json::to_vec(&b.request_tools()).unwrap());
    assert_eq!(bytes_a.len(), default_tool_schemas_bytes());
    assert!(
        default_tool_schemas_bytes() <= SCHEMA_BUDGET,
        "{} bytes",
        default_tool_schemas_bytes()
    );
    let tools: Value = serde_json::from_slice(&bytes_a).unwrap();
    for t in tools.as_array().unwrap() {
        assert_eq!(t["type"], "function");
        assert!(t["function"]["name"].is_string() && t["function"]["parameters"].is_object());
    }
}

#[test]
fn ask_user_question_schema_is_small() {
    let reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    let tools: Value =
        serde_json::from_slice(&serde_json::to_vec(&reg.request_tools()).unwrap()).unwrap();
    let ask = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ask_user_question")
        .unwrap();
    let bytes = serde_json::to_vec(ask).unwrap().len();
    eprintln!(
        "ask_user_question: {bytes} bytes; default tools: {} bytes",
        default_tool_schemas_bytes()
    );
    assert!(bytes <= 700, "{bytes} bytes");
}
