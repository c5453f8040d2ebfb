//! The built-in projection policies, `recent` and `relevant`.

use super::{NodeIndex, Policy, PolicyInput};
use crate::lexical::Query;
use keel_protocol::Seq;
use std::sync::Arc;

/// The built-in policies: `recent`, `relevant`.
pub fn builtin_policies() -> Vec<Arc<dyn Policy>> {
    vec![Arc::new(Recent), Arc::new(Relevant::default())]
}

/// Required and pinned nodes, then the newest units, oldest last, while they fit the budget
/// (the first that does not fit ends the walk, so the recent history is one unbroken tail).
#[derive(Debug, Clone, Copy, Default)]
pub struct Recent;

/// A selection under construction: chosen units and the tokens they cost.
struct Selection<'a> {
    index: &'a NodeIndex,
    chosen: Vec<bool>,
    used: u64,
}

impl<'a> Selection<'a> {
    /// Required and pinned nodes, with their whole units.
    fn base(input: &PolicyInput<'a>) -> Selection<'a> {
        let mut s = Selection {
            index: input.index,
            chosen: vec![false; input.index.units().len()],
            used: 0,
        };
        for &i in input.required.iter().chain(input.pinned) {
            s.take(input.index.unit_of(i));
        }
        s
    }

    fn cost(&self, unit: usize) -> u64 {
        self.index.units()[unit]
            .iter()
            .map(|&i| self.index.tokens(i))
            .sum()
    }

    fn take(&mut self, unit: usize) {
        if !self.chosen[unit] {
            self.chosen[unit] = true;
            self.used += self.cost(unit);
        }
    }

    /// Take the newest units not chosen yet while they fit `budget`.
    fn newest(&mut self, budget: u64) {
        for unit in (0..self.chosen.len()).rev() {
            if self.chosen[unit] {
                continue;
            }
            let cost = self.cost(unit);
            if self.used + cost > budget {
                break;
            }
            self.take(unit);
        }
    }

    fn seqs(&self) -> Vec<Seq> {
        let units = self.index.units();
        self.index.seqs_of(
            (0..units.len())
                .filter(|&u| self.chosen[u])
                .flat_map(|u| units[u].iter().copied()),
        )
    }
}

impl Policy for Recent {
    fn name(&self) -> &str {
        "recent"
    }

    fn revision(&self, input: &PolicyInput<'_>) -> String {
        format!("recent/1 budget={}", input.budget_tokens)
    }

    fn project(&self, input: &PolicyInput<'_>) -> Vec<Seq> {
        let mut s = Selection::base(input);
        s.newest(input.budget_tokens);
        s.seqs()
    }
}

/// `recent` over a share of the budget, then older units scored by lexical overlap with the
/// current human message — 100 × the matched fraction of the message's distinct terms (memory
/// search's term score; nodes have no importance or confidence), ties to the newer — while
/// they fit the rest of the budget. Units that share no term are not taken.
#[derive(Debug, Clone, Copy)]
pub struct Relevant {
    /// The share of the budget `recent` gets first (0..=1).
    pub recent_share: f64,
}

impl Default for Relevant {
    fn default() -> Self {
        Relevant { recent_share: 0.5 }
    }
}

impl Policy for Relevant {
    fn name(&self) -> &str {
        "relevant"
    }

    fn revision(&self, input: &PolicyInput<'_>) -> String {
        format!(
            "relevant/1 budget={} recent_share={}",
            input.budget_tokens, self.recent_share
        )
    }

    fn needs_terms(&self) -> bool {
        true
    }

    fn project(&self, input: &PolicyInput<'_>) -> Vec<Seq> {
        let mut s = Selection::base(input);
        let recent_budget = (input.budget_tokens as f64 * self.recent_share) as u64;
        s.newest(recent_budget);
        let query = Query::new(input.query);
        // Matched distinct query terms per unit, from the index's posting lists.
        let units = input.index.units();
        let mut matched = vec![0u32; units.len()];
        let mut last_term = vec![u32::MAX; units.len()];
        for (t, term) in query.terms().iter().enumerate() {
            let t = t as u32;
            for &p in input.index.postings(term) {
                let u = input.index.unit_of(p as usize);
                if last_term[u] != t && !s.chosen[u] {
                    last_term[u] = t;
                    matched[u] += 1;
                }
            }
        }
        let total = query.terms().len().max(1) as f64;
        let mut scored: Vec<(f64, usize)> = matched
            .iter()
            .enumerate()
            .filter(|(_, m)| **m > 0)
            .map(|(u, m)| (100.0 * f64::from(*m) / total, u))
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        for (_, u) in scored {
            if s.used + s.cost(u) <= input.budget_tokens {
                s.take(u);
            }
        }
        s.seqs()
    }
}
