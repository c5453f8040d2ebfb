//! Character cards: Character Card V2 (`chara_card_v2`) and V3 (`chara_card_v3`), read from
//! JSON, from a PNG's `tEXt` chunks or from a CHARX zip, normalised into one [`Card`].
//!
//! The card keeps every field it does not model (`data.extensions`, unknown keys of `data` and
//! of the top level), so writing it back loses nothing.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::Path;

/// The largest card file read (PNG, CHARX or JSON), in bytes.
pub const MAX_CARD_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// A card could not be read: names the file and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("card {file}: {what}")]
pub struct CardError {
    /// The file (or `<inline>`).
    pub file: String,
    /// What is wrong.
    pub what: String,
}

impl CardError {
    pub(crate) fn new(file: &str, what: impl Into<String>) -> Self {
        CardError {
            file: file.to_owned(),
            what: what.into(),
        }
    }
}

/// The two card specs accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spec {
    /// `chara_card_v2`.
    V2,
    /// `chara_card_v3`.
    V3,
}

impl Spec {
    /// The `spec` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Spec::V2 => "chara_card_v2",
            Spec::V3 => "chara_card_v3",
        }
    }
}

/// A character card, V2 or V3, normalised: the fields keel uses are typed, everything else is
/// kept as it came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// `chara_card_v2` or `chara_card_v3`.
    pub spec: String,
    /// `2.0`, `3.0`, … (empty when absent).
    #[serde(default, deserialize_with = "lenient")]
    pub spec_version: String,
    /// The card's data.
    pub data: CardData,
    /// Unknown top-level fields, kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The `data` object of a card.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CardData {
    /// The character's name (`{{char}}`).
    #[serde(default, deserialize_with = "lenient")]
    pub name: String,
    /// Description.
    #[serde(default, deserialize_with = "lenient")]
    pub description: String,
    /// Personality summary.
    #[serde(default, deserialize_with = "lenient")]
    pub personality: String,
    /// The scenario.
    #[serde(default, deserialize_with = "lenient")]
    pub scenario: String,
    /// The greeting: the first assistant message of a new chat.
    #[serde(default, deserialize_with = "lenient")]
    pub first_mes: String,
    /// Example dialogue.
    #[serde(default, deserialize_with = "lenient")]
    pub mes_example: String,
    /// Notes for humans (not sent to the model).
    #[serde(default, deserialize_with = "lenient")]
    pub creator_notes: String,
    /// The card's system prompt (replaces keel's default role-play instructions).
    #[serde(default, deserialize_with = "lenient")]
    pub system_prompt: String,
    /// Instructions meant to follow the history.
    #[serde(default, deserialize_with = "lenient")]
    pub post_history_instructions: String,
    /// Other greetings.
    #[serde(default, deserialize_with = "lenient")]
    pub alternate_greetings: Vec<String>,
    /// Tags.
    #[serde(default, deserialize_with = "lenient")]
    pub tags: Vec<String>,
    /// Creator.
    #[serde(default, deserialize_with = "lenient")]
    pub creator: String,
    /// Version of the character.
    #[serde(default, deserialize_with = "lenient")]
    pub character_version: String,
    /// The embedded lorebook, as it came (parsed by [`crate::roleplay::lore::Lorebook::from_character_book`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub character_book: Option<Value>,
    /// Extensions, kept as they came.
    #[serde(default, deserialize_with = "lenient")]
    pub extensions: Map<String, Value>,
    /// Unknown fields of `data` (V3's `nickname`, `assets`, …), kept.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `null` (or absent) reads as the default.
fn lenient<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

impl Card {
    /// The card's spec.
    pub fn spec(&self) -> Option<Spec> {
        match self.spec.as_str() {
            "chara_card_v2" => Some(Spec::V2),
            "chara_card_v3" => Some(Spec::V3),
            _ => None,
        }
    }

    /// Parse a card from its JSON text; `file` names it in errors.
    pub fn from_json(file: &str, text: &[u8]) -> Result<Card, CardError> {
        let value: Value = serde_json::from_slice(text)
            .map_err(|e| CardError::new(file, format!("not valid JSON: {e}")))?;
        Card::from_value(file, value)
    }

    /// Parse a card from a JSON value; `file` names it in errors.
    pub fn from_value(file: &str, value: Value) -> Result<Card, CardError> {
        let Some(obj) = value.as_object() else {
            return Err(CardError::new(file, "the card is not a JSON object"));
        };
        match obj.get("spec") {
            Some(Value::String(s)) if s == "chara_card_v2" || s == "chara_card_v3" => {}
            Some(Value::String(s)) => {
                return Err(CardError::new(
                    file,
                    format!(
                        "unsupported spec {s:?}: expected \"chara_card_v2\" or \"chara_card_v3\""
                    ),
                ));
            }
            Some(_) => return Err(CardError::new(file, "`spec` is not a string")),
            None => {
                return Err(CardError::new(
                    file,
                    "no `spec` field: not a Character Card V2/V3 (V1 cards are not accepted)",
                ));
            }
        }
        if !obj.get("data").is_some_and(Value::is_object) {
            return Err(CardError::new(file, "no `data` object"));
        }
        let card: Card = serde_json::from_value(value)
            .map_err(|e| CardError::new(file, format!("malformed card: {e}")))?;
        if card.data.name.trim().is_empty() {
            return Err(CardError::new(file, "`data.name` is empty"));
        }
        if let Some(book) = &card.data.character_book {
            crate::roleplay::lore::Lorebook::from_character_book(file, book)?;
        }
        Ok(card)
    }

    /// Read a card file: PNG (by its signature), CHARX zip (by its signature) or JSON. The
    /// user's own file (a link is followed), but a regular file of at most
    /// [`MAX_CARD_FILE_BYTES`]: a FIFO or device is refused, never waited on.
    pub fn read_file(path: &Path) -> Result<Card, CardError> {
        let file = path.display().to_string();
        let bytes = keel_tools::beneath::read_user_file(path, MAX_CARD_FILE_BYTES).map_err(|e| {
            CardError::new(
                &file,
                match e {
                    keel_tools::beneath::BeneathError::TooLarge { size, .. } => format!(
                        "{size} bytes is over the {MAX_CARD_FILE_BYTES}-byte limit for card files"
                    ),
                    e => format!("cannot read: {}", e.reason()),
                },
            )
        })?;
        Card::from_bytes(&file, &bytes)
    }

    /// Parse card bytes of any accepted format; `file` names them in errors.
    pub fn from_bytes(file: &str, bytes: &[u8]) -> Result<Card, CardError> {
        if bytes.starts_with(crate::roleplay::png::SIGNATURE) {
            crate::roleplay::png::card_from_png(file, bytes)
        } else if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
            crate::roleplay::charx::card_from_charx(file, bytes)
        } else {
            Card::from_json(file, bytes)
        }
    }

    /// The card's stable id: a slug of its name and the first 8 hex digits of the SHA-256 of
    /// its normalised JSON (the same card imported twice gets the same id).
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        format!("{}-{}", slug(&self.data.name), hex::encode(&digest[..4]))
    }
}

/// Lower-case letters and digits of `name`, other runs as one `-`, at most 32 bytes.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for ch in name.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 32 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() { "card".into() } else { out }
}

/// Whether `s` is a valid card id (what [`Card::id`] makes: `[a-z0-9-]`, 1..=64 bytes).
pub fn is_card_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}
