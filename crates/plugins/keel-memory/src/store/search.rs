//! Deterministic memory search over the token index.
//!
//! score = 100 × (matched fraction of the query's distinct tokens, [`crate::lexical`]) + 10 ×
//! importance + 5 × confidence + 1 / (1 + age in days since `updated_at`); only records that
//! match at least one query token are candidates; ties by `updated_at` (newest first), then id.
//! The `postings` table gives, per token, the visible records that contain it with their
//! scoring fields, so a search reads only the index rows of its own tokens and then the JSON of
//! the few records it returns.

use super::records::{Record, Scope};
use super::sqlite::{Identity, MemoryStore, StoreError};
use crate::lexical::{Query, estimate_tokens, truncate_to_tokens};
use rusqlite::params;
use std::collections::HashMap;

const DAY_MS: f64 = 86_400_000.0;

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The record.
    pub record: Record,
    /// Its score.
    pub score: f64,
}

/// The spec's score of a record matching `fraction` of the query's tokens.
pub fn score(fraction: f64, importance: f64, confidence: f64, updated_ms: i64, now: i64) -> f64 {
    let age_days = (now.saturating_sub(updated_ms)).max(0) as f64 / DAY_MS;
    100.0 * fraction + 10.0 * importance + 5.0 * confidence + 1.0 / (1.0 + age_days)
}

struct Cand {
    matched: u32,
    importance: f64,
    confidence: f64,
    updated_ms: i64,
}

impl MemoryStore {
    /// The best `limit` visible records of `scope` (every scope of the caller when `None`) for
    /// `query`, in rank order.
    pub fn search(
        &self,
        who: &Identity,
        query: &Query,
        scope: Option<Scope>,
        limit: usize,
        now: i64,
    ) -> Result<Vec<Hit>, StoreError> {
        if query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let skeys: Vec<String> = match scope {
            Some(s) => vec![who.skey(s)],
            None => Scope::ALL.iter().map(|s| who.skey(*s)).collect(),
        };
        let mut conn = self.conn();
        // One read transaction: the index rows and the records come from the same snapshot.
        let tx = conn.transaction().map_err(|e| self.sql(e))?;
        let mut cands: HashMap<String, Cand> = HashMap::new();
        {
            let mut st = tx
                .prepare_cached(
                    "SELECT id, importance, confidence, updated_ms FROM postings WHERE token = ?1 AND skey = ?2 AND (expires_ms IS NULL OR expires_ms > ?3)",
                )
                .map_err(|e| self.sql(e))?;
            for term in query.terms() {
                for skey in &skeys {
                    let mut rows = st
                        .query(params![term, skey, now])
                        .map_err(|e| self.sql(e))?;
                    while let Some(r) = rows.next().map_err(|e| self.sql(e))? {
                        let id: String = r.get(0).map_err(|e| self.sql(e))?;
                        match cands.get_mut(&id) {
                            Some(c) => c.matched += 1,
                            None => {
                                let c = Cand {
                                    matched: 1,
                                    importance: r.get(1).map_err(|e| self.sql(e))?,
                                    confidence: r.get(2).map_err(|e| self.sql(e))?,
                                    updated_ms: r.get(3).map_err(|e| self.sql(e))?,
                                };
                                cands.insert(id, c);
                            }
                        }
                    }
                }
            }
        }
        let n = query.terms().len() as f64;
        let mut ranked: Vec<(f64, i64, String)> = cands
            .into_iter()
            .map(|(id, c)| {
                let s = score(
                    f64::from(c.matched) / n,
                    c.importance,
                    c.confidence,
                    c.updated_ms,
                    now,
                );
                (s, c.updated_ms, id)
            })
            .collect();
        let order = |a: &(f64, i64, String), b: &(f64, i64, String)| {
            b.0.total_cmp(&a.0)
                .then(b.1.cmp(&a.1))
                .then_with(|| a.2.cmp(&b.2))
        };
        if ranked.len() > limit {
            ranked.select_nth_unstable_by(limit - 1, order);
            ranked.truncate(limit);
        }
        ranked.sort_by(order);
        let mut hits = Vec::with_capacity(ranked.len());
        {
            let mut st = tx
                .prepare_cached("SELECT json FROM records WHERE id = ?1 AND deleted = 0")
                .map_err(|e| self.sql(e))?;
            for (score, _, id) in ranked {
                let json: String = st
                    .query_row(params![id], |r| r.get(0))
                    .map_err(|e| self.sql(e))?;
                if let Ok(record) = serde_json::from_str::<Record>(&json) {
                    hits.push(Hit { record, score });
                }
            }
        }
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(hits)
    }
}

