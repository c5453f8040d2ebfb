//! Where a run's model calls go and which credential goes with them.
//!
//! A key is bound to the endpoint it was configured for, so that no key reaches a server it was
//! not meant for:
//!
//! - `--base-url URL` names a server of its own: requests go to URL with the key of
//!   `--api-key-env VAR`, or with no key at all (no `Authorization` header). No table's
//!   `api_key_env`, `DEEPSEEK_API_KEY` included, follows a `--base-url`.
//! - Otherwise the provider's `[providers.NAME]` table names the server (the provider is
//!   `--provider`, else `provider`, else `deepseek`). For `deepseek`, `DEEPSEEK_BASE_URL`
//!   replaces the built-in `base_url` (a configuration layer that sets one wins). The key is `--api-key-env VAR`, else the table's
//!   `api_key_env` — but only when that was set by the same configuration layer as the table's
//!   `base_url` or a later one: a layer that moves a provider to another URL must name its key
//!   again, or none is sent. A table without `api_key_env` sends no key.
//!
//! [`resolve`] applies these rules to a loaded configuration; it reads nothing itself (the caller
//! passes `DEEPSEEK_BASE_URL`), so `keel config dump` and the factory agree by construction.

use crate::config::Loaded;
use crate::error::HostError;

/// The variable naming the DeepSeek endpoint's URL.
pub const DEEPSEEK_BASE_URL_ENV: &str = keel_llm::BASE_URL_ENV;

/// Name of the built-in defaults layer.
const DEFAULTS_LAYER: &str = "defaults";

/// The provider whose URL `DEEPSEEK_BASE_URL` may override.
pub const DEEPSEEK_PROVIDER: &str = "deepseek";

/// What decides a run's endpoint, as a front end says it (`--provider`, `--base-url`,
/// `--api-key-env`) plus the `DEEPSEEK_BASE_URL` of its environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct EndpointInputs<'a> {
    /// `--provider NAME`.
    pub provider: Option<&'a str>,
    /// `--base-url URL`.
    pub base_url: Option<&'a str>,
    /// `--api-key-env VAR`.
    pub api_key_env: Option<&'a str>,
    /// The value of `DEEPSEEK_BASE_URL` (blank counts as unset).
    pub deepseek_base_url: Option<&'a str>,
}

/// The resolved endpoint of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Provider name (a `[providers.NAME]` key, or `deepseek`).
    pub provider: String,
    /// Base URL requests go to (`/chat/completions` is appended).
    pub base_url: String,
    /// Who chose `base_url`: `--base-url`, `DEEPSEEK_BASE_URL`, or the configuration layer.
    pub base_url_origin: String,
    /// The environment variable whose key is sent, if any.
    pub key: Option<KeySource>,
}

/// Where the key sent to an endpoint comes from (the variable's name, never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySource {
    /// The environment variable.
    pub var: String,
    /// Who named it: `--api-key-env` or the configuration layer that set `api_key_env`.
    pub origin: String,
}

