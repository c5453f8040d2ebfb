//! keel-web: the model's two ways onto the web.
//!
//! | piece | where |
//! |---|---|
//! | `web_search`: one call to DeepSeek's Anthropic-compatible Messages API with its server-side `web_search` tool, as DeepSeek Harness makes it; findings and numbered sources | [`search`] |
//! | `web_fetch`: an HTTP(S) GET of a public address, HTML as Markdown | [`fetch`] |
//! | which addresses are private, which hosts are DeepSeek's | [`net`] |
//! | the `web` plugin row: which endpoint and key the search uses, when each tool is offered | [`plugin`] |
//!
//! Both answers are framed as data from the web, not instructions. Design: `docs/web.md`.
#![deny(missing_docs)]

pub mod error;
pub mod fetch;
pub mod net;
pub mod plugin;
pub mod search;

pub use error::WebError;
pub use plugin::{ID, SEARCH_BASE_URL_ENV, WebConfig, WebPlugin};
