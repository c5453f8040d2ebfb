//! Lorebooks (world info): a card's embedded `character_book` and SillyTavern's standalone
//! world-info JSON (`entries` keyed by uid), normalised into one [`Lorebook`], and their
//! deterministic activation ([`Lorebook::activate`]).
//!
//! Rules, one entry at a time:
//! - a disabled entry never activates; a `constant` one activates without a key;
//! - otherwise a primary key must match the scanned text: the last `scan_depth` messages
//!   (the entry's own, else the activation's default), joined by newlines;
//! - secondary keys (when there are any and the entry is `selective`) apply SillyTavern's
//!   `selectiveLogic`: 0 AND ANY (one must match), 1 NOT ALL (not all may match), 2 NOT ANY
//!   (none may match), 3 AND ALL (all must match);
//! - plain keys match case-insensitively unless `case_sensitive`, anywhere unless
//!   `whole_words` (then the match must not touch a letter, digit or `_` on either side);
//!   a key written `/pattern/flags` is a regex (flags `i`, `m`, `s`, `x`; `g`, `u`, `y` are
//!   accepted and mean nothing here), compiled at import with a size limit;
//! - `probability` (0–100, when `useProbability`) is rolled deterministically: the roll is
//!   a hash of session id, turn and the entry's book and uid, never a random generator;
//! - the active entries are kept highest `order` first until the token budget is spent (the
//!   first one that does not fit ends the list), then returned lowest `order` first (ties by
//!   uid), so the most important entry sits last, nearest the conversation.

use super::card::CardError;
use crate::lexical::estimate_tokens;
use regex::{Regex, RegexBuilder};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The longest regex key accepted, in bytes.
pub const MAX_REGEX_BYTES: usize = 1024;
/// The compiled-size limit of a regex key.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;
/// The scan depth when neither the entry, the book nor the configuration sets one.
pub const DEFAULT_SCAN_DEPTH: usize = 2;

/// How secondary keys combine with a primary match (SillyTavern's `selectiveLogic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Logic {
    /// 0: at least one secondary key matches.
    #[default]
    AndAny,
    /// 1: not every secondary key matches.
    NotAll,
    /// 2: no secondary key matches.
    NotAny,
    /// 3: every secondary key matches.
    AndAll,
}

impl Logic {
    /// From SillyTavern's number.
    pub fn from_number(n: u64) -> Option<Logic> {
        Some(match n {
            0 => Logic::AndAny,
            1 => Logic::NotAll,
            2 => Logic::NotAny,
            3 => Logic::AndAll,
            _ => return None,
        })
    }
}

/// Why a `/pattern/flags` key cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KeyError {
    /// The pattern is longer than [`MAX_REGEX_BYTES`].
    #[error("regex key {} is longer than {} bytes", short(.text), MAX_REGEX_BYTES)]
    TooLong {
        /// The key as written.
        text: String,
    },
    /// A flag other than `i m s x g u y`.
    #[error("regex key {}: unknown flag {flag:?} (accepted: i m s x g u y)", short(.text))]
    UnknownFlag {
        /// The key as written.
        text: String,
        /// The flag.
        flag: char,
    },
    /// The regex does not compile (or is over the size limits).
    #[error("regex key {} is rejected: {error}", short(.text))]
    Rejected {
        /// The key as written.
        text: String,
        /// What the regex compiler said.
        error: regex::Error,
    },
}

/// A key: plain text or a `/pattern/flags` regex.
#[derive(Debug, Clone)]
pub enum Key {
    /// Plain text.
    Plain(String),
    /// A regex, with the text it was written as.
    Regex(Regex, String),
}

impl Key {
    /// Parse a key; `/pattern/flags` is a regex (compiled with a size limit).
    pub fn parse(text: &str) -> Result<Key, KeyError> {
        if let Some(rest) = text.strip_prefix('/')
            && let Some(end) = rest.rfind('/')
            && end > 0
        {
            let (pattern, flags) = (&rest[..end], &rest[end + 1..]);
            if flags.chars().all(|c| c.is_ascii_alphabetic()) {
                return Key::regex(text, pattern, flags).map(|r| Key::Regex(r, text.to_owned()));
            }
        }
        Ok(Key::Plain(text.to_owned()))
    }

