//! Configuration layers ([`keel_host::config`]): a TOML layer parsed and validated on its own
//! ([`keel_host::config::layer_from_text`], what every config file goes through), `-c
//! key=value` overrides ([`keel_host::config::override_layer`] / `override_table`), the merge
//! over the defaults layer ([`keel_host::config::merge_layers`]) and `keel config dump`.
//!
//! Input: UTF-8 text; lines starting with `-c ` are override flags (the rest of the line is the
//! spec), every other line belongs to the TOML layer. Checked: nothing panics; a merge of
//! layers that each validated yields a dump that is valid TOML-ish text (no panic in dump).
#![no_main]

use keel_host::config::{self, Layer};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static DEFAULTS: LazyLock<Layer> = LazyLock::new(|| {
    let plugins = keel_host::catalogue::builtin();
    config::layer_from_text("defaults", &config::defaults_text(&plugins))
        .expect("the defaults layer is valid")
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut toml_text = String::new();
    let mut specs = Vec::new();
    for line in text.split_inclusive('\n') {
        match line.strip_prefix("-c ") {
            Some(spec) => specs.push(spec.trim_end_matches(['\n', '\r'])),
            None => toml_text.push_str(line),
        }
    }
    let mut layers = vec![DEFAULTS.clone()];
    if let Ok(layer) = config::layer_from_text("fuzz.toml", &toml_text) {
        layers.push(layer);
    }
    for spec in specs {
        let _ = config::override_table(spec);
        if let Ok(layer) = config::override_layer(spec) {
            layers.push(layer);
        }
    }
    if let Ok(loaded) = config::merge_layers(&layers) {
        let _ = config::dump(&loaded);
        let _ = loaded.layer_index("fuzz.toml");
    }
});
