//! The conversation as the UI shows it: keel-session's shared cell model
//! ([`keel_session::view::cells`]), built from session events only, so the same events give the
//! same cells whether they arrive live or from a session file being resumed (and the same cells
//! keel-acp sends to an editor). This module names what the UI uses of it.

pub use keel_session::view::cells::{
    Cell, Cells, Change, Detail, Level, ToolCard, ToolState, Usage,
};
pub use keel_session::view::text::one_line;
