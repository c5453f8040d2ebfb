//! `history_search {query, limit?, max_tokens?}`: search the durable log of the calling
//! session and its ancestors (a subagent's parent, and up the chain) — every appended message
//! (human, assistant, tool result), so text that compaction replaced or a projection left out
//! is still found, with the seq to find it by.
//!
//! Scoring is the memory search's term score: 100 × the matched fraction of the query's
//! distinct terms ([`crate::lexical`]); ties go to the newer message, this session before its
//! ancestors. Results are excerpts around the first matched term, cut to `max_tokens` (the
//! last one truncated), framed as data.
//!
//! Each session is indexed once (an inverted term → message list) and extended with the
//! events appended since, so a repeated search is a few posting-list lookups.

use crate::framing::as_data;
use crate::lexical::{Query, estimate_tokens, for_each_token, truncate_to_tokens};
use async_trait::async_trait;
use keel_protocol::sync::Locked;
use keel_protocol::{EventBody, Seq, SessionId, SurfaceOp, ToolSchema};
use keel_session::Session;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Most results one call returns.
pub const MAX_LIMIT: usize = 20;
/// Most tokens one call returns.
pub const MAX_TOKENS: u64 = 4000;
/// How many ancestors are searched.
pub const MAX_ANCESTORS: usize = 8;
/// Characters of context kept around the first matched term.
const EXCERPT_CHARS: usize = 320;

/// The `history_search` tool (one per install; its indexes live as long as the agent).
#[derive(Debug, Default)]
pub struct HistorySearch {
    /// The calling sessions' indexes (their logs are live in memory).
    indexes: Mutex<HashMap<SessionId, HistoryIndex>>,
    /// Ancestors read from their files, with their indexes: read again only when the file grew.
    ancestors: Mutex<HashMap<SessionId, Ancestor>>,
}

/// An ancestor session as read from its file.
#[derive(Debug)]
struct Ancestor {
    path: PathBuf,
    len: u64,
    session: Session,
    index: HistoryIndex,
}

impl Ancestor {
    /// Read the session in `dir` and index it.
    fn read(dir: &Path) -> Option<Ancestor> {
        let loaded = keel_session::Store::load(dir).ok()?;
        let path = loaded.report.path;
        let len = std::fs::metadata(&path).ok()?.len();
        let mut index = HistoryIndex::default();
        index.extend(&loaded.session);
        Some(Ancestor {
            path,
            len,
            session: loaded.session,
            index,
        })
    }

    /// Whether the file is still the one read.
    fn current(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|m| m.len() == self.len)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    max_tokens: Option<u64>,
}

/// The inverted index of one session's appended messages.
#[derive(Debug, Default)]
pub struct HistoryIndex {
    /// Messages indexed: their seqs, in log order.
    docs: Vec<Seq>,
    /// Term → positions in `docs`, ascending.
    postings: FxHashMap<String, Vec<u32>>,
    /// The next seq to look at.
    next: u64,
}

/// One hit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The session it is in.
    pub session: SessionId,
    /// Its seq there.
    pub seq: Seq,
    /// `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// 100 × matched fraction of the query's terms.
    pub score: f64,
    /// The excerpt.
    pub excerpt: String,
}

/// The searchable text of an appended event: its message's text, tool calls and results.
fn doc_text(ev: &keel_protocol::SessionEvent) -> Option<(&'static str, String)> {
    if !matches!(ev.surface_op, Some(SurfaceOp::Append)) {
        return None;
    }
    let role = match &ev.body {
        EventBody::UserMessage(_) => "user",
        EventBody::AssistantMessage(_) => "assistant",
        EventBody::ToolResult(_) => "tool",
        _ => return None,
    };
    let m = ev.body.surface_message()?;
    let text = crate::context::searchable_text(m);
    (!text.is_empty()).then_some((role, text))
}

impl HistoryIndex {
    /// Index the events of `session` not indexed yet.
    pub fn extend(&mut self, session: &Session) {
        let end = session.len();
        if self.next >= end {
            return;
        }
        let start = self.next;
        let mut seen: FxHashSet<String> = FxHashSet::default();
        let events: Box<dyn Iterator<Item = &keel_protocol::SessionEvent>> = if start == 0 {
            Box::new(session.whole_event_iter())
        } else {
            Box::new(
                session
                    .whole_events((start..end).map(Seq))
                    .filter_map(|(_, e)| e),
            )
        };
        for ev in events {
            let Some((_, text)) = doc_text(ev) else {
                continue;
            };
            let Ok(doc) = u32::try_from(self.docs.len()) else {
                break;
            };
            self.docs.push(ev.seq);
            seen.clear();
            for_each_token(&text, |t| {
                if seen.contains(t) {
                    return;
                }
                seen.insert(t.to_owned());
                match self.postings.get_mut(t) {
                    Some(list) => list.push(doc),
                    None => {
                        self.postings.insert(t.to_owned(), vec![doc]);
                    }
                }
            });
        }
        self.next = end;
    }

    /// The indexed messages matching `query`: `(doc position, matched terms)`.
    fn matches(&self, query: &Query) -> Vec<(u32, usize)> {
        let mut counts: FxHashMap<u32, usize> = FxHashMap::default();
        for t in query.terms() {
            if let Some(list) = self.postings.get(t) {
                for &d in list {
                    *counts.entry(d).or_default() += 1;
                }
            }
        }
        counts.into_iter().collect()
    }

