//! The memory store: records and variables (in progress).

use crate::plugin::MemoryConfig;
use keel_agent::plugin::{InstallContext, PluginError};
use keel_tools::Tool;
use std::sync::Arc;

/// The memory and variable tools for one install.
pub fn tools(
    _ctx: &InstallContext,
    _config: &MemoryConfig,
) -> Result<Vec<Arc<dyn Tool>>, PluginError> {
    Ok(Vec::new())
}
