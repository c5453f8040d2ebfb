//! `history_search` (in progress).

/// The `history_search` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistorySearch;

#[async_trait::async_trait]
impl keel_tools::Tool for HistorySearch {
    fn schema(&self) -> keel_protocol::ToolSchema {
        keel_protocol::ToolSchema {
            name: "history_search".into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }
    async fn execute(
        &self,
        _args: serde_json::Value,
        _ctx: &keel_tools::ToolContext<'_>,
    ) -> Result<keel_tools::ToolOutput, keel_tools::ToolError> {
        Err(keel_tools::ToolError::Failed("not built yet".into()))
    }
}
