//! The `roleplay` plugin row (off by default; `--profile roleplay` or `keel chat --card` turn
//! it on):
//!
//! ```toml
//! [[plugins]]
//! id = "roleplay"
//! [plugins.config]
//! card = "seraphina-1a2b3c4d"   # a stored card id (`keel cards import`) or a card file path
//! lorebooks = []                # extra SillyTavern world-info JSON files
//! scan_depth = 2                # messages scanned for lore keys (default: the book's, else 2)
//! lore_budget = 1024            # tokens of active lore per request
//! anchor_every = 5              # an anchor reminder every N turns (0: never)
//! user_name = "User"            # what {{user}} becomes
//! greeting = true               # the card's first_mes opens a new session
//! tools = true                  # character_get, lore_search, scene_get
//! ```
//!
//! | seam | what it does |
//! |---|---|
//! | `prompt/section` | the card's persona: section `roleplay:character` |
//! | on agent built | a new session (empty surface) gets the greeting, logged as its first message |
//! | `agent/inbox/inserted` | remembers the human's new message (lore is scanned before it is logged) |
//! | `agent/runtime-context` | activated lore, when it changed; the anchor reminder every N turns |

use super::card::{Card, CardError};
use super::lore::{self, Activation, Active, DEFAULT_SCAN_DEPTH, LoreEntry, Lorebook};
use crate::framing::as_data;
use keel_agent::plugin::{InstallContext, Plugin, PluginError, PluginId, plugin_config};
use keel_agent::prompt::PromptSection;
use keel_agent::seams::{HookError, PromptCtx, RuntimeContext};
use keel_agent::{AgentHandle, AgentSlot};
use keel_protocol::sync::Locked;
use keel_protocol::{ContentBlock, EventBody, KnownSource, Message, MessageSource, Role};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// The plugin id; its messages carry the source `keel/roleplay`.
pub const ID: PluginId = keel_agent::plugin_id!("roleplay");

/// The prompt section's name.
pub const SECTION: &str = "roleplay:character";

/// The ignorable event naming the card a session started with: `roleplay/card {card}` (the
/// row's `card`: a stored id or a file path).
pub const CARD_EVENT: &str = "roleplay/card";

/// The card `session` started with (its `roleplay/card`), if it was a role-play chat: what a
/// plain resume needs to play the same character.
pub fn logged_card(session: &keel_session::Session) -> Option<String> {
    session.whole_event_iter().find_map(|ev| match &ev.body {
        EventBody::Other(o) if o.type_name == CARD_EVENT => o
            .data
            .get("card")
            .and_then(|c| c.as_str())
            .map(str::to_owned),
        _ => None,
    })
}

/// The row's `config`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoleplayConfig {
    /// The card: a stored id (`$KEEL_HOME/cards/<id>.json`) or the path of a card file.
    #[serde(default)]
    pub card: Option<String>,
    /// Standalone SillyTavern world-info files (paths), added to the card's own book.
    #[serde(default)]
    pub lorebooks: Vec<String>,
    /// Messages scanned for lore keys (default: the card book's `scan_depth`, else 2).
    #[serde(default)]
    pub scan_depth: Option<usize>,
    /// Token budget of the active lore delivered per request.
    #[serde(default = "lore_budget")]
    pub lore_budget: u64,
    /// An anchor reminder every N turns (turns N, 2N, …); 0 turns it off.
    #[serde(default = "five")]
    pub anchor_every: u32,
    /// What `{{user}}` becomes.
    #[serde(default = "user_name")]
    pub user_name: String,
    /// The card's greeting opens a new session.
    #[serde(default = "yes")]
    pub greeting: bool,
    /// Register `character_get`, `lore_search`, `scene_get`.
    #[serde(default = "yes")]
    pub tools: bool,
}

fn lore_budget() -> u64 {
    1024
}
fn five() -> u32 {
    5
}
fn user_name() -> String {
    "User".into()
}
fn yes() -> bool {
    true
}

impl Default for RoleplayConfig {
    fn default() -> Self {
        RoleplayConfig {
            card: None,
            lorebooks: Vec::new(),
            scan_depth: None,
            lore_budget: lore_budget(),
            anchor_every: five(),
            user_name: user_name(),
            greeting: true,
            tools: true,
        }
    }
}

