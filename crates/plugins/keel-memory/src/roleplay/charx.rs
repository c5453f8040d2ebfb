//! CHARX: a zip archive with the card at `card.json` (assets beside it are not read).
//!
//! Zip-bomb guard: the archive's declared uncompressed total is capped
//! ([`MAX_TOTAL_UNCOMPRESSED`]), so is any large entry's compression ratio ([`MAX_RATIO`]),
//! and `card.json` is read through a hard byte cap ([`MAX_CARD_JSON_BYTES`]) whatever its
//! header declares.

use super::card::{Card, CardError};
use std::io::{Cursor, Read};

/// The largest `card.json` read, in bytes.
pub const MAX_CARD_JSON_BYTES: u64 = 8 * 1024 * 1024;
/// The largest declared uncompressed size of all entries together, in bytes.
pub const MAX_TOTAL_UNCOMPRESSED: u64 = 256 * 1024 * 1024;
/// The largest compression ratio of an entry over [`RATIO_FLOOR`] bytes uncompressed.
pub const MAX_RATIO: u64 = 100;
/// Entries smaller than this (uncompressed) are not ratio-checked.
pub const RATIO_FLOOR: u64 = 1024 * 1024;
/// The most entries an archive may have.
pub const MAX_ENTRIES: usize = 10_000;

/// The card at `card.json` of a CHARX archive.
pub fn card_from_charx(file: &str, bytes: &[u8]) -> Result<Card, CardError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| CardError::new(file, format!("not a readable CHARX (zip) archive: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(CardError::new(
            file,
            format!("{} entries is over the limit of {MAX_ENTRIES}", zip.len()),
        ));
    }
    let mut total: u64 = 0;
    let mut card_index = None;
    for i in 0..zip.len() {
        let entry = zip
            .by_index_raw(i)
            .map_err(|e| CardError::new(file, format!("zip entry {i}: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| CardError::new(file, format!("zip entry {i}: bad name: {e}")))?
            .into_owned();
        let (size, packed) = (entry.size(), entry.compressed_size());
        total = total.saturating_add(size);
        if total > MAX_TOTAL_UNCOMPRESSED {
            return Err(CardError::new(
                file,
                format!(
                    "zip bomb guard: entries expand to more than {MAX_TOTAL_UNCOMPRESSED} bytes"
                ),
            ));
        }
        if size > RATIO_FLOOR && size / packed.max(1) > MAX_RATIO {
            return Err(CardError::new(
                file,
                format!(
                    "zip bomb guard: entry {name:?} expands {} times ({packed} → {size} bytes; the limit is {MAX_RATIO})",
                    size / packed.max(1)
                ),
            ));
        }
        if name == "card.json" {
            card_index = Some(i);
        }
    }
    let Some(index) = card_index else {
        return Err(CardError::new(
            file,
            "the CHARX archive has no `card.json` at its root",
        ));
    };
    let entry = zip
        .by_index(index)
        .map_err(|e| CardError::new(file, format!("card.json: {e}")))?;
    let mut json = Vec::new();
    entry
        .take(MAX_CARD_JSON_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| CardError::new(file, format!("card.json cannot be inflated: {e}")))?;
    if json.len() as u64 > MAX_CARD_JSON_BYTES {
        return Err(CardError::new(
            file,
            format!("card.json is over the {MAX_CARD_JSON_BYTES}-byte limit"),
        ));
    }
    Card::from_json(file, &json).map_err(|e| CardError::new(file, format!("card.json: {}", e.what)))
}
