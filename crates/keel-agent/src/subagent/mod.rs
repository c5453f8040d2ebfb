//! Subagents (work in progress).
