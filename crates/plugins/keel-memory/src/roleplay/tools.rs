//! The role-play tools. Every result is stored text framed with [`crate::framing::as_data`].
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `character_get` | none | the card: name, description, personality, scenario, greeting, tags, creator notes |
//! | `lore_search` | `query` (required), `limit` (1–20, default 5), `max_tokens` (16–4000, default 800) | lore entries ranked by the shared lexical overlap of the query with their keys, name and content |
//! | `scene_get` | none | the scene now: the character, the card's scenario, the turn, the lore active at the latest request |

use super::plugin::Roleplay;
use crate::framing::as_data;
use crate::lexical::{Query, estimate_tokens, truncate_to_tokens};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use keel_tools::{ExecMode, Tool, ToolContext, ToolEffect, ToolError, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The tools' names.
pub const TOOL_NAMES: [&str; 3] = ["character_get", "lore_search", "scene_get"];

/// The three tools over one install.
pub fn tools(rp: &Arc<Roleplay>) -> Vec<Arc<dyn Tool>> {
    TOOL_NAMES
        .iter()
        .map(|name| {
            Arc::new(RoleplayTool {
                name,
                rp: rp.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

struct RoleplayTool {
    name: &'static str,
    rp: Arc<Roleplay>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default = "five")]
    limit: usize,
    #[serde(default = "eight_hundred")]
    max_tokens: u64,
}

fn five() -> usize {
    5
}
fn eight_hundred() -> u64 {
    800
}

/// `character_get`'s body.
pub fn character_text(rp: &Roleplay) -> String {
    let d = &rp.card.data;
    let mut s = format!("name: {}\n", d.name);
    for (k, v) in [
        ("description", &d.description),
        ("personality", &d.personality),
        ("scenario", &d.scenario),
        ("greeting", &d.first_mes),
        ("creator_notes", &d.creator_notes),
    ] {
        if !v.trim().is_empty() {
            s.push_str(&format!("{k}: {}\n", rp.fill(v.trim())));
        }
    }
    if !d.tags.is_empty() {
        s.push_str(&format!("tags: {}\n", d.tags.join(", ")));
    }
    s.push_str(&format!("spec: {}", rp.card.spec));
    s
}

/// `lore_search`'s body: entries whose keys, name and content overlap the query, best first
/// (ties: higher order, then book and uid), at most `limit`, contents cut so the whole stays
/// within `max_tokens`.
pub fn lore_search(rp: &Roleplay, query: &str, limit: usize, max_tokens: u64) -> String {
    let q = Query::new(query);
    let mut scored: Vec<(f64, &super::lore::LoreEntry)> = rp
        .entries
        .iter()
        .filter(|e| e.enabled)
        .map(|e| {
            let keys: Vec<&str> = e
                .keys
                .iter()
                .chain(&e.secondary_keys)
                .map(|k| k.text())
                .collect();
            let text = format!("{} {} {}", keys.join(" "), e.name, e.content);
            (q.overlap(&text), e)
        })
        .filter(|(s, _)| *s > 0.0)
        .collect();
    scored.sort_by(|(sa, a), (sb, b)| {
        sb.total_cmp(sa)
            .then_with(|| b.order.cmp(&a.order))
            .then_with(|| a.book.cmp(&b.book))
            .then_with(|| a.uid.cmp(&b.uid))
    });
    let mut out = Vec::new();
    let mut left = max_tokens;
    for (score, e) in scored.into_iter().take(limit) {
        let keys: Vec<&str> = e.keys.iter().map(|k| k.text()).collect();
        let head = format!(
            "[{}#{}] {} (keys: {}; score {:.2})",
            e.book,
            e.uid,
            if e.name.is_empty() { "-" } else { &e.name },
            keys.join(", "),
            score
        );
        let head_cost = estimate_tokens(&head) + 1;
        if head_cost >= left {
            break;
        }
        let content = truncate_to_tokens(e.content.trim(), left - head_cost);
        left = left.saturating_sub(head_cost + estimate_tokens(&content));
        out.push(format!("{head}\n{content}"));
    }
    if out.is_empty() {
        format!("no lore entry matches {query:?}")
    } else {
        out.join("\n\n")
    }
}

/// `scene_get`'s body: the character, the card's scenario, the turn, the lore active at the
/// latest request (by name, with content).
pub fn scene_text(rp: &Roleplay) -> String {
    let d = &rp.card.data;
    let active = rp.active_now();
    let mut s = format!("character: {}\nturn: {}\n", d.name, rp.turn_now());
    if !d.scenario.trim().is_empty() {
        s.push_str(&format!("scenario: {}\n", rp.fill(d.scenario.trim())));
    }
    s.push_str(&format!("active lore entries: {}", active.len()));
    for a in &active {
        let name = if a.name.is_empty() { "-" } else { &a.name };
        s.push_str(&format!(
            "\n[{}#{}] {}: {}",
            a.book,
            a.uid,
            name,
            a.content.trim()
        ));
    }
    s
}

#[async_trait]
impl Tool for RoleplayTool {
    fn schema(&self) -> ToolSchema {
        let (description, parameters) = match self.name {
            "character_get" => (
                "The role-play character's card: name, description, personality, scenario, greeting.",
                json!({"type":"object","properties":{}}),
            ),
            "lore_search" => (
                "Search the character's lorebooks (world info) by words; best matches first.",
                json!({"type":"object","properties":{
                    "query":{"type":"string"},
                    "limit":{"type":"integer","minimum":1,"maximum":20},
                    "max_tokens":{"type":"integer","minimum":16,"maximum":4000}},
                    "required":["query"]}),
            ),
            _ => (
                "The scene now: the character, the scenario, the turn and the lore active for the latest message.",
                json!({"type":"object","properties":{}}),
            ),
        };
        ToolSchema {
            name: self.name.into(),
            description: description.into(),
            parameters,
        }
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }

    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }

    async fn execute(&self, args: Value, _ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let rp = &self.rp;
        let (kind, body) = match self.name {
            "character_get" => ("character", character_text(rp)),
            "lore_search" => {
                let a: SearchArgs = serde_json::from_value(args)
                    .map_err(|e| ToolError::InvalidArgs(e.to_string()))?;
                if a.query.trim().is_empty() {
                    return Err(ToolError::InvalidArgs("query is empty".into()));
                }
                let limit = a.limit.clamp(1, 20);
                let max_tokens = a.max_tokens.clamp(16, 4000);
                ("lore", lore_search(rp, &a.query, limit, max_tokens))
            }
            _ => ("scene", scene_text(rp)),
        };
        Ok(ToolOutput::text(as_data(kind, &body)))
    }
}
