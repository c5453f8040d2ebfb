//! Model catalogue: what keel knows about each model (context window, default output budget,
//! which reasoning parameters it accepts, whether it takes images).
//!
//! The catalogue starts from DeepSeek's current models. A model it does not know still works: it
//! gets conservative defaults and no reasoning parameters. Configuration and one-run flags
//! (`--context-window N`, `--max-output N`) layer [`ModelOverride`]s on top.

use std::collections::BTreeMap;

/// Default model when none is configured.
pub const DEFAULT_MODEL: &str = "deepseek-v4-flash";

/// Default DeepSeek API base URL (keel appends `/chat/completions`).
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";

/// What keel knows about one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelInfo {
    /// Context window in tokens (prompt + output).
    pub context_window: u64,
    /// Output token budget sent as `max_tokens` when the request does not set one; requests are
    /// also clamped to it.
    pub max_output: u64,
    /// The model accepts `thinking: {type: enabled|disabled}` and streams `reasoning_content`.
    pub reasoning: bool,
    /// The model accepts `reasoning_effort`.
    pub effort: bool,
    /// The model reads images (`image_url` content parts). None of DeepSeek's current models
    /// does; `[models.NAME] vision = true` declares one that does.
    pub vision: bool,
    /// `budget_tokens` sent with `thinking: {type: "enabled"}` on the Messages API: Anthropic's
    /// models need one (`[models.NAME] thinking_budget`), DeepSeek's take none.
    pub thinking_budget: Option<u64>,
}

impl ModelInfo {
    /// Defaults for a model the catalogue does not know: 128K window, 8K output, no reasoning
    /// parameters.
    pub const UNKNOWN: ModelInfo = ModelInfo {
        context_window: 128_000,
        max_output: 8_000,
        reasoning: false,
        effort: false,
        vision: false,
        thinking_budget: None,
    };
}

/// A partial change to a model's [`ModelInfo`], from configuration or from one run's flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelOverride {
    /// Replaces the context window when set.
    pub context_window: Option<u64>,
    /// Replaces the default/maximum output when set.
    pub max_output: Option<u64>,
    /// Replaces whether the model reads images when set.
    pub vision: Option<bool>,
    /// Replaces whether the model takes `thinking` when set.
    pub reasoning: Option<bool>,
    /// Sets the Messages API's thinking `budget_tokens` (0 clears it).
    pub thinking_budget: Option<u64>,
}

/// Model name → [`ModelInfo`], with DeepSeek's models as defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCatalogue {
    models: BTreeMap<String, ModelInfo>,
    fallback: ModelInfo,
}

impl Default for ModelCatalogue {
    /// DeepSeek's current models: `deepseek-v4-flash` and `deepseek-v4-pro` (1M window, 256K
    /// output, thinking + effort), `deepseek-chat` (128K, 8K, no reasoning), `deepseek-reasoner`
    /// (128K, 64K, thinking).
    fn default() -> Self {
        let v4 = ModelInfo {
            context_window: 1_000_000,
            max_output: 256_000,
            reasoning: true,
            effort: true,
            vision: false,
            thinking_budget: None,
        };
        let mut models = BTreeMap::new();
        models.insert("deepseek-v4-flash".to_owned(), v4);
        models.insert("deepseek-v4-pro".to_owned(), v4);
        models.insert(
            "deepseek-chat".to_owned(),
            ModelInfo {
                context_window: 128_000,
                max_output: 8_000,
                reasoning: false,
                effort: false,
                vision: false,
                thinking_budget: None,
            },
        );
        models.insert(
            "deepseek-reasoner".to_owned(),
            ModelInfo {
                context_window: 128_000,
                max_output: 64_000,
                reasoning: true,
                effort: false,
                vision: false,
                thinking_budget: None,
            },
        );
        ModelCatalogue {
            models,
            fallback: ModelInfo::UNKNOWN,
        }
    }
}

impl ModelCatalogue {
    /// An empty catalogue: every model gets [`ModelInfo::UNKNOWN`].
    pub fn empty() -> Self {
        ModelCatalogue {
            models: BTreeMap::new(),
            fallback: ModelInfo::UNKNOWN,
        }
    }

    /// What keel knows about `model`; unknown models get the fallback defaults.
    pub fn lookup(&self, model: &str) -> ModelInfo {
        self.models.get(model).copied().unwrap_or(self.fallback)
    }

    /// True when `model` is in the catalogue (rather than served by the fallback).
    pub fn knows(&self, model: &str) -> bool {
        self.models.contains_key(model)
    }