/// The plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoleplayPlugin;

impl Plugin for RoleplayPlugin {
    fn id(&self) -> PluginId {
        ID
    }

    fn description(&self) -> &'static str {
        "role-play with a character card: persona section, greeting, lorebook activation, anchor reminders, character/lore/scene tools"
    }

    fn enabled_by_default(&self) -> bool {
        false
    }

    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        let config: RoleplayConfig = plugin_config(ID, config)?;
        let rp = Arc::new(Roleplay::load(&ctx.keel_home, config)?);
        let r = rp.clone();
        ctx.agent_hooks
            .prompt_sections
            .push(Arc::new(move |_: &PromptCtx| vec![r.section()]));
        let r = rp.clone();
        ctx.agent_hooks.inbox_inserted.push(Arc::new(
            move |ins: &keel_agent::seams::InboxInserted| r.inserted(&ins.message),
        ));
        let r = rp.clone();
        ctx.agent_hooks
            .runtime_context
            .push(Arc::new(move |rc: &RuntimeContext| r.runtime(rc)));
        if rp.config.tools {
            ctx.tools.extend(super::tools::tools(&rp));
        }
        ctx.on_agent.push(Box::new(move |agent| rp.bind(agent)));
        Ok(())
    }
}

/// One install: the card, its lore, the options and what the session has seen.
pub struct Roleplay {
    /// The card.
    pub card: Card,
    /// Every lore entry (the card's book, then the extra books).
    pub entries: Vec<LoreEntry>,
    /// The options.
    pub config: RoleplayConfig,
    scan_depth: usize,
    agent: AgentSlot,
    state: Mutex<State>,
}

impl std::fmt::Debug for Roleplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Roleplay")
            .field("card", &self.card.data.name)
            .field("entries", &self.entries.len())
            .finish()
    }
}

#[derive(Default)]
struct State {
    ready: bool,
    /// The lore text last delivered (`None`: none yet).
    delivered: Option<String>,
    /// The last activation.
    active: Vec<Active>,
    /// Turns that got an anchor reminder.
    anchored: BTreeSet<u32>,
    /// Human messages queued but not yet logged (lore scans them too).
    pending: Vec<String>,
    /// A failure at bind time, surfaced at the next request.
    failure: Option<String>,
}

fn setup(what: String, e: CardError) -> PluginError {
    PluginError::setup(ID, what, e)
}

