//! [`CompactionConfig`]: the knobs of pressure compaction, overflow recovery and the tool-result
//! pruner, deserialisable from a `[[plugins]]` row's `config` table.
//!
//! Every ratio is a fraction of the model's context window ([`keel_llm::ModelInfo`]); every token
//! figure is in *calibrated* tokens (see [`super::meter`]).

use super::CompactionError;
use serde::Deserialize;

/// Settings of the compaction plugin. Unknown keys are refused, so a typo in a config file is an
/// error rather than a silently ignored setting.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompactionConfig {
    /// Compact when the estimated request passes this fraction of the context window
    /// (default 0.8).
    pub threshold: f64,
    /// Keep a recent tail of about this fraction of the context window when summarising
    /// (default 0.16). Overflow recovery keeps only the minimal tail.
    pub keep_tail: f64,
    /// Prune a surface `tool/result` whose estimate exceeds this many tokens (default 4000).
    pub prune_over_tokens: u64,
    /// Bytes kept from the start of a pruned result (default 4096, as dsh).
    pub prune_head_bytes: usize,
    /// Bytes kept from the end of a pruned result (default 1024, as dsh).
    pub prune_tail_bytes: usize,
    /// Output budget of the summary request (default 4096), never more than an eighth of the
    /// context window.
    pub summary_max_tokens: u64,
    /// Run the pruner before summarising (default true).
    pub prune: bool,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            threshold: 0.8,
            keep_tail: 0.16,
            prune_over_tokens: 4000,
            prune_head_bytes: 4096,
            prune_tail_bytes: 1024,
            summary_max_tokens: 4096,
            prune: true,
        }
    }
}

impl CompactionConfig {
    /// Check the ranges: `0 < threshold <= 1`, `0 <= keep_tail < threshold`, a non-zero summary
    /// budget and prune threshold. Returns [`CompactionError::Config`] naming the bad key.
    pub fn validate(&self) -> Result<(), CompactionError> {
        let bad = |key: &'static str, why: String| Err(CompactionError::Config { key, why });
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return bad("threshold", format!("{} is not in (0, 1]", self.threshold));
        }
        if !(self.keep_tail >= 0.0 && self.keep_tail < self.threshold) {
            return bad(
                "keep_tail",
                format!(
                    "{} is not in [0, threshold {})",
                    self.keep_tail, self.threshold
                ),
            );
        }
        if self.summary_max_tokens == 0 {
            return bad("summary_max_tokens", "must be at least 1".into());
        }
        if self.prune_over_tokens == 0 {
            return bad("prune_over_tokens", "must be at least 1".into());
        }
        Ok(())
    }

    /// The token count at which pressure compaction starts, for a `window`-token model.
    pub fn limit(&self, window: u64) -> u64 {
        fraction(window, self.threshold.clamp(0.0, 1.0))
    }

    /// The tail kept by pressure and manual compaction, in tokens.
    pub fn tail_budget(&self, window: u64) -> u64 {
        fraction(window, self.keep_tail.clamp(0.0, 1.0))
    }

    /// The summary request's output budget for a `window`-token model.
    pub fn summary_budget(&self, window: u64) -> u64 {
        self.summary_max_tokens.min(window / 8).max(1)
    }
}

fn fraction(window: u64, f: f64) -> u64 {
    (window as f64 * f) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deserialises_with_defaults_and_refuses_unknown_keys() {
        let c: CompactionConfig = serde_json::from_str(r#"{"threshold": 0.7}"#).unwrap();
        assert_eq!(
            c,
            CompactionConfig {
                threshold: 0.7,
                ..CompactionConfig::default()
            }
        );
        let e = serde_json::from_str::<CompactionConfig>(r#"{"treshold": 0.7}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
    }

    #[test]
    fn validate_names_the_bad_key() {
        let c = CompactionConfig {
            keep_tail: 0.9,
            ..CompactionConfig::default()
        };
        let e = c.validate().unwrap_err();
        assert!(e.to_string().contains("keep_tail"), "{e}");
        CompactionConfig::default().validate().unwrap();
        assert_eq!(CompactionConfig::default().limit(16_384), 13_107);
        assert_eq!(CompactionConfig::default().summary_budget(16_384), 2048);
    }
}
