//! The MCP client: configured servers, connections and their tools as keel tools.