    fn regex(text: &str, pattern: &str, flags: &str) -> Result<Regex, KeyError> {
        if pattern.len() > MAX_REGEX_BYTES {
            return Err(KeyError::TooLong {
                text: text.to_owned(),
            });
        }
        let mut b = RegexBuilder::new(pattern);
        b.size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(4 * REGEX_SIZE_LIMIT)
            .nest_limit(64);
        for f in flags.chars() {
            match f {
                'i' => b.case_insensitive(true),
                'm' => b.multi_line(true),
                's' => b.dot_matches_new_line(true),
                'x' => b.ignore_whitespace(true),
                'g' | 'u' | 'y' => &mut b,
                flag => {
                    return Err(KeyError::UnknownFlag {
                        text: text.to_owned(),
                        flag,
                    });
                }
            };
        }
        b.build().map_err(|error| KeyError::Rejected {
            text: text.to_owned(),
            error,
        })
    }

    /// The key as written.
    pub fn text(&self) -> &str {
        match self {
            Key::Plain(s) | Key::Regex(_, s) => s,
        }
    }

    fn matches(&self, hay: &Haystack<'_>, case_sensitive: bool, whole_words: bool) -> bool {
        match self {
            Key::Regex(r, _) => r.is_match(hay.text),
            Key::Plain(k) if k.is_empty() => false,
            Key::Plain(k) if case_sensitive => find_key(hay.text, k, whole_words),
            Key::Plain(k) => find_key(&hay.lower, &k.to_lowercase(), whole_words),
        }
    }
}

fn short(text: &str) -> String {
    let s: String = text.chars().take(40).collect();
    if s.len() < text.len() {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `key` occurs in `hay` (with word boundaries on both sides when `whole`).
fn find_key(hay: &str, key: &str, whole: bool) -> bool {
    if !whole {
        return hay.contains(key);
    }
    let mut from = 0;
    while let Some(i) = hay[from..].find(key) {
        let start = from + i;
        let end = start + key.len();
        let before = hay[..start].chars().next_back();
        let after = hay[end..].chars().next();
        let key_first = key.chars().next();
        let key_last = key.chars().next_back();
        // A boundary is only needed where the key itself starts/ends with a word character.
        let left_ok = !key_first.is_some_and(is_word) || !before.is_some_and(is_word);
        let right_ok = !key_last.is_some_and(is_word) || !after.is_some_and(is_word);
        if left_ok && right_ok {
            return true;
        }
        from = start + key_first.map_or(1, char::len_utf8);
    }
    false
}

struct Haystack<'a> {
    text: &'a str,
    lower: String,
}

/// One lore entry, normalised.
#[derive(Debug, Clone)]
pub struct LoreEntry {
    /// The book it came from (its name).
    pub book: String,
    /// Its uid within the book.
    pub uid: String,
    /// Its name or comment (for people).
    pub name: String,
    /// Primary keys.
    pub keys: Vec<Key>,
    /// Secondary keys.
    pub secondary_keys: Vec<Key>,
    /// Whether secondary keys apply.
    pub selective: bool,
    /// How secondary keys apply.
    pub logic: Logic,
    /// Active without a key.
    pub constant: bool,
    /// Disabled entries never activate.
    pub enabled: bool,
    /// Priority under the budget (higher is kept first) and position (higher is later).
    pub order: i64,
    /// Chance (0–100) to activate when its keys match.
    pub probability: u32,
    /// Own scan depth (messages).
    pub scan_depth: Option<usize>,
    /// Own case sensitivity (default: insensitive).
    pub case_sensitive: Option<bool>,
    /// Own whole-word matching (default: off).
    pub whole_words: Option<bool>,
    /// The text delivered when active.
    pub content: String,
}

/// A lorebook.
#[derive(Debug, Clone, Default)]
pub struct Lorebook {
    /// Its name.
    pub name: String,
    /// The book's scan depth, when it sets one.
    pub scan_depth: Option<usize>,
    /// The book's token budget, when it sets one.
    pub token_budget: Option<u64>,
    /// Its entries, in the book's order.
    pub entries: Vec<LoreEntry>,
}

/// What one activation looks at.
#[derive(Debug, Clone, Copy)]
pub struct Activation<'a> {
    /// Session id (part of the probability roll).
    pub session: &'a str,
    /// Turn number (part of the probability roll).
    pub turn: u64,
    /// The conversation's message texts, oldest first.
    pub messages: &'a [String],
    /// Scan depth for entries without their own.
    pub scan_depth: usize,
    /// Token budget of the active entries' contents.
    pub budget_tokens: u64,
}

