//! Prints the bytes the default tool set adds to every request, per tool and in total (and
//! `read_image`'s, offered to models with vision only):
//! `cargo run -p keel-tools --example schema_bytes`.
#![allow(clippy::print_stdout)]

use keel_tools::{BuiltinConfig, ToolRegistry, default_tool_schemas_bytes};

fn main() {
    let reg = ToolRegistry::with_builtins(&BuiltinConfig::default());
    if let Some(tools) = reg.request_tools().as_array() {
        for t in tools {
            let bytes = serde_json::to_vec(t).map_or(0, |v| v.len());
            println!(
                "{:>16} {bytes:>5} bytes",
                t["function"]["name"].as_str().unwrap_or("?")
            );
        }
    }
    println!("{:>16} {:>5} bytes", "total", default_tool_schemas_bytes());
    // Offered beside them to a model with vision only.
    let seeing = BuiltinConfig {
        images: Some(keel_tools::Attachments::new("attachments")),
        ..BuiltinConfig::default()
    };
    let reg = ToolRegistry::with_builtins(&seeing);
    if let Some(t) = reg
        .request_tools()
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["function"]["name"] == "read_image"))
    {
        let bytes = serde_json::to_vec(t).map_or(0, |v| v.len());
        println!(
            "{:>16} {bytes:>5} bytes (models with vision only)",
            "read_image"
        );
    }
}