/// Apply the rules of this module to `loaded`.
///
/// Fails with [`HostError::UnknownProvider`] when the provider has no table (other than
/// `deepseek`, which always exists).
pub fn resolve(loaded: &Loaded, inputs: EndpointInputs<'_>) -> Result<Endpoint, HostError> {
    let c = &loaded.config;
    let provider = inputs
        .provider
        .map(str::to_owned)
        .or_else(|| c.provider.clone())
        .unwrap_or_else(|| DEEPSEEK_PROVIDER.to_owned());
    let section = match c.providers.get(&provider) {
        Some(s) => s.clone(),
        None if provider == DEEPSEEK_PROVIDER => Default::default(),
        None => return Err(HostError::UnknownProvider { name: provider }),
    };
    let flag_key = inputs.api_key_env.map(|var| KeySource {
        var: var.to_owned(),
        origin: "--api-key-env".to_owned(),
    });
    if let Some(url) = inputs.base_url {
        return Ok(Endpoint {
            provider,
            base_url: url.to_owned(),
            base_url_origin: "--base-url".to_owned(),
            key: flag_key,
        });
    }
    let key_path = format!("providers.{provider}.api_key_env");
    let url_path = format!("providers.{provider}.base_url");
    let table_key = section.api_key_env.as_ref().and_then(|var| {
        let key_layer = loaded.origin.get(&key_path)?;
        // The key follows the table's URL only when it was named no earlier than the URL.
        let bound = match loaded.origin.get(&url_path) {
            None => true,
            Some(url_layer) => loaded.layer_index(key_layer) >= loaded.layer_index(url_layer),
        };
        bound.then(|| KeySource {
            var: var.clone(),
            origin: key_layer.clone(),
        })
    });
    let url_origin = loaded.origin.get(&url_path);
    // DEEPSEEK_BASE_URL stands in for the built-in URL: a configuration layer that sets
    // `providers.deepseek.base_url` wins over it.
    let deepseek_env = inputs.deepseek_base_url.filter(|u| {
        !u.trim().is_empty()
            && provider == DEEPSEEK_PROVIDER
            && url_origin.is_none_or(|o| o == DEFAULTS_LAYER)
    });
    let (base_url, base_url_origin) = match (deepseek_env, &section.base_url) {
        (Some(url), _) => (url.to_owned(), DEEPSEEK_BASE_URL_ENV.to_owned()),
        (None, Some(url)) => (
            url.clone(),
            url_origin
                .cloned()
                .unwrap_or_else(|| DEFAULTS_LAYER.to_owned()),
        ),
        (None, None) => (
            keel_llm::DEFAULT_BASE_URL.to_owned(),
            "built-in default".to_owned(),
        ),
    };
    Ok(Endpoint {
        provider,
        base_url,
        base_url_origin,
        key: flag_key.or(table_key),
    })
}

