//! Card import: V2/V3 JSON, PNG `tEXt` chunks (`ccv3` over `chara`), CHARX zip; the malformed
//! cases. Every fixture is built here (PNG with the `png` encoder, zip with the `zip` writer).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use keel_memory::roleplay::{Card, Lorebook, Spec};
use serde_json::{Value, json};
use std::io::{Cursor, Write};

fn v2(name: &str) -> Value {
    json!({
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": "A healer of the glade.",
            "personality": "gentle, wary",
            "scenario": "{{user}} wakes in the glade.",
            "first_mes": "*{{char}} kneels beside you.* You're awake.",
            "mes_example": "",
            "creator_notes": "",
            "system_prompt": "",
            "post_history_instructions": "",
            "alternate_greetings": ["Hello."],
            "tags": ["fantasy"],
            "creator": "someone",
            "character_version": "1",
            "extensions": {"talkativeness": "0.5", "depth_prompt": {"depth": 4, "prompt": "x"}},
            "x_unknown_field": {"kept": true},
            "character_book": {"name": "glade", "entries": [
                {"keys": ["glade"], "content": "The glade is warded.", "enabled": true,
                 "insertion_order": 10, "id": 1, "extensions": {"selectiveLogic": 0}}
            ]}
        },
        "x_top_level": 7
    })
}

fn v3(name: &str) -> Value {
    let mut v = v2(name);
    v["spec"] = json!("chara_card_v3");
    v["spec_version"] = json!("3.0");
    v["data"]["nickname"] = json!("Sera");
    v["data"]["group_only_greetings"] = json!([]);
    v
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(v).unwrap())
}

/// A 2×2 RGBA PNG with `chunks` as tEXt chunks before the image data and `after` after it.
fn png_with(chunks: &[(&str, String)], after: &[(&str, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(Cursor::new(&mut out), 2, 2);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        for (k, t) in chunks {
            enc.add_text_chunk((*k).to_owned(), t.clone()).unwrap();
        }
        let mut w = enc.write_header().unwrap();
        w.write_image_data(&[200u8; 16]).unwrap();
        for (k, t) in after {
            let mut data = k.as_bytes().to_vec();
            data.push(0);
            data.extend_from_slice(t.as_bytes());
            w.write_chunk(png::chunk::ChunkType(*b"tEXt"), &data)
                .unwrap();
        }
        w.finish().unwrap();
    }
    out
}

fn charx_with(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut z = zip::ZipWriter::new(Cursor::new(&mut out));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in files {
            z.start_file(*name, opts).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.finish().unwrap();
    }
    out
}

#[test]
fn v2_json_imports_and_keeps_unknown_keys() {
    let card =
        Card::from_bytes("sera.json", &serde_json::to_vec(&v2("Seraphina")).unwrap()).unwrap();
    assert_eq!(card.spec(), Some(Spec::V2));
    assert_eq!(card.data.name, "Seraphina");
    assert_eq!(card.data.personality, "gentle, wary");
    assert_eq!(card.data.alternate_greetings, ["Hello."]);
    // Round trip: unknown fields and extensions survive serialisation.
    let back = serde_json::to_value(&card).unwrap();
    assert_eq!(back["x_top_level"], json!(7));
    assert_eq!(back["data"]["x_unknown_field"], json!({"kept": true}));
    assert_eq!(
        back["data"]["extensions"]["depth_prompt"]["depth"],
        json!(4)
    );
    assert_eq!(
        back["data"]["character_book"]["entries"][0]["content"],
        "The glade is warded."
    );
    let again = Card::from_value("back", back).unwrap();
    assert_eq!(again, card);
    assert!(card.id().starts_with("seraphina-"), "{}", card.id());
    assert_eq!(card.id(), again.id());
}

#[test]
fn v3_json_imports_with_its_own_fields() {
    let card =
        Card::from_bytes("sera.json", &serde_json::to_vec(&v3("Seraphina")).unwrap()).unwrap();
    assert_eq!(card.spec(), Some(Spec::V3));
    assert_eq!(card.spec_version, "3.0");
    assert_eq!(card.data.extra["nickname"], json!("Sera"));
    let book =
        Lorebook::from_character_book("x", card.data.character_book.as_ref().unwrap()).unwrap();
    assert_eq!(book.entries.len(), 1);
    assert_eq!(book.entries[0].order, 10);
}

#[test]
fn nulls_read_as_empty_fields() {
    let mut v = v2("Nully");
    v["data"]["tags"] = Value::Null;
    v["data"]["mes_example"] = Value::Null;
    let card = Card::from_value("n.json", v).unwrap();
    assert!(card.data.tags.is_empty());
    assert_eq!(card.data.mes_example, "");
}

#[test]
fn png_card_is_read_from_its_text_chunk_and_ccv3_wins_over_chara() {
    let both = png_with(
        &[("chara", b64(&v2("Old Name")))],
        &[("ccv3", b64(&v3("New Name")))],
    );
    let card = Card::from_bytes("both.png", &both).unwrap();
    assert_eq!(card.data.name, "New Name");
    assert_eq!(card.spec(), Some(Spec::V3));

    let only_chara = png_with(&[("chara", b64(&v2("Old Name")))], &[]);
    let card = Card::from_bytes("old.png", &only_chara).unwrap();
    assert_eq!(card.data.name, "Old Name");
    assert_eq!(card.spec(), Some(Spec::V2));
}

#[test]
fn png_file_on_disk_is_detected_by_signature() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.bin");
    std::fs::write(&path, png_with(&[("chara", b64(&v2("Disk")))], &[])).unwrap();
    assert_eq!(Card::read_file(&path).unwrap().data.name, "Disk");
}

