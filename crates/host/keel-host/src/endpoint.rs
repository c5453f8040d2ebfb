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
//! - A key stored by `keel login PROVIDER` (`$KEEL_HOME/credentials.toml`, [`crate::credentials`])
//!   stands in when the table's variable is unset or blank (the environment wins), or when the
//!   table names none that follows its URL — but only when that URL is the built-in one,
//!   `DEEPSEEK_BASE_URL`'s, or set by one of the user's own layers: a URL the project's
//!   `.keel/config.toml` sets never gets a stored key, and neither does `--base-url`, nor a
//!   run whose `--api-key-env` names the variable.
//!
//! [`resolve`] applies these rules to a loaded configuration; it reads nothing itself (the caller
//! passes `DEEPSEEK_BASE_URL`), so `keel config dump` and the factory agree by construction.

use crate::config::Loaded;
use crate::credentials::{CREDENTIALS_FILE, Credentials};
use crate::error::HostError;
use keel_llm::ApiKey;
use std::path::Path;

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
    /// `--api WIRE`: the wire format, replacing the provider table's `api`.
    pub api: Option<keel_llm::WireApi>,
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
    /// Where the key sent comes from (none: no `Authorization` header).
    pub key: Option<KeySource>,
    /// The wire format: the provider table's `api` (chat completions when unset), with
    /// `--base-url` too.
    pub api: keel_llm::WireApi,
}

/// Where the key sent to an endpoint comes from (the variable's name, the provider whose stored
/// key stands in; never a value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySource {
    /// The environment variable whose value is sent when it is set and not blank.
    pub var: Option<String>,
    /// Who named it: `--api-key-env` or the configuration layer that set `api_key_env`.
    pub origin: String,
    /// The provider whose key in `$KEEL_HOME/credentials.toml` is sent when `var` is unset,
    /// blank or none (`None`: the stored keys are not consulted).
    pub stored: Option<String>,
}

/// Where the key of a [`KeySource`] actually comes from, now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyFrom {
    /// The environment variable (set, not blank).
    Env(String),
    /// The provider's key in `$KEEL_HOME/credentials.toml`.
    Stored(String),
    /// Nowhere: the variable is unset and nothing is stored.
    Missing,
}

impl KeySource {
    /// Where the key comes from given which variables are set (not blank) and whether a key
    /// is stored for a provider.
    pub fn comes_from(
        &self,
        is_set: impl Fn(&str) -> bool,
        has_stored: impl Fn(&str) -> bool,
    ) -> KeyFrom {
        match (&self.var, &self.stored) {
            (Some(var), _) if is_set(var) => KeyFrom::Env(var.clone()),
            (_, Some(p)) if has_stored(p) => KeyFrom::Stored(p.clone()),
            _ => KeyFrom::Missing,
        }
    }