/// An active entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Active {
    /// Its book.
    pub book: String,
    /// Its uid.
    pub uid: String,
    /// Its name or comment.
    pub name: String,
    /// Its order.
    pub order: i64,
    /// Its content.
    pub content: String,
}

fn err(file: &str, what: String) -> CardError {
    CardError::new(file, what)
}

fn get<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| v.get(*n).filter(|x| !x.is_null()))
}

fn string(v: &Value, names: &[&str]) -> String {
    match get(v, names) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn boolean(v: &Value, names: &[&str]) -> Option<bool> {
    get(v, names).and_then(Value::as_bool)
}

fn int(v: &Value, names: &[&str]) -> Option<i64> {
    get(v, names).and_then(|x| {
        x.as_i64()
            .or_else(|| x.as_f64().map(|f| f as i64))
            .or_else(|| x.as_str().and_then(|s| s.trim().parse().ok()))
    })
}

fn keys(file: &str, entry: &str, v: &Value, names: &[&str]) -> Result<Vec<Key>, CardError> {
    let list: Vec<String> = match get(v, names) {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|k| k.as_str())
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    list.iter()
        .map(|k| Key::parse(k).map_err(|e| err(file, format!("lore entry {entry}: {e}"))))
        .collect()
}

impl Lorebook {
    /// The embedded `character_book` of a card (Character Card V2/V3 form: `entries` an array;
    /// SillyTavern's fields under each entry's `extensions`).
    pub fn from_character_book(file: &str, book: &Value) -> Result<Lorebook, CardError> {
        let name = string(book, &["name"]);
        let entries = match book.get("entries") {
            Some(Value::Array(a)) => a.clone(),
            Some(Value::Object(o)) => o.values().cloned().collect(),
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(err(file, "character_book.entries is not a list".into())),
        };
        let mut out = Lorebook {
            name: if name.is_empty() {
                "character_book".into()
            } else {
                name
            },
            scan_depth: int(book, &["scan_depth"]).and_then(|n| usize::try_from(n).ok()),
            token_budget: int(book, &["token_budget"]).and_then(|n| u64::try_from(n).ok()),
            entries: Vec::new(),
        };
        for (i, e) in entries.iter().enumerate() {
            let ext = e.get("extensions").cloned().unwrap_or(Value::Null);
            let uid = match string(e, &["id", "uid"]) {
                s if s.is_empty() => i.to_string(),
                s => s,
            };
            let label = format!("{uid} of {file}");
            let probability = int(&ext, &["probability"]).unwrap_or(100);
            let use_probability = boolean(&ext, &["useProbability"]).unwrap_or(true);
            let entry = LoreEntry {
                book: out.name.clone(),
                uid: uid.clone(),
                name: string(e, &["name", "comment"]),
                keys: keys(file, &label, e, &["keys", "key"])?,
                secondary_keys: keys(file, &label, e, &["secondary_keys", "keysecondary"])?,
                selective: boolean(e, &["selective"]).unwrap_or(true),
                logic: selective_logic(file, &label, int(&ext, &["selectiveLogic"]))?,
                constant: boolean(e, &["constant"]).unwrap_or(false),
                enabled: boolean(e, &["enabled"]).unwrap_or(true),
                order: int(e, &["insertion_order", "order"]).unwrap_or(100),
                probability: if use_probability {
                    probability.clamp(0, 100) as u32
                } else {
                    100
                },
                scan_depth: int(&ext, &["scan_depth"]).and_then(|n| usize::try_from(n).ok()),
                case_sensitive: boolean(e, &["case_sensitive"])
                    .or_else(|| boolean(&ext, &["case_sensitive"])),
                whole_words: boolean(&ext, &["match_whole_words"]),
                content: string(e, &["content"]),
            };
            out.entries.push(entry);
        }
        Ok(out)
    }

    /// A standalone SillyTavern world-info file: `{"entries": {"<uid>": {...}}}`.
    pub fn from_world_info(file: &str, name: &str, v: &Value) -> Result<Lorebook, CardError> {
        let Some(entries) = v.get("entries") else {
            return Err(err(
                file,
                "no `entries`: not a SillyTavern world-info file".into(),
            ));
        };
        let list: Vec<(String, Value)> = match entries {
            Value::Object(o) => o.iter().map(|(k, e)| (k.clone(), e.clone())).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, e)| (i.to_string(), e.clone()))
                .collect(),
            _ => {
                return Err(err(
                    file,
                    "`entries` is neither an object nor a list".into(),
                ));
            }
        };
        let mut out = Lorebook {
            name: name.to_owned(),
            scan_depth: int(v, &["scan_depth", "scanDepth"]).and_then(|n| usize::try_from(n).ok()),
            token_budget: int(v, &["token_budget"]).and_then(|n| u64::try_from(n).ok()),
            entries: Vec::new(),
        };
        for (key, e) in list {
            if !e.is_object() {
                return Err(err(
                    file,
                    format!("world-info entry {key} is not an object"),
                ));
            }
            let uid = match string(&e, &["uid"]) {
                s if s.is_empty() => key,
                s => s,
            };
            let label = format!("{uid} of {file}");
            let use_probability = boolean(&e, &["useProbability"]).unwrap_or(true);
            out.entries.push(LoreEntry {
                book: out.name.clone(),
                uid: uid.clone(),
                name: string(&e, &["comment", "name"]),
                keys: keys(file, &label, &e, &["key", "keys"])?,
                secondary_keys: keys(file, &label, &e, &["keysecondary", "secondary_keys"])?,
                selective: boolean(&e, &["selective"]).unwrap_or(true),
                logic: selective_logic(file, &label, int(&e, &["selectiveLogic"]))?,
                constant: boolean(&e, &["constant"]).unwrap_or(false),
                enabled: !boolean(&e, &["disable"]).unwrap_or(false)
                    && boolean(&e, &["enabled"]).unwrap_or(true),
                order: int(&e, &["order", "insertion_order"]).unwrap_or(100),
                probability: if use_probability {
                    int(&e, &["probability"]).unwrap_or(100).clamp(0, 100) as u32
                } else {
                    100
                },
                scan_depth: int(&e, &["scanDepth", "scan_depth"])
                    .and_then(|n| usize::try_from(n).ok()),
                case_sensitive: boolean(&e, &["caseSensitive", "case_sensitive"]),
                whole_words: boolean(&e, &["matchWholeWords", "match_whole_words"]),
                content: string(&e, &["content"]),
            });
        }
        Ok(out)
    }

    /// A standalone world-info file read from disk (named after its file stem): the user's
    /// own (a link is followed), but a regular file of at most
    /// [`super::card::MAX_CARD_FILE_BYTES`], never a FIFO or device.
    pub fn read_world_info(path: &std::path::Path) -> Result<Lorebook, CardError> {
        let file = path.display().to_string();
        let bytes = keel_tools::beneath::read_user_file(path, super::card::MAX_CARD_FILE_BYTES)
            .map_err(|e| err(&file, format!("cannot read: {}", e.reason())))?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| err(&file, format!("not valid JSON: {e}")))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "world".into());
        Lorebook::from_world_info(&file, &name, &v)
    }

    /// The entries active for `a`, within its budget (see the module's rules).
    pub fn activate(&self, a: &Activation<'_>) -> Vec<Active> {
        activate(self.entries.iter(), a)
    }
}

