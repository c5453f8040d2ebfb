//! Retry policy for failed model calls: which failures to retry, and how long to wait.
//!
//! Retryable: `RATE_LIMIT`, `SERVER`, `TRANSPORT`, `TIMEOUT`, `STREAM_CLOSED`. Everything else
//! (auth, quota, invalid request, context window, malformed/empty responses, aborts) gives up at
//! once. The delay grows exponentially from `base_delay` to `max_delay` with jitter; a server's
//! `Retry-After` replaces the computed delay (when it asks for longer than
//! `max_retry_after`, the policy gives up rather than retry early). The policy is pure: the same
//! seed, attempt and failure give the same decision, so tests can pin it. The agent loop calls
//! it inside the same step and logs each retry as `llm/retry`.

use keel_protocol::{FailureCode, ModelFailure};
use std::time::Duration;

/// What to do after a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Wait `delay`, then send the same request again.
    Retry {
        /// How long to wait first.
        delay: Duration,
    },
    /// Surface the failure.
    GiveUp,
}

/// Exponential backoff with jitter. See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 5).
    pub max_retries: u32,
    /// Delay before the first retry, before jitter (default 0.5 s).
    pub base_delay: Duration,
    /// Upper bound of the computed delay (default 10 s).
    pub max_delay: Duration,
    /// Longest `Retry-After` the policy honours; longer requests give up (default 60 s).
    pub max_retry_after: Duration,
    /// Fraction of the delay that is randomised: the delay is drawn from
    /// `[d × (1 − jitter), d]` (default 0.5; 0 disables jitter).
    pub jitter: f64,
    /// Seed of the jitter sequence (random by default).
    pub seed: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(10),
            max_retry_after: Duration::from_secs(60),
            jitter: 0.5,
            seed: rand::random(),
        }
    }
}

/// True for failures worth sending the same request again.
pub fn is_retryable(code: &FailureCode) -> bool {
    matches!(
        code,
        FailureCode::RateLimit
            | FailureCode::Server
            | FailureCode::Transport
            | FailureCode::Timeout
            | FailureCode::StreamClosed
    )
}

/// SplitMix64: a small, well-mixed hash for deterministic jitter.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl RetryPolicy {
    /// The default policy with a fixed jitter seed.
    pub fn seeded(seed: u64) -> Self {
        RetryPolicy {
            seed,
            ..RetryPolicy::default()
        }
    }

    /// A policy that never retries.
    pub fn never() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Decides after the `attempt`-th failed attempt (1 after the first failure) whether to try
    /// again and after how long.
    pub fn decide(&self, attempt: u32, failure: &ModelFailure) -> RetryDecision {
        if attempt == 0 || attempt > self.max_retries || !is_retryable(&failure.code) {
            return RetryDecision::GiveUp;
        }
        if let Some(ms) = failure.retry_after_ms {
            let asked = Duration::from_millis(ms);
            if asked > self.max_retry_after {
                return RetryDecision::GiveUp;
            }
            return RetryDecision::Retry { delay: asked };
        }
        RetryDecision::Retry {
            delay: self.backoff(attempt),
        }
    }

    /// The jittered backoff before retry number `attempt` (from 1).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let jitter = if self.jitter.is_finite() {
            self.jitter.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let unit = (mix(self.seed ^ u64::from(attempt)) >> 11) as f64 / (1u64 << 53) as f64;
        full.mul_f64(1.0 - jitter * unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn failure(code: FailureCode) -> ModelFailure {
        ModelFailure::new(code, "x")
    }

    #[test]
    fn retryable_codes_back_off_within_bounds_and_stop_after_max_retries() {
        let policy = RetryPolicy::seeded(7);
        let mut last_full = Duration::ZERO;
        for attempt in 1..=5 {
            let RetryDecision::Retry { delay } =
                policy.decide(attempt, &failure(FailureCode::Server))
            else {
                panic!("attempt {attempt} should retry");
            };
            let full =
                Duration::from_millis(500 * (1 << (attempt - 1))).min(Duration::from_secs(10));
            assert!(
                delay <= full && delay >= full / 2,
                "attempt {attempt}: {delay:?} vs {full:?}"
            );
            assert!(full >= last_full);
            last_full = full;
        }
        assert_eq!(
            policy.decide(6, &failure(FailureCode::Server)),
            RetryDecision::GiveUp
        );
        assert_eq!(
            policy.decide(0, &failure(FailureCode::Server)),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn only_transient_failures_retry() {
        let policy = RetryPolicy::seeded(1);
        for code in [
            FailureCode::RateLimit,
            FailureCode::Server,
            FailureCode::Transport,
            FailureCode::Timeout,
            FailureCode::StreamClosed,
        ] {
            assert!(
                matches!(
                    policy.decide(1, &failure(code.clone())),
                    RetryDecision::Retry { .. }
                ),
                "{code}"
            );
        }
        for code in [
            FailureCode::Auth,
            FailureCode::Quota,
            FailureCode::InvalidRequest,
            FailureCode::ContextWindowExceeded,
            FailureCode::MalformedResponse,
            FailureCode::EmptyResponse,
            FailureCode::Aborted,
            FailureCode::Other("X".into()),
        ] {
            assert_eq!(
                policy.decide(1, &failure(code.clone())),
                RetryDecision::GiveUp,
                "{code}"
            );
        }
    }

    #[test]
    fn retry_after_is_honoured_and_jitter_is_seeded() {
        let policy = RetryPolicy::seeded(3);
        let mut limited = failure(FailureCode::RateLimit);
        limited.retry_after_ms = Some(2_500);
        assert_eq!(
            policy.decide(1, &limited),
            RetryDecision::Retry {
                delay: Duration::from_millis(2_500)
            }
        );
        limited.retry_after_ms = Some(3_600_000);
        assert_eq!(policy.decide(1, &limited), RetryDecision::GiveUp);

        let a = RetryPolicy::seeded(42);
        let b = RetryPolicy::seeded(42);
        let c = RetryPolicy::seeded(43);
        let f = failure(FailureCode::Transport);
        assert_eq!(a.decide(2, &f), b.decide(2, &f));
        assert_ne!(a.backoff(2), c.backoff(2));
        let none = RetryPolicy {
            jitter: 0.0,
            ..RetryPolicy::seeded(9)
        };
        assert_eq!(none.backoff(1), Duration::from_millis(500));
        assert_eq!(none.backoff(4), Duration::from_secs(4));
        assert_eq!(none.backoff(40), Duration::from_secs(10));
        assert_eq!(RetryPolicy::never().decide(1, &f), RetryDecision::GiveUp);
    }
}
