//! The two tools' schemas: what they cost on every request once enabled (compact JSON of
//! name, description and parameters), and that they match dsh's contract.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use keel_agent::subagent::{Spawner, SubagentConfig};
use keel_codemode::WorkflowSettings;
use keel_codemode::flow::ralph::RalphTool;
use keel_codemode::flow::workflow::WorkflowTool;
use keel_session::Store;
use keel_tools::Tool;
use serde_json::json;
use std::sync::Arc;

fn size(tool: &dyn Tool) -> (usize, serde_json::Value) {
    let s = tool.schema();
    let v = json!({"name": s.name, "description": s.description, "parameters": s.parameters});
    (serde_json::to_string(&v).unwrap().len(), s.parameters)
}

#[test]
fn schemas_are_dshs_contract_and_small() {
    let spawner = Spawner::new(
        Arc::new(SubagentConfig::default()),
        Store::new(std::env::temp_dir()),
    );
    let workflow = WorkflowTool::new(spawner.clone(), WorkflowSettings::default().limits(), 4);
    let ralph = RalphTool::new(spawner);
    let (w, wp) = size(&workflow);
    let (r, rp) = size(&ralph);
    println!("schema bytes: workflow {w}, ralph {r}");
    assert_eq!(wp["required"], json!(["script", "meta"]));
    assert_eq!(
        wp["properties"]["meta"]["required"],
        json!(["name", "description"])
    );
    assert_eq!(
        wp["properties"]["meta"]["properties"]["phases"]["items"]["required"],
        json!(["title"])
    );
    assert_eq!(wp["properties"]["args"]["type"], "object");
    assert_eq!(rp["required"], json!(["objective"]));
    assert_eq!(rp["properties"]["maxRounds"]["type"], "number");
    assert!(w < 900 && r < 400, "workflow {w} B, ralph {r} B");
}
