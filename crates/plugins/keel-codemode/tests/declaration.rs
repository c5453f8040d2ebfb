//! The `tools` declaration of keel's built-in tool set, snapshotted whole: a change to a
//! built-in schema or to the generator shows here as a diff of what the model reads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_codemode::declare::declaration;
use keel_codemode::engine::Limits;
use keel_codemode::plugin::prompt_section;
use keel_codemode::{RUN_CODE, ToolsMode};
use keel_tools::{BuiltinConfig, ToolRegistry};

#[test]
fn the_builtin_tools_declaration() {
    let schemas = ToolRegistry::with_builtins(&BuiltinConfig::default()).offered_schemas();
    insta::assert_snapshot!(declaration(&schemas, &[RUN_CODE]));
}

#[test]
fn the_prompt_section_is_identical_for_the_same_tools_in_any_order() {
    let schemas = ToolRegistry::with_builtins(&BuiltinConfig::default()).offered_schemas();
    let mut reversed = schemas.clone();
    reversed.reverse();
    let limits = Limits::default();
    let a = prompt_section(ToolsMode::Code, &limits, &schemas);
    assert_eq!(a, prompt_section(ToolsMode::Code, &limits, &reversed));
    assert!(a.contains("cannot be called directly"));
    let both = prompt_section(ToolsMode::Both, &limits, &schemas);
    assert!(!both.contains("cannot be called directly"));
    assert!(both.contains("Limits per run: 60 s, 64 MiB."), "{both}");
}
