//! Cards inside PNG images: a `tEXt` chunk `ccv3` (V3) or `chara` (V2) whose text is the
//! base64 of the card's JSON. `ccv3` wins when both are present. Chunks are read with the
//! `png` crate (CRC checked), before or after the image data; the pixels are not decoded.

use super::card::{Card, CardError};
use base64::Engine;
use std::io::Cursor;

/// The PNG file signature.
pub const SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// The decoder's memory limit for one image.
const DECODE_LIMIT_BYTES: usize = 64 * 1024 * 1024;

/// The card in a PNG's `ccv3` (preferred) or `chara` `tEXt` chunk.
pub fn card_from_png(file: &str, bytes: &[u8]) -> Result<Card, CardError> {
    let limits = png::Limits {
        bytes: DECODE_LIMIT_BYTES,
    };
    let decoder = png::Decoder::new_with_limits(Cursor::new(bytes), limits);
    let mut reader = decoder
        .read_info()
        .map_err(|e| CardError::new(file, format!("not a readable PNG: {e}")))?;
    reader.finish().map_err(|e| {
        CardError::new(
            file,
            format!("the PNG is truncated or corrupt after its header: {e}"),
        )
    })?;
    let texts = &reader.info().uncompressed_latin1_text;
    let find = |key: &str| {
        texts
            .iter()
            .find(|t| t.keyword.eq_ignore_ascii_case(key))
            .map(|t| t.text.as_str())
    };
    let (chunk, text) = match (find("ccv3"), find("chara")) {
        (Some(t), _) => ("ccv3", t),
        (None, Some(t)) => ("chara", t),
        (None, None) => {
            return Err(CardError::new(
                file,
                "the PNG has no `ccv3` or `chara` tEXt chunk: it carries no character card",
            ));
        }
    };
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let json = base64::engine::general_purpose::STANDARD
        .decode(compact.as_bytes())
        .map_err(|e| {
            CardError::new(
                file,
                format!("the `{chunk}` tEXt chunk is not valid base64: {e}"),
            )
        })?;
    Card::from_json(file, &json)
        .map_err(|e| CardError::new(file, format!("`{chunk}` chunk: {}", e.what)))
}
