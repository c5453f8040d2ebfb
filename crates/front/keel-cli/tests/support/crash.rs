//! What the crash campaigns share (`tests/crash_campaign.rs` for the command line,
//! `tests/serve/crash.rs` for `keel serve`): a long scripted session of tool steps, and the
//! checks after each SIGKILL.

use std::collections::BTreeMap;
use std::path::Path;

/// `n` tool steps; each command records its call id, starts a background child
/// (which lingers after the command) and works for a few milliseconds.
pub fn script_of(n: usize) -> String {
    let mut s = String::from("responses:\n");
    for i in 0..n {
        let work = 5 + (i * 7) % 30;
        s.push_str(&format!(
            "  - tool_calls: [{{ id: c{i}, name: bash, arguments: {{ command: \"echo c{i} >> runs.log; (sleep 2; echo late >> late.log) > /dev/null 2>&1 & sleep 0.0{work:02}\" }} }}]\n"
        ));
    }
    s
}

/// Complete lines of a session file: what a later log must start with.
pub fn complete_prefix(bytes: &[u8]) -> &[u8] {
    match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &[],
    }
}

/// Live (non-zombie) processes whose working directory is under `dir`: (pid, command line).
pub fn processes_in(dir: &Path) -> Vec<(i32, String)> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let in_dir = std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir));
        let zombie = std::fs::read_to_string(p.path().join("stat")).map_or(true, |stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        });
        if in_dir && !zombie {
            let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            out.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
        }
    }
    out
}

/// Call ids that ran more than once.
pub fn reruns(ws: &Path) -> Vec<String> {
    let mut seen = BTreeMap::<String, usize>::new();
    for id in std::fs::read_to_string(ws.join("runs.log"))
        .unwrap_or_default()
        .lines()
    {
        *seen.entry(id.to_owned()).or_default() += 1;
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(id, _)| id)
        .collect()
}
