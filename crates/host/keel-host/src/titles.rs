//! Whether a run's sessions get titles by the model ([`keel_agent::titles`]): the top-level
//! `titles` key, default true — but only for a provider at its built-in URL. When the run
//! points the endpoint at a server of its own (`--base-url`, `DEEPSEEK_BASE_URL`, a
//! `base_url` set by a configuration layer: often a local server, or a proxy, that pays for
//! every request), titles are off unless a configuration layer sets `titles = true` itself.
//! Never for the scripted model (`--script`, `keel demo`: a script has no answer for the
//! title request).

use crate::config::Loaded;
use keel_protocol::EventBody;
use keel_session::Session;

/// The layer of the built-in defaults.
const DEFAULTS_LAYER: &str = "defaults";

/// The origins of a built-in endpoint URL ([`crate::Endpoint::base_url_origin`]).
const BUILTIN_URL: [&str; 2] = [DEFAULTS_LAYER, "built-in default"];

/// Whether agents of a run on `provider_name` get titles, given `loaded` and who chose the
/// endpoint's URL (`base_url_origin`).
pub fn enabled(loaded: &Loaded, provider_name: &str, base_url_origin: &str) -> bool {
    if provider_name == "scripted" || !loaded.config.titles.unwrap_or(true) {
        return false;
    }
    let explicit = loaded
        .origin
        .get("titles")
        .is_some_and(|layer| layer != DEFAULTS_LAYER);
    explicit || BUILTIN_URL.contains(&base_url_origin)
}

/// True when `session` may still get a title: none is logged and no human prompt is (a
/// resumed session keeps what it had).
pub fn untitled(session: &Session) -> bool {
    session.title().is_none()
        && !session.whole_event_iter().any(|e| match &e.body {
            EventBody::UserMessage(m) => m.source.is_user(),
            _ => false,
        })
}
