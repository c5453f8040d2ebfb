//! `keel config dump`: the merged configuration as TOML, each key with the layer that set it.

use super::*;

impl Loaded {
    /// The layers that set keys under `prefix` (`mcp_servers.NAME.`), in merge order.
    pub fn layers_setting(&self, prefix: &str) -> Vec<String> {
        let mut layers: Vec<String> = Vec::new();
        for (key, layer) in &self.origin {
            if key.starts_with(prefix) && !layers.contains(layer) {
                layers.push(layer.clone());
            }
        }
        layers.sort_by_key(|l| self.layer_index(l));
        layers
    }
}

/// Render the merged configuration as `key = value  # layer` lines.
pub fn dump(loaded: &Loaded) -> String {
    let mut out = String::new();
    dump_table(&loaded.table, "", &loaded.origin, &mut out);
    out
}

fn dump_table(table: &Table, prefix: &str, origin: &BTreeMap<String, String>, out: &mut String) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Table(t) => dump_table(t, &path, origin, out),
            Value::Array(rows) if path == "plugins" => {
                for row in rows {
                    let id = row.get("id").and_then(Value::as_str).unwrap_or_default();
                    let layer = origin
                        .get(&format!("plugins[{id}]"))
                        .map(String::as_str)
                        .unwrap_or("?");
                    out.push_str(&format!("plugins[{id}] = {}  # {layer}\n", inline(row)));
                }
            }
            other => {
                let layer = origin.get(&path).map(String::as_str).unwrap_or("?");
                out.push_str(&format!("{path} = {}  # {layer}\n", inline(other)));
            }
        }
    }
}

fn inline(value: &Value) -> String {
    match value {
        Value::Table(t) => {
            let parts: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        Value::Array(a) => format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}
