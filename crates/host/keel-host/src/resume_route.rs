//! A session's model route, remembered in its log so a resume talks to the same endpoint.
//!
//! When an agent is built over a session with the configured provider, the factory logs the
//! ignorable event [`ROUTE_EVENT`] `{provider, model, baseUrl?, api?}` whenever it differs from
//! the last one the log holds: the provider and model the agent talks to, the `--base-url` it
//! was given (stripped of user info, query and fragment: no credential is ever logged) and the
//! `--api` wire format when one was given. No key, and no variable naming one, is logged.
//!
//! A resumed session ([`route_flags`]) takes the logged model unless the front end names one,
//! and the logged provider, URL and wire format unless it names a provider or a URL. The key
//! then follows the usual rules ([`crate::endpoint`]): a logged `--base-url` server gets the key
//! of `--api-key-env VAR` or none. A log without the event (an older session, dsh's) resumes
//! with the configuration as before.

use crate::endpoint::DEEPSEEK_PROVIDER;
use crate::error::HostError;
use crate::factory::{Flags, Host, ModelRoute, ModelSource};
use keel_protocol::EventBody;
use keel_session::Session;
use serde_json::{Value, json};

/// The ignorable event naming the model route a session's agent was built with.
pub const ROUTE_EVENT: &str = "model/route";

/// What a [`ROUTE_EVENT`] says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoggedRoute {
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) base_url: Option<String>,
    pub(crate) api: Option<String>,
}

impl LoggedRoute {
    /// The route `route` resolved from `flags` (a `--base-url` and `--api` only when given).
    pub(crate) fn of(flags: &Flags, route: &ModelRoute) -> Self {
        LoggedRoute {
            provider: route.provider_name.clone(),
            model: route.model.clone(),
            base_url: flags.base_url.as_deref().map(strip_url),
            api: flags.api.map(|a| a.name().to_owned()),
        }
    }

    /// The event's data.
    pub(crate) fn to_json(&self) -> Value {
        let mut data = json!({"provider": self.provider, "model": self.model});
        if let Some(url) = &self.base_url {
            data["baseUrl"] = Value::from(url.as_str());
        }
        if let Some(api) = &self.api {
            data["api"] = Value::from(api.as_str());
        }
        data
    }
}

/// The route `session` last logged, if any (a record without string `provider` and `model` is
/// skipped).
pub(crate) fn logged_route(session: &Session) -> Option<LoggedRoute> {
    session
        .whole_event_iter()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == ROUTE_EVENT => {
                let s = |k: &str| {
                    o.data
                        .get(k)
                        .and_then(Value::as_str)
                        .filter(|v| !v.is_empty())
                        .map(str::to_owned)
                };
                Some(LoggedRoute {
                    provider: s("provider")?,
                    model: s("model")?,
                    base_url: s("baseUrl"),
                    api: s("api"),
                })
            }
            _ => None,
        })
        .last()
}

/// `flags` with what `session` logged filled in where the front end named nothing: the model,
/// and the endpoint (provider, URL, wire format) unless a provider or URL was named. `None`
/// when the log names no route or nothing changes. A logged provider the configuration no
/// longer has is left out (the configured one is used).
pub(crate) fn route_flags(host: &Host, flags: &Flags, session: &Session) -> Option<Flags> {
    let logged = logged_route(session)?;
    let mut out = flags.clone();
    let mut changed = false;
    if out.model.is_none() {
        out.model = Some(logged.model);
        changed = true;
    }
    let known = logged.provider == DEEPSEEK_PROVIDER
        || host
            .config()
            .config
            .providers
            .contains_key(&logged.provider);
    if out.provider.is_none() && out.base_url.is_none() && known {
        out.provider = Some(logged.provider);
        out.base_url = logged.base_url;
        if out.api.is_none() {
            out.api = logged.api.and_then(|a| a.parse().ok());
        }
        changed = true;
    }
    changed.then_some(out)
}

/// The route an agent over `session` gets when it is not `current` (built from `flags`, `None`
/// for a script's route), and the [`ROUTE_EVENT`] data to log when the log does not already
/// say so.
pub(crate) fn resolve(
    host: &Host,
    flags: Option<&Flags>,
    current: &ModelRoute,
    session: &Session,
) -> Result<(Option<ModelRoute>, Option<Value>), HostError> {
    let Some(flags) = flags else {
        return Ok((None, None));
    };
    let logged = logged_route(session);
    let now = LoggedRoute::of(flags, current);
    if logged.as_ref() == Some(&now) {
        return Ok((None, None));
    }
    let Some(restored) = route_flags(host, flags, session) else {
        return Ok((None, Some(now.to_json())));
    };
    let route = host.route(&restored, ModelSource::Configured)?;
    let now = LoggedRoute::of(&restored, &route);
    let event = (logged.as_ref() != Some(&now)).then(|| now.to_json());
    Ok((Some(route), event))
}

/// `flags` with the route `session` logged filled in where they name none (see the module
/// docs): what a front end resuming `session` builds its factory from, so that a logged
/// `--base-url` run does not need the configured endpoint's key.
pub fn resume_flags(host: &Host, flags: Flags, session: &Session) -> Flags {
    route_flags(host, &flags, session).unwrap_or(flags)
}

/// `url` without user info, query and fragment: what a log may hold of an endpoint.
pub fn strip_url(url: &str) -> String {
    let url = url.trim();
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let url = &url[..end];
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    format!("{scheme}{host}{path}")
}

#[cfg(test)]
mod tests {
    use super::strip_url;

    #[test]
    fn strip_url_drops_credentials() {
        assert_eq!(
            strip_url("https://user:secret@example.com:8080/v1?key=abc#x"),
            "https://example.com:8080/v1"
        );
        assert_eq!(strip_url("http://127.0.0.1:9/v1"), "http://127.0.0.1:9/v1");
        assert_eq!(strip_url("http://a@b/c@d"), "http://b/c@d");
    }
}