/// The reference ranking without the index: every record of `records` scored with
/// [`Query::overlap`] on its content and tags. The index search returns the same order.
pub fn rank_all(query: &Query, records: &[Record], now: i64) -> Vec<Hit> {
    let mut hits: Vec<Hit> = records
        .iter()
        .filter(|r| r.deleted_at.is_none())
        .filter(|r| {
            r.expires_at
                .as_deref()
                .and_then(|e| super::records::parse_rfc3339("expires_at", e).ok())
                .is_none_or(|e| e > now)
        })
        .filter_map(|r| {
            let f = query.overlap(&r.search_text());
            let updated = super::records::parse_rfc3339("updated_at", &r.updated_at).ok()?;
            (f > 0.0).then(|| Hit {
                record: r.clone(),
                score: score(f, r.importance, r.confidence, updated, now),
            })
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.record.updated_at.cmp(&a.record.updated_at))
            .then_with(|| a.record.id.cmp(&b.record.id))
    });
    hits
}

/// What `memory_search` shows the model (inside the data frame): a header line, then per hit
/// a line of its fields and its content, cut to `max_tokens` estimated tokens in all; the last
/// hit that does not fit whole is truncated and the rest dropped.
pub fn render(query: &str, scope: Option<Scope>, hits: &[Hit], max_tokens: u64) -> String {
    let where_ = scope.map_or("all scopes".to_owned(), |s| format!("scope {s}"));
    if hits.is_empty() {
        return format!("no memory matches {query:?} in {where_}");
    }
    let mut out = String::new();
    let mut used = 0u64;
    let mut shown = 0usize;
    let mut cut = false;
    for (i, h) in hits.iter().enumerate() {
        let r = &h.record;
        let mut head = format!(
            "[{}] id={} scope={} kind={} revision={} score={:.2} importance={} confidence={} updated_at={}",
            i + 1,
            r.id,
            r.scope,
            r.kind.as_str(),
            r.revision,
            h.score,
            r.importance,
            r.confidence,
            r.updated_at
        );
        if !r.tags.is_empty() {
            head.push_str(&format!(" tags={}", r.tags.join(",")));
        }
        if let Some(e) = &r.expires_at {
            head.push_str(&format!(" expires_at={e}"));
        }
        head.push('\n');
        let head_cost = estimate_tokens(&head);
        let body_cost = estimate_tokens(&r.content);
        let left = max_tokens.saturating_sub(used);
        if head_cost + body_cost <= left {
            out.push_str(&head);
            out.push_str(&r.content);
            out.push_str("\n\n");
            used += head_cost + body_cost;
            shown += 1;
            continue;
        }
        if left > head_cost + 8 {
            out.push_str(&head);
            out.push_str(&truncate_to_tokens(&r.content, left - head_cost));
            out.push_str("\n\n");
            shown += 1;
        }
        cut = true;
        break;
    }
    let mut header = format!(
        "{shown} of {} result(s) for {query:?} in {where_}",
        hits.len()
    );
    if cut {
        header.push_str(&format!(
            " (cut to max_tokens {max_tokens}; memory_read an id for the full text)"
        ));
    }
    format!("{header}\n\n{}", out.trim_end())
}

/// What `memory_read` shows the model: the record's fields, one per line, then its content.
pub fn render_record(r: &Record) -> String {
    let mut s = format!(
        "id={}\nscope={} scope_id={}\nkind={}\nrevision={}\nimportance={} confidence={}\ntags={}\nsource={}\ncreated_at={} updated_at={}\n",
        r.id,
        r.scope,
        r.scope_id,
        r.kind.as_str(),
        r.revision,
        r.importance,
        r.confidence,
        r.tags.join(","),
        r.source,
        r.created_at,
        r.updated_at
    );
    if let Some(e) = &r.expires_at {
        s.push_str(&format!("expires_at={e}\n"));
    }
    s.push_str("content:\n");
    s.push_str(&r.content);
    s
}

/// A one-line summary of a write for the model.
pub fn render_written(verb: &str, r: &Record) -> String {
    format!(
        "{verb} {} in scope {} at revision {} (updated_at {})",
        r.id, r.scope, r.revision, r.updated_at
    )
}