    /// Number of messages indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Search `session` (which this index covers) for `query`: the best `limit` hits, leaving
    /// out the assistant message that makes tool call `skip_call` (the search's own call).
    pub fn search(
        &self,
        session: &Session,
        query: &Query,
        limit: usize,
        skip_call: Option<&str>,
    ) -> Vec<Hit> {
        if query.is_empty() {
            return Vec::new();
        }
        let mut found = self.matches(query);
        // Best first; ties to the newer message (a higher position).
        found.sort_by(|a, b| b.1.cmp(&a.1).then(b.0.cmp(&a.0)));
        let total = query.terms().len() as f64;
        found
            .into_iter()
            .filter_map(|(doc, matched)| {
                let seq = *self.docs.get(doc as usize)?;
                let ev = session.whole_event(seq)?;
                let own = skip_call.is_some_and(|id| {
                    ev.body
                        .surface_message()
                        .is_some_and(|m| m.tool_calls().any(|c| c.id == id))
                });
                if own {
                    return None;
                }
                let (role, text) = doc_text(ev)?;
                Some(Hit {
                    session: session.header().id.clone(),
                    seq,
                    role,
                    score: 100.0 * matched as f64 / total,
                    excerpt: excerpt(&text, query),
                })
            })
            .take(limit)
            .collect()
    }
}

/// Up to [`EXCERPT_CHARS`] characters of `text` around the first matched term.
fn excerpt(text: &str, query: &Query) -> String {
    let lower = text.to_lowercase();
    let at = query
        .terms()
        .iter()
        .filter_map(|t| lower.find(t.as_str()))
        .min()
        .unwrap_or(0);
    // `lower` and `text` can differ in byte length; map by characters.
    let at_char = lower[..at.min(lower.len())].chars().count();
    let start = at_char.saturating_sub(EXCERPT_CHARS / 4);
    let chars: Vec<char> = text.chars().collect();
    let end = (start + EXCERPT_CHARS).min(chars.len());
    let mut out: String = chars[start..end].iter().collect();
    if start > 0 {
        out.insert(0, '…');
    }
    if end < chars.len() {
        out.push('…');
    }
    out
}

/// The session directory of `id` beside `session_file` (`…/<project>/<id>/<file>`).
fn sibling_dir(session_file: &Path, id: &SessionId) -> Option<PathBuf> {
    Some(session_file.parent()?.parent()?.join(id.to_string()))
}

impl HistorySearch {
    /// Search the calling session (`session`, its file at `file`) and its ancestors, leaving
    /// out the calling assistant message (the one making tool call `skip_call`).
    pub fn search(
        &self,
        session: &Session,
        file: &Path,
        query: &str,
        limit: usize,
        skip_call: Option<&str>,
    ) -> Vec<Hit> {
        let query = Query::new(query);
        let mut indexes = self.indexes.locked();
        let own = indexes.entry(session.header().id.clone()).or_default();
        own.extend(session);
        let mut hits = own.search(session, &query, limit, skip_call);
        let mut parent = session.header().parent_session.clone();
        let mut depth = 0;
        while let Some(id) = parent.take() {
            depth += 1;
            if depth > MAX_ANCESTORS {
                break;
            }
            let Some(dir) = sibling_dir(file, &id) else {
                break;
            };
            let mut ancestors = self.ancestors.locked();
            if !ancestors.get(&id).is_some_and(Ancestor::current) {
                // Not read yet, or the file grew (a parent still running): read it again.
                let Some(read) = Ancestor::read(&dir) else {
                    break; // an ancestor not on disk here (imported, removed): search what there is
                };
                ancestors.insert(id.clone(), read);
            }
            let Some(a) = ancestors.get(&id) else {
                break;
            };
            hits.extend(a.index.search(&a.session, &query, limit, None));
            parent = a.session.header().parent_session.clone();
        }
        // This session's hits come first among equals (they were pushed first; the sort is
        // stable).
        hits.sort_by(|a, b| b.score.total_cmp(&a.score));
        hits.truncate(limit);
        hits
    }
}

/// Render hits within `max_tokens`, the last one truncated.
pub fn render(hits: &[Hit], max_tokens: u64) -> String {
    if hits.is_empty() {
        return "no match".into();
    }
    let mut out = String::new();
    let mut left = max_tokens;
    for h in hits {
        let entry = format!(
            "[session {} seq {} {} score {:.1}]\n{}\n",
            h.session, h.seq.0, h.role, h.score, h.excerpt
        );
        let cost = estimate_tokens(&entry);
        if cost > left {
            if left > 16 {
                out.push_str(&truncate_to_tokens(&entry, left));
                out.push('\n');
            }
            break;
        }
        left -= cost;
        out.push_str(&entry);
    }
    out
}

#[async_trait]
impl Tool for HistorySearch {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "history_search".into(),
            description: "Search this session's full history (and its parent sessions'), including what compaction or the context projection left out. Returns excerpts with their seq.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "words to find"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                    "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS},
                },
                "required": ["query"],
                "additionalProperties": false,
            }),
        }
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: Args = serde_json::from_value(args)
            .map_err(|e| ToolError::InvalidArgs(format!("history_search: {e}")))?;
        let limit = a.limit.unwrap_or(5).clamp(1, MAX_LIMIT);
        let max_tokens = a.max_tokens.unwrap_or(1000).clamp(1, MAX_TOKENS);
        let agent = keel_agent::calling_agent(ctx).ok_or_else(|| {
            ToolError::Failed("history_search runs only inside an agent session".into())
        })?;
        let file = agent.transcript_path();
        let hits =
            agent.with_session(|s| self.search(s, &file, &a.query, limit, Some(&ctx.call.id)));
        Ok(ToolOutput::text(as_data(
            "history",
            &render(&hits, max_tokens),
        )))
    }
}