#[test]
fn a_card_file_that_is_a_fifo_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("card.png");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let e = Card::read_file(&path).unwrap_err().to_string();
    assert!(e.contains("card.png") && e.contains("a FIFO"), "{e}");
    let e = Lorebook::read_world_info(&path).unwrap_err().to_string();
    assert!(e.contains("card.png") && e.contains("a FIFO"), "{e}");
}

#[test]
fn charx_card_is_read_from_card_json() {
    let z = charx_with(&[
        ("assets/icon/main.png", vec![1, 2, 3]),
        ("card.json", serde_json::to_vec(&v3("Zipped")).unwrap()),
    ]);
    let card = Card::from_bytes("z.charx", &z).unwrap();
    assert_eq!(card.data.name, "Zipped");
}

fn error(file: &str, bytes: &[u8]) -> String {
    Card::from_bytes(file, bytes).unwrap_err().to_string()
}

#[test]
fn bad_base64_in_png_is_a_clear_error() {
    let e = error(
        "bad.png",
        &png_with(&[("ccv3", "!!!not base64!!!".into())], &[]),
    );
    assert!(
        e.contains("bad.png") && e.contains("`ccv3`") && e.contains("base64"),
        "{e}"
    );
}

#[test]
fn truncated_png_is_a_clear_error() {
    let full = png_with(&[], &[("chara", b64(&v2("T")))]);
    for cut in [full.len() - 20, full.len() / 2, 20] {
        let e = error("cut.png", &full[..cut]);
        assert!(e.contains("cut.png") && e.contains("PNG"), "{cut}: {e}");
    }
}

#[test]
fn png_with_a_corrupted_chunk_crc_is_rejected() {
    let mut bytes = png_with(&[], &[("chara", b64(&v2("C")))]);
    // Flip a byte inside the tEXt chunk's text (its CRC no longer matches).
    let at = bytes.windows(4).position(|w| w == b"tEXt").unwrap() + 10;
    bytes[at] ^= 0x01;
    let e = error("crc.png", &bytes);
    assert!(e.contains("crc.png"), "{e}");
}

#[test]
fn png_without_a_card_chunk_is_a_clear_error() {
    let e = error("plain.png", &png_with(&[("Comment", "hi".into())], &[]));
    assert!(e.contains("no `ccv3` or `chara`"), "{e}");
}

#[test]
fn wrong_spec_string_is_rejected() {
    let mut v = v2("W");
    v["spec"] = json!("chara_card_v9");
    let e = error("w.json", &serde_json::to_vec(&v).unwrap());
    assert!(e.contains("w.json") && e.contains("chara_card_v9"), "{e}");
    let e = error("v1.json", br#"{"name":"V1","description":"old"}"#);
    assert!(e.contains("no `spec`"), "{e}");
    let e = error("junk.json", b"{not json");
    assert!(e.contains("not valid JSON"), "{e}");
}

#[test]
fn zip_bomb_ratio_is_rejected() {
    let z = charx_with(&[
        ("card.json", serde_json::to_vec(&v3("Bomb")).unwrap()),
        ("assets/zeros.bin", vec![0u8; 4 * 1024 * 1024]),
    ]);
    let e = error("bomb.charx", &z);
    assert!(e.contains("bomb.charx") && e.contains("zip bomb"), "{e}");
}

#[test]
fn charx_without_card_json_is_rejected() {
    let z = charx_with(&[("other.json", b"{}".to_vec())]);
    let e = error("empty.charx", &z);
    assert!(
        e.contains("empty.charx") && e.contains("no `card.json`"),
        "{e}"
    );
}

#[test]
fn truncated_charx_is_a_clear_error() {
    let z = charx_with(&[("card.json", serde_json::to_vec(&v3("Cut")).unwrap())]);
    let e = error("cut.charx", &z[..z.len() / 2]);
    assert!(e.contains("cut.charx"), "{e}");
}

#[test]
fn hostile_regex_in_an_embedded_book_is_rejected_at_import() {
    let mut v = v2("Hostile");
    v["data"]["character_book"]["entries"][0]["keys"] = json!(["/(a{1000}){1000}/"]);
    let e = error("hostile.json", &serde_json::to_vec(&v).unwrap());
    assert!(e.contains("hostile.json") && e.contains("regex key"), "{e}");
}
