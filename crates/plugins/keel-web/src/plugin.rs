//! The `web` plugin (on by default): registers `web_search` and `web_fetch`, and decides when
//! each is offered to the model.
//!
//! **`web_search`** needs `DEEPSEEK_API_KEY` and an endpoint that may receive it:
//! `DEEPSEEK_SEARCH_BASE_URL`, else the row's `search_base_url` (both the user's own: the host
//! drops `search_base_url` from a project's layer), else the origin of the model endpoint when
//! that is a DeepSeek host (`deepseek.com` or a name under it). Anything else (a local server
//! given with `--base-url`, another provider, an in-process model) leaves it not offered, and a
//! call is answered with why.
//!
//! **`web_fetch`** is offered when the row says `fetch = true`, or by default when the model
//! endpoint is a DeepSeek host: a run against another endpoint (a local model, a test's mock
//! server) sends the same tools as before this plugin existed. It refuses private addresses
//! unless the row says `allow_private = true` (user layers only, as above), and refuses every
//! call while `sandbox.network = false`.

use crate::error::SearchUnavailable;
use crate::fetch::{FetchPolicy, FetchTool};
use crate::net::{is_deepseek_host, origin};
use crate::search::{SearchEndpoint, SearchTool};
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// The plugin id.
pub const ID: PluginId = keel_agent::plugin_id!("web");

/// The variable naming the search endpoint's base URL (the user's own choice: the key goes
/// there).
pub const SEARCH_BASE_URL_ENV: &str = "DEEPSEEK_SEARCH_BASE_URL";
/// The variable holding the key sent to the search endpoint.
pub const API_KEY_ENV: &str = "DEEPSEEK_API_KEY";

/// `[plugins.config]` of the `web` row.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    /// The search endpoint's base URL (`/anthropic/v1/messages` is appended); the key is sent
    /// there. `DEEPSEEK_SEARCH_BASE_URL` wins over it. Read from the user's layers only.
    #[serde(default)]
    pub search_base_url: Option<String>,
    /// Let `web_fetch` reach loopback, private, link-local and unique-local addresses. Read
    /// from the user's layers only.
    #[serde(default)]
    pub allow_private: bool,
    /// Offer `web_fetch`: `true` always, `false` never; unset, when the model endpoint is a
    /// DeepSeek host.
    #[serde(default)]
    pub fetch: Option<bool>,
    /// Time limit of one search call, in milliseconds (default 60,000).
    #[serde(default)]
    pub search_timeout_ms: Option<u64>,
    /// Time limit of one fetch, redirects included, in milliseconds (default 30,000).
    #[serde(default)]
    pub fetch_timeout_ms: Option<u64>,
}

/// Default time limit of a search call.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time limit of a fetch.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The `web` plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebPlugin;

/// What the search endpoint is decided from.
#[derive(Debug, Clone, Copy, Default)]
pub struct SearchInputs<'a> {
    /// `DEEPSEEK_SEARCH_BASE_URL` (blank counts as unset).
    pub env_base: Option<&'a str>,
    /// The row's `search_base_url`.
    pub config_base: Option<&'a str>,
    /// The model endpoint's base URL, when the model is reached over HTTP.
    pub model_base: Option<&'a str>,
    /// The value of `DEEPSEEK_API_KEY` (blank counts as unset).
    pub key: Option<&'a str>,
}

/// Where `web_search` goes and with which key, or why it cannot run.
pub fn resolve_search(
    inputs: SearchInputs<'_>,
    timeout: Duration,
) -> Result<SearchEndpoint, SearchUnavailable> {
    let blank = |s: &&str| !s.trim().is_empty();
    let user = inputs
        .env_base
        .filter(blank)
        .map(|u| (u, SEARCH_BASE_URL_ENV))
        .or_else(|| {
            inputs
                .config_base
                .filter(blank)
                .map(|u| (u, "search_base_url"))
        });
    let base = match (user, inputs.model_base) {
        (Some((url, from)), _) => {
            if origin(url).is_none() {
                return Err(SearchUnavailable::BadBase {
                    from,
                    url: url.to_owned(),
                });
            }
            url.trim().trim_end_matches('/').to_owned()
        }
        (None, Some(model)) => match origin(model) {
            Some(o)
                if reqwest::Url::parse(&o)
                    .ok()
                    .and_then(|u| u.host_str().map(is_deepseek_host))
                    .unwrap_or(false) =>
            {
                o
            }
            _ => {
                return Err(SearchUnavailable::NotDeepSeek {
                    model: model.to_owned(),
                });
            }
        },
        (None, None) => return Err(SearchUnavailable::NoModelEndpoint),
    };
    let Some(key) = inputs.key.filter(blank) else {
        return Err(SearchUnavailable::NoKey);
    };
    Ok(SearchEndpoint::new(
        base,
        key.to_owned(),
        user.is_some(),
        timeout,
    ))
}