    /// The key to send to `base_url`: the variable's value, else the stored key (the store
    /// under `home` is read only then); `None` when neither applies and no variable is named
    /// (no key is sent). `base_url` only names the server in the error.
    pub fn load(&self, home: &Path, base_url: &str) -> Result<Option<ApiKey>, HostError> {
        let var_set =
            |v: &str| std::env::var_os(v).is_some_and(|x| !x.to_string_lossy().trim().is_empty());
        if let Some(var) = self.var.as_deref().filter(|v| var_set(v)) {
            return Ok(Some(ApiKey::from_env(var)?));
        }
        if let Some(provider) = &self.stored
            && let Some(key) = Credentials::load(home)?.get(provider).cloned()
        {
            return Ok(Some(key));
        }
        match (&self.var, &self.stored) {
            (Some(var), Some(provider)) => Err(HostError::MissingKey {
                var: var.clone(),
                provider: provider.clone(),
                base_url: base_url.to_owned(),
            }),
            (Some(var), None) => Ok(Some(ApiKey::from_env(var)?)),
            (None, _) => Ok(None),
        }
    }
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
        var: Some(var.to_owned()),
        origin: "--api-key-env".to_owned(),
        stored: None,
    });
    if let Some(url) = inputs.base_url {
        return Ok(Endpoint {
            provider,
            base_url: url.to_owned(),
            base_url_origin: "--base-url".to_owned(),
            key: flag_key,
            api: inputs.api.or(section.api).unwrap_or_default(),
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
            var: Some(var.clone()),
            origin: key_layer.clone(),
            stored: None,
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
    // A stored key follows no URL the project chose.
    let stored = (loaded.project_layer.is_none() || url_origin != loaded.project_layer.as_ref())
        .then(|| provider.clone());
    let key = match (flag_key, table_key, stored) {
        (Some(k), ..) => Some(k),
        (None, Some(k), stored) => Some(KeySource { stored, ..k }),
        (None, None, Some(p)) => Some(KeySource {
            var: None,
            origin: CREDENTIALS_FILE.to_owned(),
            stored: Some(p),
        }),
        (None, None, None) => None,
    };
    Ok(Endpoint {
        provider,
        base_url,
        base_url_origin,
        key,
        api: inputs.api.or(section.api).unwrap_or_default(),
    })
}

impl Endpoint {
    /// `endpoint.*` lines for `keel config dump`: the provider, the URL, the variable named for
    /// its key and where the key sent there comes from (`is_set`: whether a variable is set and
    /// not blank; `store`: the stored keys, [`Credentials::load`]) — never a key.
    pub fn dump(
        &self,
        is_set: impl Fn(&str) -> bool,
        store: &Result<Credentials, crate::CredentialsError>,
    ) -> String {
        let mut out = format!(
            "endpoint.provider = {:?}\nendpoint.base_url = {:?}  # {}\n",
            self.provider, self.base_url, self.base_url_origin
        );
        if self.api != keel_llm::WireApi::Chat {
            out.push_str(&format!(
                "endpoint.api = {:?}  # requests go to {}\n",
                self.api.name(),
                self.api.endpoint(&self.base_url)
            ));
        }
        let Some(k) = &self.key else {
            out.push_str(
                "endpoint.api_key_env = none  # no key: no Authorization header is sent \
                 (--api-key-env VAR to send one)\n",
            );
            return out;
        };
        let stored = |p: &str| store.as_ref().is_ok_and(|s| s.get(p).is_some());
        let from = k.comes_from(&is_set, stored);
        match &k.var {
            Some(var) => out.push_str(&format!(
                "endpoint.api_key_env = {var:?}  # {}; {}\n",
                k.origin,
                match from {
                    KeyFrom::Env(_) => "set: its value is sent as the bearer token",
                    KeyFrom::Stored(_) => "not set: the stored key is sent instead",
                    KeyFrom::Missing => "NOT SET: runs fail until it is",
                }
            )),
            None => {
                out.push_str("endpoint.api_key_env = none  # the provider's table names none\n")
            }
        }
        match (&from, &k.stored) {
            (KeyFrom::Env(var), _) => {
                out.push_str(&format!("endpoint.api_key = env {var}  # the environment wins\n"))
            }
            (KeyFrom::Stored(p), _) => out.push_str(&format!(
                "endpoint.api_key = {CREDENTIALS_FILE} [providers.{p}]  # {}; sent as the bearer token\n",
                store.as_ref().map_or_else(|_| Default::default(), |s| s.path().display().to_string())
            )),
            (KeyFrom::Missing, Some(p)) => out.push_str(&format!(
                "endpoint.api_key = none  # no key stored for {p} (`keel login {p}` stores one){}\n",
                if k.var.is_none() { ": no Authorization header is sent" } else { "" }
            )),
            (KeyFrom::Missing, None) => {}
        }
        if let (Some(_), Err(e)) = (&k.stored, store) {
            out.push_str(&format!("# credentials: {e}\n"));
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
            var: Some(var.into()),
            origin: origin.into(),
            stored: None,
        })
    }

    /// `var`'s key, else the one stored for `provider`.
    fn or_stored(var: &str, origin: &str, provider: &str) -> Option<KeySource> {
        Some(KeySource {
            stored: Some(provider.into()),
            ..key(var, origin)?
        })
    }

    /// Only the key stored for `provider`.
    fn stored(provider: &str) -> Option<KeySource> {
        Some(KeySource {
            var: None,
            origin: "credentials.toml".into(),
            stored: Some(provider.into()),
        })
    }

    #[test]
    fn deepseek_key_goes_to_deepseek_only() {
        let l = loaded(&[]);
        let e = resolve(&l, EndpointInputs::default()).unwrap();
        assert_eq!(e.base_url, keel_llm::DEFAULT_BASE_URL);
        assert_eq!(e.key, or_stored("DEEPSEEK_API_KEY", "defaults", "deepseek"));

        let inputs = EndpointInputs {
            deepseek_base_url: Some("http://proxy.example/v1"),
            ..EndpointInputs::default()
        };
        let e = resolve(&l, inputs).unwrap();
        assert_eq!(
            (e.base_url.as_str(), e.base_url_origin.as_str()),
            ("http://proxy.example/v1", "DEEPSEEK_BASE_URL")
        );
        assert_eq!(e.key, or_stored("DEEPSEEK_API_KEY", "defaults", "deepseek"));

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
        assert_eq!(
            (e.base_url.as_str(), e.key),
            ("http://elsewhere", stored("deepseek")),
            "the env key does not follow; the stored one follows a user layer's URL"
        );

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
        assert_eq!(e.key, or_stored("DEEPSEEK_API_KEY", "home", "deepseek"));

        let local = loaded(&[
            (
                "home",
                "provider = \"local\"\n[providers.local]\nbase_url = \"http://127.0.0.1:8080/v1\"\n",
            ),
            ("-c", "[providers.local]\napi_key_env = \"LOCAL_KEY\"\n"),
        ]);
        let e = resolve(&local, EndpointInputs::default()).unwrap();
        assert_eq!(e.provider, "local");
        assert_eq!(e.key, or_stored("LOCAL_KEY", "-c", "local"));
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
            ("http://127.0.0.1:8080/v1", stored("local"))
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
    fn a_stored_key_never_follows_a_url_the_project_set() {
        let project = "/work/.keel/config.toml";
        let mut l = loaded(&[(
            project,
            "[providers.deepseek]\nbase_url = \"http://evil\"\napi_key_env = \"DEEPSEEK_API_KEY\"\n",
        )]);
        l.project_layer = Some(project.into());
        let e = resolve(&l, EndpointInputs::default()).unwrap();
        assert_eq!(e.key, key("DEEPSEEK_API_KEY", project));
        let mut l = loaded(&[(
            project,
            "[providers.deepseek]\nbase_url = \"http://evil\"\n",
        )]);
        l.project_layer = Some(project.into());
        assert_eq!(resolve(&l, EndpointInputs::default()).unwrap().key, None);

        // The project naming only a variable keeps the user's URL, and the stored key with it.
        let mut l = loaded(&[(
            project,
            "[providers.deepseek]\napi_key_env = \"PROJ_KEY\"\n",
        )]);
        l.project_layer = Some(project.into());
        let e = resolve(&l, EndpointInputs::default()).unwrap();
        assert_eq!(e.key, or_stored("PROJ_KEY", project, "deepseek"));
    }

    #[test]
    fn key_from_prefers_the_environment() {
        let k = or_stored("V", "defaults", "deepseek").unwrap();
        assert_eq!(k.comes_from(|_| true, |_| true), KeyFrom::Env("V".into()));
        assert_eq!(
            k.comes_from(|_| false, |_| true),
            KeyFrom::Stored("deepseek".into())
        );
        assert_eq!(k.comes_from(|_| false, |_| false), KeyFrom::Missing);
    }

    #[test]
    fn the_built_in_providers_speak_their_wires_and_a_base_url_keeps_it() {
        let l = loaded(&[]);
        let on = |provider: &str, base_url: Option<&str>| {
            resolve(
                &l,
                EndpointInputs {
                    provider: Some(provider),
                    base_url,
                    ..EndpointInputs::default()
                },
            )
            .unwrap()
        };
        let e = on("anthropic", None);
        assert_eq!(e.api, keel_llm::WireApi::Messages);
        let var = e.key.as_ref().and_then(|k| k.var.as_deref());
        assert_eq!(var, Some("ANTHROPIC_API_KEY"));
        let e = on("deepseek-messages", None);
        assert_eq!(
            (e.api, e.base_url.as_str()),
            (
                keel_llm::WireApi::Messages,
                "https://api.deepseek.com/anthropic"
            )
        );
        assert_eq!(on("openai", None).api, keel_llm::WireApi::Responses);
        assert_eq!(on("deepseek", None).api, keel_llm::WireApi::Chat);
        // `--base-url` names another server, with the provider's wire and no table key.
        let e = on("anthropic", Some("http://127.0.0.1:9"));
        assert_eq!((e.api, &e.key), (keel_llm::WireApi::Messages, &None));
        let home = tempfile::tempdir().unwrap();
        let dump = e.dump(|_| true, &Credentials::load(home.path()));
        assert!(
            dump.contains(
                "endpoint.api = \"messages\"  # requests go to http://127.0.0.1:9/v1/messages"
            ),
            "{dump}"
        );
        // A table with an unknown wire is a configuration error naming the value.
        let err = crate::config::merge_layers(&[Layer {
            name: "user".into(),
            table: toml::from_str("[providers.x]\napi = \"grpc\"").unwrap(),
        }])
        .unwrap_err();
        assert!(err.to_string().contains("grpc"), "{err}");
    }

    #[test]
    fn dump_names_the_variable_never_the_value() {
        let e = resolve(&loaded(&[]), EndpointInputs::default()).unwrap();
        let home = tempfile::tempdir().unwrap();
        let empty = Credentials::load(home.path());
        assert_eq!(
            e.dump(|_| true, &empty),
            "endpoint.provider = \"deepseek\"\nendpoint.base_url = \"https://api.deepseek.com\"  # defaults\nendpoint.api_key_env = \"DEEPSEEK_API_KEY\"  # defaults; set: its value is sent as the bearer token\nendpoint.api_key = env DEEPSEEK_API_KEY  # the environment wins\n"
        );
        assert!(
            e.dump(|_| false, &empty)
                .contains("NOT SET: runs fail until it is\nendpoint.api_key = none  # no key stored for deepseek (`keel login deepseek` stores one)\n"),
            "{}",
            e.dump(|_| false, &empty)
        );
        let mut store = Credentials::load(home.path()).unwrap();
        store.set("deepseek", keel_llm::ApiKey::new("sk-secret", "t").unwrap());
        store.save().unwrap();
        let full = Credentials::load(home.path());
        let out = e.dump(|_| false, &full);
        assert!(
            out.contains(&format!(
                "not set: the stored key is sent instead\nendpoint.api_key = credentials.toml [providers.deepseek]  # {}",
                home.path().join("credentials.toml").display()
            )),
            "{out}"
        );
        assert!(!out.contains("sk-secret"), "{out}");
        let e = resolve(
            &loaded(&[]),
            EndpointInputs {
                base_url: Some("http://127.0.0.1:9"),
                ..EndpointInputs::default()
            },
        )
        .unwrap();
        assert!(
            e.dump(|_| false, &empty)
                .contains("endpoint.api_key_env = none  # no key: no Authorization header"),
            "{}",
            e.dump(|_| false, &empty)
        );
    }
}