    /// The models it knows, by name (sorted).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// Adds or replaces a model (e.g. one declared in `[providers.<name>] models`).
    pub fn insert(&mut self, model: impl Into<String>, info: ModelInfo) {
        self.models.insert(model.into(), info);
    }

    /// Applies an override to `model` (starting from the fallback when it is unknown). Values of
    /// zero are ignored: a zero window or output budget is never meaningful.
    pub fn with_override(mut self, model: &str, change: ModelOverride) -> Self {
        self.apply_override(model, change);
        self
    }

    /// In-place form of [`ModelCatalogue::with_override`].
    pub fn apply_override(&mut self, model: &str, change: ModelOverride) {
        let mut info = self.lookup(model);
        if let Some(window) = change.context_window.filter(|v| *v > 0) {
            info.context_window = window;
        }
        if let Some(out) = change.max_output.filter(|v| *v > 0) {
            info.max_output = out;
        }
        if let Some(vision) = change.vision {
            info.vision = vision;
        }
        if let Some(reasoning) = change.reasoning {
            info.reasoning = reasoning;
        }
        if let Some(budget) = change.thinking_budget {
            info.thinking_budget = (budget > 0).then_some(budget);
        }
        self.models.insert(model.to_owned(), info);
    }
}

/// What a model's tokens cost, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Input tokens that missed the provider's prompt cache.
    pub input: f64,
    /// Input tokens served from the prompt cache.
    pub cached_input: f64,
    /// Output tokens (reasoning included).
    pub output: f64,
}

impl Price {
    /// The cost in dollars of `input` prompt tokens (`cached` of them from the cache) and
    /// `output` output tokens.
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        let missed = input.saturating_sub(cached) as f64;
        (missed * self.input + cached as f64 * self.cached_input + output as f64 * self.output)
            / 1_000_000.0
    }
}

/// DeepSeek's published list prices for the models whose prices keel knows (deepseek-chat and
/// deepseek-reasoner, as DeepSeek priced them from 2025-09-29). Prices change: the
/// configuration's `[models.NAME]` `input_price`, `cached_input_price` and `output_price`
/// replace these and price any other model.
pub fn builtin_price(model: &str) -> Option<Price> {
    match model {
        "deepseek-chat" | "deepseek-reasoner" => Some(Price {
            input: 0.28,
            cached_input: 0.028,
            output: 0.42,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_charges_cache_hits_at_their_own_rate() {
        let p = builtin_price("deepseek-chat").unwrap();
        // 1M input of which 400K cached, 100K output.
        let cost = p.cost(1_000_000, 400_000, 100_000);
        let want = 0.6 * 0.28 + 0.4 * 0.028 + 0.1 * 0.42;
        assert!((cost - want).abs() < 1e-12, "{cost} vs {want}");
        assert_eq!(builtin_price("some-other-model"), None);
    }
    use pretty_assertions::assert_eq;

    #[test]
    fn defaults_and_unknown_models() {
        let cat = ModelCatalogue::default();
        assert_eq!(cat.lookup(DEFAULT_MODEL).context_window, 1_000_000);
        assert_eq!(cat.lookup("deepseek-v4-pro").max_output, 256_000);
        assert_eq!(cat.lookup("deepseek-chat").reasoning, false);
        assert_eq!(cat.lookup("deepseek-reasoner").max_output, 64_000);
        assert_eq!(cat.lookup("my-local-llama"), ModelInfo::UNKNOWN);
        assert!(!cat.knows("my-local-llama"));
    }

    #[test]
    fn overrides_layer_on_known_and_unknown_models() {
        let cat = ModelCatalogue::default()
            .with_override(
                "deepseek-chat",
                ModelOverride {
                    context_window: Some(64_000),
                    max_output: None,
                    vision: None,
                    ..ModelOverride::default()
                },
            )
            .with_override(
                "local",
                ModelOverride {
                    context_window: None,
                    max_output: Some(2048),
                    vision: Some(true),
                    ..ModelOverride::default()
                },
            )
            .with_override(
                "deepseek-v4-flash",
                ModelOverride {
                    context_window: Some(0),
                    max_output: None,
                    vision: None,
                    ..ModelOverride::default()
                },
            );
        assert_eq!(
            cat.lookup("deepseek-chat"),
            ModelInfo {
                context_window: 64_000,
                max_output: 8_000,
                reasoning: false,
                effort: false,
                vision: false,
                thinking_budget: None,
            }
        );
        assert_eq!(
            cat.lookup("local"),
            ModelInfo {
                max_output: 2048,
                vision: true,
                ..ModelInfo::UNKNOWN
            }
        );
        assert_eq!(cat.lookup("deepseek-v4-flash").context_window, 1_000_000);
    }
}