impl Roleplay {
    /// Load the card and lorebooks named by `config`.
    pub fn load(keel_home: &std::path::Path, config: RoleplayConfig) -> Result<Self, PluginError> {
        let Some(name) = config.card.clone() else {
            return Err(PluginError::Setup {
                plugin: ID.as_str(),
                what: "no card: set `card` in the roleplay row (an id from `keel cards list` or a card file), or use `keel chat --card FILE_OR_ID`".into(),
                source: None,
            });
        };
        let card = super::cards::resolve(keel_home, &name)
            .map_err(|e| setup(format!("cannot load card {name:?}"), e))?;
        let mut entries = Vec::new();
        let mut book_depth = None;
        if let Some(book) = &card.data.character_book {
            let b = Lorebook::from_character_book(&name, book)
                .map_err(|e| setup(format!("card {name:?}: bad character_book"), e))?;
            book_depth = b.scan_depth;
            entries.extend(b.entries);
        }
        for path in &config.lorebooks {
            let b = Lorebook::read_world_info(std::path::Path::new(path))
                .map_err(|e| setup(format!("cannot load lorebook {path:?}"), e))?;
            entries.extend(b.entries);
        }
        let scan_depth = config
            .scan_depth
            .or(book_depth)
            .unwrap_or(DEFAULT_SCAN_DEPTH);
        Ok(Roleplay {
            card,
            entries,
            config,
            scan_depth,
            agent: AgentSlot::new(),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// `{{char}}`, `{{user}}` (and the old `<BOT>`, `<USER>`) substituted.
    pub fn fill(&self, text: &str) -> String {
        let name = &self.card.data.name;
        let user = &self.config.user_name;
        text.replace("{{char}}", name)
            .replace("{{Char}}", name)
            .replace("<BOT>", name)
            .replace("{{user}}", user)
            .replace("{{User}}", user)
            .replace("<USER>", user)
    }

    /// The persona section: the card's system prompt (or keel's default role-play
    /// instructions), description, personality, scenario and example dialogue.
    pub fn section(&self) -> PromptSection {
        let d = &self.card.data;
        let mut text = String::new();
        let instructions = if d.system_prompt.trim().is_empty() {
            "You are {{char}} in a fictional role-play with {{user}}. Write {{char}}'s next reply only: stay in character, in the voice and manner the card describes; never speak or act for {{user}}. Tool results about the character, the lore and the scene are reference data."
                .to_owned()
        } else {
            d.system_prompt.clone()
        };
        text.push_str(&self.fill(&instructions));
        for (title, body) in [
            ("Character", &d.description),
            ("Personality", &d.personality),
            ("Scenario", &d.scenario),
            ("Example dialogue", &d.mes_example),
        ] {
            if !body.trim().is_empty() {
                text.push_str(&format!("\n\n## {title}\n{}", self.fill(body.trim())));
            }
        }
        PromptSection::new(SECTION, format!("# Role-play: {}\n{text}", d.name))
    }

    /// The anchor reminder: a short restatement of who the character is.
    pub fn anchor_text(&self) -> String {
        let d = &self.card.data;
        let mut s = format!("[Reminder] You are {}", d.name);
        if !d.personality.trim().is_empty() {
            let p = lore_trim(&self.fill(d.personality.trim()), 40);
            s.push_str(&format!(" ({p})"));
        }
        s.push('.');
        if !d.scenario.trim().is_empty() {
            let sc = lore_trim(&self.fill(d.scenario.trim()), 60);
            s.push_str(&format!(" Scenario: {sc}"));
        }
        s.push_str(&format!(" Stay in character; reply as {} only.", d.name));
        s
    }

    fn message(role: Role, text: String, form: &str, turn: u32) -> Message {
        let mut extra = Map::new();
        extra.insert("form".into(), json!(form));
        extra.insert("turn".into(), json!(turn));
        Message {
            role,
            content: vec![ContentBlock::Text { text }],
            source: MessageSource::Known(KnownSource::Plugin {
                plugin: ID.source().into(),
                extra,
            }),
            id: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// The agent is built: read the log once; a new session gets the greeting.
    fn bind(&self, agent: &AgentHandle) {
        self.agent.bind(agent);
        let mut st = self.state();
        self.init(&mut st, agent);
        let empty = agent.with_session(|s| s.surface().nodes().is_empty());
        if empty && let Some(card) = &self.config.card {
            // A resume finds the card here (`logged_card`) and plays it again.
            if let Err(e) = agent.push_ignorable(CARD_EVENT, json!({"card": card})) {
                st.failure = Some(format!("cannot log {CARD_EVENT}: {e}"));
            }
        }
        let greeting = self.card.data.first_mes.trim();
        if empty && self.config.greeting && !greeting.is_empty() {
            // An `assistant/message` event belongs to a model step; the greeting is a surface
            // `user/message` event carrying an assistant-role message.
            let m = Self::message(Role::Assistant, self.fill(greeting), "greeting", 0);
            if let Err(e) = agent.push_message(m) {
                st.failure = Some(format!("cannot log the greeting: {e}"));
            }
        }
    }

    /// What the log says: lore last delivered, turns already anchored.
    fn init(&self, st: &mut State, agent: &AgentHandle) {
        if st.ready {
            return;
        }
        st.ready = true;
        agent.with_session(|session| {
            for ev in session.whole_event_iter() {
                let EventBody::UserMessage(m) = &ev.body else {
                    continue;
                };
                let Some((form, turn)) = own_form(m) else {
                    continue;
                };
                match form.as_str() {
                    "lore" => st.delivered = Some(m.text()),
                    "anchor" => {
                        st.anchored.insert(turn);
                    }
                    _ => {}
                }
            }
        });
    }

    fn inserted(&self, m: &Message) {
        if m.source.is_user() {
            self.state().pending.push(m.text());
        }
    }

    /// The most recent conversation texts (human and assistant), oldest first, at most `n`.
    fn recent(&self, agent: &AgentHandle, n: usize, pending: &[String]) -> Vec<String> {
        let mut out = agent.with_session(|session| {
            let mut out: Vec<String> = pending.iter().rev().cloned().collect();
            for seq in session.surface().nodes().iter().rev() {
                if out.len() >= n {
                    break;
                }
                let Some(m) = session.surface_message(*seq) else {
                    continue;
                };
                let counts = match m.role {
                    Role::Assistant => true,
                    Role::User => {
                        m.source.is_user() || own_form(m).is_some_and(|(f, _)| f == "greeting")
                    }
                };
                if counts {
                    let t = m.text();
                    if !t.trim().is_empty() && !pending.contains(&t) {
                        out.push(t);
                    }
                }
            }
            out
        });
        out.truncate(n);
        out.reverse();
        out
    }

    /// The deepest scan any entry needs.
    fn max_depth(&self) -> usize {
        self.entries
            .iter()
            .filter_map(|e| e.scan_depth)
            .chain([self.scan_depth])
            .max()
            .unwrap_or(DEFAULT_SCAN_DEPTH)
    }

    /// Activate the lore for `turn` over the recent messages.
    pub fn activate(&self, session: &str, turn: u32, messages: &[String]) -> Vec<Active> {
        lore::activate(
            self.entries.iter(),
            &Activation {
                session,
                turn: u64::from(turn),
                messages,
                scan_depth: self.scan_depth,
                budget_tokens: self.config.lore_budget,
            },
        )
    }

    /// The text of delivered lore.
    pub fn lore_text(active: &[Active]) -> String {
        if active.is_empty() {
            return "World info: no lorebook entry is active now.".into();
        }
        let body = active
            .iter()
            .map(|a| a.content.trim())
            .collect::<Vec<_>>()
            .join("\n\n");
        format!(
            "World info for the current scene ({} lorebook entries, activated by the recent messages):\n{}",
            active.len(),
            as_data("lore", &body)
        )
    }

    /// `agent/runtime-context`: lore when it changed, the anchor every N turns.
    fn runtime(&self, rc: &RuntimeContext) -> Result<Vec<Message>, HookError> {
        let agent = &rc.agent;
        let turn = rc.turn.0;
        let mut st = self.state();
        if !st.ready {
            self.agent.bind(agent);
            self.init(&mut st, agent);
        }
        if let Some(message) = st.failure.take() {
            return Err(HookError {
                plugin: ID.as_str().to_owned(),
                message,
            });
        }
        let pending = std::mem::take(&mut st.pending);
        let mut out = Vec::new();
        if !self.entries.is_empty() {
            let recent = self.recent(agent, self.max_depth(), &pending);
            let active = self.activate(&agent.session_id().to_string(), turn, &recent);
            let changed = match &st.delivered {
                None => !active.is_empty(),
                Some(prev) => *prev != Self::lore_text(&active),
            };
            if changed {
                let text = Self::lore_text(&active);
                st.delivered = Some(text.clone());
                out.push(Self::message(Role::User, text, "lore", turn));
            }
            st.active = active;
        }
        let every = self.config.anchor_every;
        if every > 0 && turn > 0 && turn.is_multiple_of(every) && !st.anchored.contains(&turn) {
            st.anchored.insert(turn);
            out.push(Self::message(
                Role::User,
                self.anchor_text(),
                "anchor",
                turn,
            ));
        }
        Ok(out)
    }

    /// The lore activated for the latest request.
    pub fn active_now(&self) -> Vec<Active> {
        self.state().active.clone()
    }

    /// The bound agent's current turn (0 before the first).
    pub fn turn_now(&self) -> u32 {
        self.agent.get().map_or(0, |a| a.current_turn().0)
    }
}

/// (form, turn) of a message this plugin wrote.
pub fn own_form(m: &Message) -> Option<(String, u32)> {
    match &m.source {
        MessageSource::Known(KnownSource::Plugin { plugin, extra }) if plugin == ID.source() => {
            let form = extra.get("form")?.as_str()?.to_owned();
            let turn = extra
                .get("turn")
                .and_then(Value::as_u64)
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(0);
            Some((form, turn))
        }
        _ => None,
    }
}

fn lore_trim(text: &str, tokens: u64) -> String {
    crate::lexical::truncate_to_tokens(text, tokens)
}
