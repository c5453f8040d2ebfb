//! Pure data types shared by every keel crate.
//!
//! Nothing here performs I/O. The JSON shapes (field names, tags) follow DeepSeek Harness's
//! session log, version 0, so that keel reads dsh sessions and dsh users recognise keel's:
//! camelCase fields (`surfaceOp`, `sourceEventSeqs`, `callId`, `toolCallId`, `isError`), kebab-case
//! tags (`tool-call`, `text-delta`, `max-tokens`).
//!
//! - [`message`]: messages, content blocks and message sources.
//! - [`stream`]: the streaming primitive's chunks, finish reasons, token usage, model failures.
//! - [`event`]: the session log envelope and every core event payload.
//! - [`tool`]: tool schemas and tool error codes.
//! - [`present`]: the presenter seam: plugins' events as generic view items every front end
//!   renders.
//! - [`text`]: the one rule for shortening text to a line (`one_line`, `cut`), pure functions
//!   every view, front end and log writer shares.
#![deny(missing_docs)]

pub mod event;
pub mod ids;
pub mod message;
pub mod present;
pub mod stream;
pub mod sync;
pub mod text;
pub mod time;
pub mod tool;

pub use event::*;
pub use ids::*;
pub use message::*;
pub use stream::*;
pub use time::{TimeMs, civil_from_days, now_ms, utc_rfc3339, utc_time};
pub use tool::*;