/// The model endpoint's base URL; `None` for a scripted or in-process model.
pub fn model_base_url(ctx: &InstallContext) -> Option<String> {
    ctx.model_launch.as_ref()?.base_url.clone()
}

impl Plugin for WebPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "web_search through DeepSeek's API (offered with a DeepSeek endpoint and key) and web_fetch of public pages as Markdown"
    }

    fn enabled_by_default(&self) -> bool {
        true
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: WebConfig = plugin_config(ID, config)?;
        let model_base = model_base_url(ctx);
        let env_base = std::env::var(SEARCH_BASE_URL_ENV).ok();
        let key = std::env::var(API_KEY_ENV).ok();
        let search_timeout = config
            .search_timeout_ms
            .map_or(SEARCH_TIMEOUT, Duration::from_millis);
        let search = resolve_search(
            SearchInputs {
                env_base: env_base.as_deref(),
                config_base: config.search_base_url.as_deref(),
                model_base: model_base.as_deref(),
                key: key.as_deref(),
            },
            search_timeout,
        );
        ctx.tools.push(Arc::new(SearchTool::new(search)));
        let deepseek_model = model_base
            .as_deref()
            .and_then(|u| reqwest::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(is_deepseek_host))
            .unwrap_or(false);
        let policy = FetchPolicy {
            allow_private: config.allow_private,
            timeout: config
                .fetch_timeout_ms
                .map_or(FETCH_TIMEOUT, Duration::from_millis),
            ..FetchPolicy::default()
        };
        ctx.tools.push(Arc::new(FetchTool::new(
            policy,
            config.fetch.unwrap_or(deepseek_model),
        )));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const T: Duration = Duration::from_secs(1);

    #[test]
    fn the_search_endpoint_and_when_the_key_may_go_there() {
        let deepseek = SearchInputs {
            model_base: Some("https://api.deepseek.com/v1"),
            key: Some("k"),
            ..Default::default()
        };
        let e = resolve_search(deepseek, T).unwrap();
        assert_eq!(e.url(), "https://api.deepseek.com/anthropic/v1/messages");

        // A loopback model endpoint is nobody's search API: not offered, nothing sent.
        let local = SearchInputs {
            model_base: Some("http://127.0.0.1:9/v1"),
            key: Some("k"),
            ..Default::default()
        };
        let why = resolve_search(local, T).unwrap_err().to_string();
        assert!(why.contains("not DeepSeek's"), "{why}");
        assert!(why.contains(SEARCH_BASE_URL_ENV), "{why}");

        // The user's own search base URL gets the key, the variable before the row.
        let user = SearchInputs {
            env_base: Some("http://127.0.0.1:7/"),
            config_base: Some("http://127.0.0.1:8"),
            ..local
        };
        let e = resolve_search(user, T).unwrap();
        assert_eq!(e.url(), "http://127.0.0.1:7/anthropic/v1/messages");

        let no_key = SearchInputs {
            key: Some(" "),
            ..deepseek
        };
        assert!(
            resolve_search(no_key, T)
                .unwrap_err()
                .to_string()
                .contains("DEEPSEEK_API_KEY is not set")
        );
        let none = SearchInputs {
            key: Some("k"),
            ..Default::default()
        };
        assert!(
            resolve_search(none, T)
                .unwrap_err()
                .to_string()
                .contains("not reached over it")
        );
    }
}
