//! The one lexical scoring keel-memory uses, shared by memory search, `history_search`, lore
//! search and the `relevant` projection policy: tokens are maximal runs of Unicode letters and
//! digits, lower-cased; a text's overlap with a query is the fraction of the query's distinct
//! tokens it contains.

use std::collections::HashSet;

/// The tokens of `text`: maximal runs of Unicode letters/digits, lower-cased, in order (with
/// repeats).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for_each_token(text, |t| out.push(t.to_owned()));
    out
}

/// Call `f` with each token of `text` (as [`tokens`] gives them) without allocating one string
/// per token: the cheap way to index a long text.
pub fn for_each_token(text: &str, mut f: impl FnMut(&str)) {
    let mut cur = String::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii() {
            if b.is_ascii_alphanumeric() {
                cur.push(b.to_ascii_lowercase() as char);
            } else if !cur.is_empty() {
                f(&cur);
                cur.clear();
            }
            i += 1;
            continue;
        }
        // A multi-byte character: decode it (the text is valid UTF-8, `i` on a boundary).
        let ch = text[i..].chars().next().unwrap_or(' ');
        if ch.is_alphanumeric() {
            cur.extend(ch.to_lowercase());
        } else if !cur.is_empty() {
            f(&cur);
            cur.clear();
        }
        i += ch.len_utf8();
    }
    if !cur.is_empty() {
        f(&cur);
    }
}

/// A query prepared once: its distinct tokens.
#[derive(Debug, Clone, Default)]
pub struct Query {
    terms: Vec<String>,
}

impl Query {
    /// The distinct tokens of `text`, in first-seen order.
    pub fn new(text: &str) -> Query {
        let mut seen = HashSet::new();
        let terms = tokens(text)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .collect();
        Query { terms }
    }

    /// The query's distinct tokens.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// Whether the query has no token (it matches nothing).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The fraction (0..=1) of the query's distinct tokens found among `text`'s tokens.
    pub fn overlap(&self, text: &str) -> f64 {
        if self.terms.is_empty() {
            return 0.0;
        }
        let have: HashSet<String> = tokens(text).into_iter().collect();
        self.overlap_with(&have)
    }

    /// [`Query::overlap`] against an already tokenized text.
    pub fn overlap_with(&self, have: &HashSet<String>) -> f64 {
        if self.terms.is_empty() {
            return 0.0;
        }
        let matched = self.terms.iter().filter(|t| have.contains(*t)).count();
        matched as f64 / self.terms.len() as f64
    }
}

/// Estimated tokens of `text` for budgets (four bytes a token, at least one for non-empty
/// text) — the same rough measure the compaction meter uses for prose.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// `text` cut to at most `max_tokens` estimated tokens (on a char boundary), with `…` when cut.
pub fn truncate_to_tokens(text: &str, max_tokens: u64) -> String {
    let max_bytes = usize::try_from(max_tokens.saturating_mul(4)).unwrap_or(usize::MAX);
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes.saturating_sub(3);
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tokens_are_letter_digit_runs_lowercased() {
        assert_eq!(
            tokens("Héllo, WORLD-42 naïve_x ÄÖ"),
            ["héllo", "world", "42", "naïve", "x", "äö"]
        );
        assert!(tokens("  ,.;  ").is_empty());
    }

    #[test]
    fn overlap_is_the_matched_fraction_of_distinct_query_tokens() {
        let q = Query::new("red fox red hat");
        assert_eq!(q.terms(), ["red", "fox", "hat"]);
        assert!((q.overlap("a RED hat") - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(q.overlap("nothing here"), 0.0);
        assert_eq!(Query::new("").overlap("anything"), 0.0);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let t = truncate_to_tokens("ééééééééééé", 2);
        assert!(t.ends_with('…'));
        assert!(t.len() <= 8 + 3);
        assert_eq!(truncate_to_tokens("short", 10), "short");
    }
}