impl Endpoint {
    /// `endpoint.*` lines for `keel config dump`: the provider, the URL and the variable whose
    /// key is sent there (its name and whether it is set, never its value).
    pub fn dump(&self, is_set: impl Fn(&str) -> bool) -> String {
        let mut out = format!(
            "endpoint.provider = {:?}\nendpoint.base_url = {:?}  # {}\n",
            self.provider, self.base_url, self.base_url_origin
        );
        match &self.key {
            Some(k) => out.push_str(&format!(
                "endpoint.api_key_env = {:?}  # {}; {}\n",
                k.var,
                k.origin,
                if is_set(&k.var) {
                    "set: its value is sent as the bearer token"
                } else {
                    "NOT SET: runs fail until it is"
                }
            )),
            None => out.push_str(
                "endpoint.api_key_env = none  # no key: no Authorization header is sent \
                 (--api-key-env VAR to send one)\n",
            ),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Layer, merge_layers};
    use pretty_assertions::assert_eq;

    fn loaded(layers: &[(&str, &str)]) -> Loaded {
        let mut all = vec![Layer {
            name: "defaults".into(),
            table: toml::from_str(crate::config::DEFAULTS).unwrap(),
        }];
        for (name, text) in layers {
            all.push(Layer {
                name: (*name).into(),
                table: toml::from_str(text).unwrap(),
            });
        }
        merge_layers(&all).unwrap()
    }

    fn key(var: &str, origin: &str) -> Option<KeySource> {
        Some(KeySource {
            var: var.into(),
            origin: origin.into(),
        })
    }

    #[test]
    fn deepseek_key_goes_to_deepseek_only() {
        let l = loaded(&[]);
        let e = resolve(&l, EndpointInputs::default()).unwrap();
        assert_eq!(e.base_url, keel_llm::DEFAULT_BASE_URL);
        assert_eq!(e.key, key("DEEPSEEK_API_KEY", "defaults"));

        let inputs = EndpointInputs {
            deepseek_base_url: Some("http://proxy.example/v1"),
            ..EndpointInputs::default()
        };
        let e = resolve(&l, inputs).unwrap();
        assert_eq!(
            (e.base_url.as_str(), e.base_url_origin.as_str()),
            ("http://proxy.example/v1", "DEEPSEEK_BASE_URL")
        );
        assert_eq!(e.key, key("DEEPSEEK_API_KEY", "defaults"));

        let inputs = EndpointInputs {
            base_url: Some("http://127.0.0.1:9"),
            deepseek_base_url: Some("http://proxy.example/v1"),
            ..EndpointInputs::default()
        };
        let e = resolve(&l, inputs).unwrap();
        assert_eq!(e.base_url, "http://127.0.0.1:9");
        assert_eq!(e.key, None);

        let inputs = EndpointInputs {
            base_url: Some("http://127.0.0.1:9"),
            api_key_env: Some("MY_KEY"),
            ..EndpointInputs::default()
        };
        assert_eq!(
            resolve(&l, inputs).unwrap().key,
            key("MY_KEY", "--api-key-env")
        );
    }

    #[test]
    fn a_layer_that_moves_a_url_must_name_the_key_again() {
        let moved = loaded(&[(
            "proj",
            "[providers.deepseek]\nbase_url = \"http://elsewhere\"\n",
        )]);
        let e = resolve(&moved, EndpointInputs::default()).unwrap();
        assert_eq!((e.base_url.as_str(), e.key), ("http://elsewhere", None));

        let e = resolve(
            &moved,
            EndpointInputs {
                deepseek_base_url: Some("http://from-env"),
                ..EndpointInputs::default()
            },
        )
        .unwrap();
        assert_eq!(
            e.base_url, "http://elsewhere",
            "configuration wins over the variable"
        );

        let renamed = loaded(&[(
            "home",
            "[providers.deepseek]\nbase_url = \"http://elsewhere\"\napi_key_env = \"DEEPSEEK_API_KEY\"\n",
        )]);
        let e = resolve(&renamed, EndpointInputs::default()).unwrap();
        assert_eq!(e.key, key("DEEPSEEK_API_KEY", "home"));

        let local = loaded(&[
            (
                "home",
                "provider = \"local\"\n[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\n",
            ),
            ("-c", "[providers.local]\napi_key_env = \"LOCAL_KEY\"\n"),
        ]);
        let e = resolve(&local, EndpointInputs::default()).unwrap();
        assert_eq!(e.provider, "local");
        assert_eq!(e.key, key("LOCAL_KEY", "-c"));
        let e = resolve(
            &loaded(&[(
                "home",
                "[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\n",
            )]),
            EndpointInputs {
                provider: Some("local"),
                deepseek_base_url: Some("http://ignored"),
                ..EndpointInputs::default()
            },
        )
        .unwrap();
        assert_eq!(
            (e.base_url.as_str(), e.key),
            ("http://127.0.0.1:8080/v1", None)
        );
        let err = resolve(
            &local,
            EndpointInputs {
                provider: Some("nope"),
                ..EndpointInputs::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("[providers.nope]"), "{err}");
    }

    #[test]
    fn dump_names_the_variable_never_the_value() {
        let e = resolve(&loaded(&[]), EndpointInputs::default()).unwrap();
        assert_eq!(
            e.dump(|_| true),
            "endpoint.provider = \"deepseek\"\nendpoint.base_url = \"https://api.deepseek.com\"  # defaults\nendpoint.api_key_env = \"DEEPSEEK_API_KEY\"  # defaults; set: its value is sent as the bearer token\n"
        );
        let e = resolve(
            &loaded(&[]),
            EndpointInputs {
                base_url: Some("http://127.0.0.1:9"),
                ..EndpointInputs::default()
            },
        )
        .unwrap();
        assert!(
            e.dump(|_| false)
                .contains("endpoint.api_key_env = none  # no key: no Authorization header"),
            "{}",
            e.dump(|_| false)
        );
    }
}
