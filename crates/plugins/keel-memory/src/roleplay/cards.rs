//! The card store: normalised cards as `$KEEL_HOME/cards/<id>.json`.

use super::card::{Card, CardError, is_card_id};
use std::path::{Path, PathBuf};

/// `$KEEL_HOME/cards`.
pub fn cards_dir(keel_home: &Path) -> PathBuf {
    keel_home.join("cards")
}

/// Where card `id` is stored.
pub fn card_path(keel_home: &Path, id: &str) -> PathBuf {
    cards_dir(keel_home).join(format!("{id}.json"))
}

/// Store `card` (normalised JSON, written to a temporary file then renamed); returns its id.
pub fn save(keel_home: &Path, card: &Card) -> Result<String, CardError> {
    let id = card.id();
    let dir = cards_dir(keel_home);
    let path = card_path(keel_home, &id);
    let file = path.display().to_string();
    std::fs::create_dir_all(&dir)
        .map_err(|e| CardError::new(&dir.display().to_string(), format!("cannot create: {e}")))?;
    let json = serde_json::to_vec_pretty(card)
        .map_err(|e| CardError::new(&file, format!("cannot serialise: {e}")))?;
    let tmp = dir.join(format!(".{id}.json.tmp"));
    std::fs::write(&tmp, json).map_err(|e| CardError::new(&file, format!("cannot write: {e}")))?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| CardError::new(&file, format!("cannot write: {e}")))?;
    Ok(id)
}

/// Import a card file (JSON, PNG or CHARX) into the store; returns the card and its id.
pub fn import(keel_home: &Path, file: &Path) -> Result<(Card, String), CardError> {
    let card = Card::read_file(file)?;
    let id = save(keel_home, &card)?;
    Ok((card, id))
}

/// Load stored card `id`.
pub fn load(keel_home: &Path, id: &str) -> Result<Card, CardError> {
    if !is_card_id(id) {
        return Err(CardError::new(
            id,
            "not a card id (ids are lower-case letters, digits and `-`; see `keel cards list`)",
        ));
    }
    let path = card_path(keel_home, id);
    if !path.exists() {
        return Err(CardError::new(
            &path.display().to_string(),
            format!("no card with id {id:?} (import it with `keel cards import FILE`)"),
        ));
    }
    Card::read_file(&path)
}

/// A card named by id (in the store) or by the path of a card file (read, not stored).
pub fn resolve(keel_home: &Path, id_or_path: &str) -> Result<Card, CardError> {
    if is_card_id(id_or_path) && card_path(keel_home, id_or_path).exists() {
        return load(keel_home, id_or_path);
    }
    let path = Path::new(id_or_path);
    if path.is_file() {
        return Card::read_file(path);
    }
    load(keel_home, id_or_path)
}

/// Stored cards: (id, name, spec), sorted by id. Unreadable files are listed with their error
/// as the name.
pub fn list(keel_home: &Path) -> Vec<(String, String, String)> {
    let Ok(dir) = std::fs::read_dir(cards_dir(keel_home)) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, String)> = dir
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".json")?.to_owned();
            if name.starts_with('.') {
                return None;
            }
            Some(match Card::read_file(&e.path()) {
                Ok(c) => (id, c.data.name.clone(), c.spec.clone()),
                Err(err) => (id, format!("(unreadable: {})", err.what), String::new()),
            })
        })
        .collect();
    out.sort();
    out
}