fn selective_logic(file: &str, entry: &str, n: Option<i64>) -> Result<Logic, CardError> {
    match n {
        None => Ok(Logic::AndAny),
        Some(n) => u64::try_from(n)
            .ok()
            .and_then(Logic::from_number)
            .ok_or_else(|| {
                err(
                    file,
                    format!("lore entry {entry}: selectiveLogic {n} is not 0..=3"),
                )
            }),
    }
}

/// The deterministic roll (0..100) of an entry for a session and turn.
pub fn roll(session: &str, turn: u64, book: &str, uid: &str) -> u32 {
    let mut h = Sha256::new();
    for part in [
        session.as_bytes(),
        &turn.to_be_bytes(),
        book.as_bytes(),
        uid.as_bytes(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    let d = h.finalize();
    let mut n = [0u8; 8];
    n.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(n) % 100) as u32
}

impl LoreEntry {
    /// Whether the entry's keys match `hay` (ignores `constant`, `enabled`, probability).
    fn keys_match(&self, hay: &Haystack<'_>) -> bool {
        let cs = self.case_sensitive.unwrap_or(false);
        let ww = self.whole_words.unwrap_or(false);
        if !self.keys.iter().any(|k| k.matches(hay, cs, ww)) {
            return false;
        }
        if !self.selective || self.secondary_keys.is_empty() {
            return true;
        }
        let hits = self
            .secondary_keys
            .iter()
            .filter(|k| k.matches(hay, cs, ww))
            .count();
        let all = hits == self.secondary_keys.len();
        match self.logic {
            Logic::AndAny => hits > 0,
            Logic::NotAll => !all,
            Logic::NotAny => hits == 0,
            Logic::AndAll => all,
        }
    }

    /// Whether the entry is active for `a` (before the budget).
    pub fn is_active(&self, a: &Activation<'_>) -> bool {
        if !self.enabled {
            return false;
        }
        if !self.constant {
            let depth = self.scan_depth.unwrap_or(a.scan_depth);
            let start = a.messages.len().saturating_sub(depth);
            let text = a.messages[start..].join("\n");
            let hay = Haystack {
                lower: text.to_lowercase(),
                text: &text,
            };
            if !self.keys_match(&hay) {
                return false;
            }
        }
        self.probability >= 100 || roll(a.session, a.turn, &self.book, &self.uid) < self.probability
    }
}

/// Activate `entries` (of one or more books) for `a`: see the module's rules.
pub fn activate<'e>(
    entries: impl Iterator<Item = &'e LoreEntry>,
    a: &Activation<'_>,
) -> Vec<Active> {
    let mut active: Vec<&LoreEntry> = entries.filter(|e| e.is_active(a)).collect();
    active.sort_by(|x, y| {
        y.order
            .cmp(&x.order)
            .then_with(|| x.book.cmp(&y.book))
            .then_with(|| x.uid.cmp(&y.uid))
    });
    let mut spent = 0u64;
    let mut kept = Vec::new();
    for e in active {
        let cost = estimate_tokens(&e.content);
        if spent + cost > a.budget_tokens {
            break;
        }
        spent += cost;
        kept.push(Active {
            book: e.book.clone(),
            uid: e.uid.clone(),
            name: e.name.clone(),
            order: e.order,
            content: e.content.clone(),
        });
    }
    kept.sort_by(|x, y| {
        x.order
            .cmp(&y.order)
            .then_with(|| x.book.cmp(&y.book))
            .then_with(|| x.uid.cmp(&y.uid))
    });
    kept
}
