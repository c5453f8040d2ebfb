//! Explicit control mode end to end: a real agent (host factory, real workspace, real
//! `$KEEL_HOME`, real `bash`) on a scripted model. Each drift hazard runs twice — control on
//! (`control = "contract"`) and off (the default) — and checks the tool body's side effect:
//! with control off it happens, with control on it does not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::InboxMode;
use keel_agent::agent::Agent;
use keel_agent::compaction::{self, CompactionReason};
use keel_protocol::{EventBody, KnownSource, Message, MessageSource, SessionEvent};
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture, events_of};
use serde_json::{Value, json};
use std::path::Path;

const SUMMARY: &str = "  - match: {last_message_contains: \"Context compaction\"}\n    text: \"SUMMARY: a contract was opened.\"\n";

/// What drives the agent.
enum Step {
    /// A human message (a new turn).
    Human(&'static str),
    /// `keel compact` between turns.
    Compact,
    /// A non-human message (a job's notice) starting a turn.
    Notice(&'static str),
}

/// One response per call, each matched on `tag` (the last human message, or for a notice the
/// last message), then a closing text.
fn turn_script(tag: &str, calls: &[(&str, Value)]) -> String {
    let mut s = String::new();
    if tag.starts_with("[N") {
        // A notice is the last message only at the turn's first step: one batch.
        s += &format!("  - match: {{last_message_contains: \"{tag}\"}}\n    tool_calls:\n");
        for (i, (name, args)) in calls.iter().enumerate() {
            s += &format!(
                "      - {{id: c_n_{i}, name: {name}, arguments: {}}}\n",
                serde_json::to_string(args).unwrap()
            );
        }
        return s;
    }
    let key = "last_user_contains";
    for (i, (name, args)) in calls.iter().enumerate() {
        let id = format!("c_{}_{i}", tag.trim_matches(|c| c == '[' || c == ']'));
        s += &format!(
            "  - match: {{{key}: \"{tag}\"}}\n    tool_calls:\n      - {{id: {id}, name: {name}, arguments: {}}}\n",
            serde_json::to_string(args).unwrap()
        );
    }
    s
}

fn script(turns: &[(&str, Vec<(&str, Value)>)]) -> String {
    let mut s = format!("responses:\n{SUMMARY}");
    for (tag, calls) in turns {
        s += &turn_script(tag, calls);
    }
    // Closing texts, matched on anything left (after every call was answered).
    for _ in 0..turns.len() * 2 {
        s += "  - text: \"Done.\"\n";
    }
    s
}

fn fixture(control: bool, script: &str, files: &[(&str, &str)]) -> AgentFixture {
    fixture_with(control, script, files, &[])
}

fn fixture_with(
    control: bool,
    script: &str,
    files: &[(&str, &str)],
    extra: &[&'static str],
) -> AgentFixture {
    let row = if control {
        PluginRow::with("continuity", &json!({"control": "contract"}))
    } else {
        PluginRow::new("continuity")
    };
    let mut plugins = vec![row];
    plugins.extend(extra.iter().map(|id| PluginRow::new(id)));
    agent_fixture(
        script,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            files: files
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect(),
            ..AgentOptions::default()
        },
    )
}

async fn drive(agent: &Agent, steps: &[Step]) {
    for step in steps {
        match step {
            Step::Human(text) => agent.followup(text).unwrap(),
            Step::Compact => {
                compaction::compact_now(agent, CompactionReason::Manual)
                    .await
                    .unwrap();
                continue;
            }
            Step::Notice(text) => {
                let source = MessageSource::Known(KnownSource::Plugin {
                    plugin: "keel/jobs".into(),
                    extra: Default::default(),
                });
                let m = Message::user_text(*text, source, uuid_like(text));
                agent.deliver(m, |_| InboxMode::Followup).unwrap();
            }
        }
        let o = keel_testkit::agent::guarded(agent.run_pending())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(o.reason, keel_protocol::TurnEndReason::Completed, "{o:?}");
    }
}

fn uuid_like(text: &str) -> String {
    format!("notice-{}", text.len())
}

/// Every tool result's text, in order.
fn results(agent: &Agent) -> Vec<String> {
    keel_testkit::agent::tool_results(&events_of(agent))
}

fn read(dir: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(dir.join(rel)).ok()
}

/// Run `steps` with control on and off; returns both fixtures (on, off).
async fn both(
    turns: &[(&str, Vec<(&str, Value)>)],
    files: &[(&str, &str)],
    steps: &[Step],
) -> (AgentFixture, AgentFixture) {
    let s = script(turns);
    let on = fixture(true, &s, files);
    drive(&on.agent, steps).await;
    let off = fixture(false, &s, files);
    drive(&off.agent, steps).await;
    (on, off)
}

fn open(targets: &[&str]) -> (&'static str, Value) {
    (
        "control_open",
        json!({"objective": "keep notes", "acceptance": ["notes.txt says hello"], "targets": targets}),
    )
}

fn authorize(revision: u64) -> (&'static str, Value) {
    (
        "control_checkpoint",
        json!({"revision": revision, "note": "ready", "authorize": {"intent": "write the notes"}}),
    )
}

fn write(path: &str, content: &str) -> (&'static str, Value) {
    ("write", json!({"path": path, "content": content}))
}

fn denied_with(agent: &Agent, needle: &str) {
    let r = results(agent);
    assert!(
        r.iter().any(|t| t.contains("DENIED") && t.contains(needle)),
        "no denial mentioning {needle:?} in {r:#?}"
    );
}

fn control_events(agent: &Agent) -> Vec<SessionEvent> {
    events_of(agent)
        .into_iter()
        .filter(
            |e| matches!(&e.body, EventBody::Other(o) if o.type_name.starts_with("continuity/c")),
        )
        .collect()
}

// ---------------------------------------------------------------------------------------
// Legitimate control: passes in both modes.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_open_authorize_write_runs_in_both_modes() {
    let turns = [(
        "[GO]",
        vec![
            open(&["notes.txt", "src"]),
            authorize(1),
            write("notes.txt", "hello"),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] write the notes")]).await;
    assert_eq!(read(&on.cwd, "notes.txt").as_deref(), Some("hello"));
    assert_eq!(read(&off.cwd, "notes.txt").as_deref(), Some("hello"));
    // The contract is outside the workspace, private, and the authorization was consumed.
    let dir = on.home.path().join("continuity/control");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let c: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(c["revision"], 1);
    assert_eq!(c["targets"], json!(["notes.txt", "src"]));
    assert_eq!(c["authorization"]["used"], true);
    assert_eq!(c["rootSessionId"], on.agent.session_id().to_string());
    // Activation, open, authorize, checkpoint and consume are in the log.
    let kinds: Vec<String> = control_events(&on.agent)
        .iter()
        .map(|e| {
            let EventBody::Other(o) = &e.body else {
                unreachable!()
            };
            format!(
                "{} {}",
                o.type_name,
                o.data
                    .get("action")
                    .or(o.data.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "continuity/control config",
            "continuity/control open",
            "continuity/control authorize",
            "continuity/checkpoint ",
            "continuity/control consume",
            "continuity/control release"
        ]
    );
    // One receipt, for the admitted write, durable before its result was appended.
    let evs = events_of(&on.agent);
    let receipts: Vec<(u64, Value)> = evs
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == "continuity/receipt" => {
                Some((e.seq.0, o.data.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    let (seq, r) = &receipts[0];
    assert_eq!(r["callId"], "c_GO_2");
    assert_eq!(r["tool"], "write");
    assert_eq!(r["authorization"], "auth-1");
    assert_eq!(r["path"], "notes.txt");
    assert_eq!(r["isError"], false);
    assert!(keel_jcs::digest::is_sha256_hex(
        r["digest"].as_str().unwrap()
    ));
    let result_seq = evs
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ToolResult(t) => t
                .message
                .tool_results()
                .next()
                .filter(|b| b.tool_call_id == "c_GO_2")
                .map(|_| e.seq.0),
            _ => None,
        })
        .unwrap();
    assert!(
        *seq < result_seq,
        "receipt {seq} before result {result_seq}"
    );
    // Off: no control events, no contract.
    assert!(control_events(&off.agent).is_empty());
    assert!(!off.home.path().join("continuity/control").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_authorized_bash_runs_in_both_modes() {
    let turns = [(
        "[GO]",
        vec![
            open(&["."]),
            authorize(1),
            ("bash", json!({"command": "echo ran > bash-marker.txt"})),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] run it")]).await;
    assert!(read(&on.cwd, "bash-marker.txt").is_some());
    assert!(read(&off.cwd, "bash-marker.txt").is_some());
}

/// Reading is never guarded: `read` runs before any contract, in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_reads_need_no_authorization_in_both_modes() {
    let turns = [("[GO]", vec![("read", json!({"path": "notes.txt"}))])];
    let files = [("notes.txt", "the notes say hello\n")];
    let (on, off) = both(&turns, &files, &[Step::Human("[GO] read the notes")]).await;
    for f in [&on, &off] {
        let r = results(&f.agent);
        assert!(
            r.iter().any(|t| t.contains("the notes say hello")),
            "{r:#?}"
        );
        assert!(!r.iter().any(|t| t.contains("DENIED")), "{r:#?}");
    }
}

/// An authorized edit of a declared target is applied in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_authorized_edit_inside_the_targets_runs_in_both_modes() {
    let turns = [(
        "[GO]",
        vec![
            ("read", json!({"file_path": "config.ini"})),
            open(&["config.ini"]),
            authorize(1),
            (
                "edit",
                json!({"path": "config.ini", "old_string": "debug = off", "new_string": "debug = on"}),
            ),
        ],
    )];
    let files = [("config.ini", "debug = off\n")];
    let (on, off) = both(&turns, &files, &[Step::Human("[GO] turn debug on")]).await;
    for f in [&on, &off] {
        assert_eq!(read(&f.cwd, "config.ini").as_deref(), Some("debug = on\n"));
    }
}

/// A directory target covers the files under it: an authorized write to `src/lib.rs` with
/// the target `src` runs in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_write_under_a_directory_target_runs_in_both_modes() {
    let turns = [(
        "[GO]",
        vec![
            open(&["src"]),
            authorize(1),
            write("src/lib.rs", "pub fn answer() -> u32 { 42 }\n"),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] add the library")]).await;
    for f in [&on, &off] {
        assert_eq!(
            read(&f.cwd, "src/lib.rs").as_deref(),
            Some("pub fn answer() -> u32 { 42 }\n")
        );
    }
}

// ---------------------------------------------------------------------------------------
// Drift hazards: the body runs with control off, not with control on.

/// (1) The human changed the request after the authorization: the new message is fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_write_after_the_human_changed_the_request() {
    let turns = [
        ("[T1]", vec![open(&["notes.txt"]), authorize(1)]),
        ("[T2]", vec![write("notes.txt", "hello")]),
    ];
    let (on, off) = both(
        &turns,
        &[],
        &[
            Step::Human("[T1] keep notes"),
            Step::Human("[T2] actually, do not touch notes.txt after all"),
        ],
    )
    .await;
    assert_eq!(read(&on.cwd, "notes.txt"), None);
    assert_eq!(read(&off.cwd, "notes.txt").as_deref(), Some("hello"));
    denied_with(
        &on.agent,
        "call control_review_input with revision 1 and input_seq",
    );
}

/// (2) A write outside the declared targets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_write_outside_the_targets() {
    let turns = [(
        "[GO]",
        vec![open(&["src"]), authorize(1), write("secrets.txt", "x")],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] work in src")]).await;
    assert_eq!(read(&on.cwd, "secrets.txt"), None);
    assert!(read(&off.cwd, "secrets.txt").is_some());
    denied_with(&on.agent, "secrets.txt is outside the declared targets");
}

/// (3) A stale authorization: the contract was updated after it was issued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_stale_authorization_after_an_update() {
    let turns = [(
        "[GO]",
        vec![
            open(&["notes.txt"]),
            authorize(1),
            (
                "control_update",
                json!({"revision": 1, "objective": "keep shorter notes", "rationale": "scope cut"}),
            ),
            write("notes.txt", "hello"),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] notes")]).await;
    assert_eq!(read(&on.cwd, "notes.txt"), None);
    assert!(read(&off.cwd, "notes.txt").is_some());
    denied_with(
        &on.agent,
        "auth-1 was issued for revision 1, but the contract is now at revision 2",
    );
}

/// (4) A one-use authorization used twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_reused_authorization() {
    let turns = [(
        "[GO]",
        vec![
            open(&["notes"]),
            authorize(1),
            write("notes/a.txt", "a"),
            write("notes/b.txt", "b"),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] notes")]).await;
    assert_eq!(read(&on.cwd, "notes/a.txt").as_deref(), Some("a"));
    assert_eq!(read(&on.cwd, "notes/b.txt"), None);
    assert!(read(&off.cwd, "notes/b.txt").is_some());
    denied_with(&on.agent, "auth-1 was already used");
}

/// (5) bash without any authorization.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_bash_without_authorization() {
    let turns = [(
        "[GO]",
        vec![
            open(&["."]),
            ("bash", json!({"command": "echo ran > bash-marker.txt"})),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] run")]).await;
    assert_eq!(read(&on.cwd, "bash-marker.txt"), None);
    assert!(read(&off.cwd, "bash-marker.txt").is_some());
    denied_with(
        &on.agent,
        "call control_checkpoint with revision 1 and authorize",
    );
}

/// (6) An edit outside the targets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_edit_outside_the_targets() {
    let turns = [(
        "[GO]",
        vec![
            ("read", json!({"file_path": "config.ini"})),
            open(&["notes.txt"]),
            authorize(1),
            (
                "edit",
                json!({"path": "config.ini", "old_string": "safe", "new_string": "unsafe"}),
            ),
        ],
    )];
    let files = [("config.ini", "mode = safe\n")];
    let (on, off) = both(&turns, &files, &[Step::Human("[GO] notes")]).await;
    assert_eq!(
        read(&on.cwd, "config.ini").as_deref(),
        Some("mode = safe\n")
    );
    assert_eq!(
        read(&off.cwd, "config.ini").as_deref(),
        Some("mode = unsafe\n")
    );
    denied_with(&on.agent, "config.ini is outside the declared targets");
}

/// (7) An authorization issued before a compaction is revoked by it: the model must
/// re-read the contract and authorize again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_write_after_compaction_without_reauthorization() {
    let turns = [
        ("[T1]", vec![open(&["notes.txt"]), authorize(1)]),
        ("[N1]", vec![write("notes.txt", "hello")]),
    ];
    let (on, off) = both(
        &turns,
        &[],
        &[
            Step::Human("[T1] keep notes"),
            Step::Compact,
            Step::Notice("[N1] job finished; continue"),
        ],
    )
    .await;
    assert_eq!(read(&on.cwd, "notes.txt"), None);
    assert!(read(&off.cwd, "notes.txt").is_some());
    denied_with(&on.agent, "auth-1 was revoked (the history was replaced");
}

/// (8) A guarded call before any contract exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_write_without_a_contract() {
    let turns = [("[GO]", vec![write("notes.txt", "hello")])];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] write")]).await;
    assert_eq!(read(&on.cwd, "notes.txt"), None);
    assert!(read(&off.cwd, "notes.txt").is_some());
    denied_with(&on.agent, "no contract is open: call control_open");
}

/// (9) A write that climbs out of a target with `..`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_write_escaping_a_target_with_dotdot() {
    let turns = [(
        "[GO]",
        vec![
            open(&["src"]),
            authorize(1),
            write("src/../build.sh", "rm -rf /"),
        ],
    )];
    let (on, off) = both(&turns, &[], &[Step::Human("[GO] src")]).await;
    assert_eq!(read(&on.cwd, "build.sh"), None);
    assert!(read(&off.cwd, "build.sh").is_some());
    denied_with(&on.agent, "build.sh is outside the declared targets");
}

// ---------------------------------------------------------------------------------------
// Bad input.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_and_stale_revisions_name_the_current_one() {
    let turns = [(
        "[GO]",
        vec![
            open(&["notes.txt"]),
            ("control_checkpoint", json!({"note": "no revision"})),
            (
                "control_update",
                json!({"revision": 7, "objective": "x", "rationale": "r"}),
            ),
            (
                "control_review_input",
                json!({"revision": 1, "input_seq": 999, "outcome": "unchanged", "rationale": "r"}),
            ),
            open(&["other"]),
        ],
    )];
    let s = script(&turns);
    let f = fixture(true, &s, &[]);
    drive(&f.agent, &[Step::Human("[GO] x")]).await;
    let r = results(&f.agent);
    assert!(
        r.iter()
            .any(|t| t.contains("missing revision: the contract is at revision 1")),
        "{r:#?}"
    );
    assert!(
        r.iter()
            .any(|t| t.contains("stale revision 7: the contract is at revision 1")),
        "{r:#?}"
    );
    assert!(
        r.iter().any(|t| t.contains("input_seq 999 is not fenced")),
        "{r:#?}"
    );
    assert!(
        r.iter()
            .any(|t| t.contains("a contract is already open at revision 1")),
        "{r:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_edited_contract_is_refused_naming_the_file() {
    // Turn 1 opens and authorizes; the file is then edited by hand (a target added, its
    // digest recomputed so that the file is self-consistent); turn 2's write is refused.
    let turns = [
        ("[T1]", vec![open(&["notes.txt"]), authorize(1)]),
        (
            "[N1]",
            vec![write("evil.txt", "x"), ("control_status", json!({}))],
        ),
    ];
    let s = script(&turns);
    let f = fixture(true, &s, &[]);
    drive(&f.agent, &[Step::Human("[T1] notes")]).await;
    let dir = f.home.path().join("continuity/control");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut c: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    c["targets"] = json!(["evil.txt", "notes.txt"]);
    c["targetsDigest"] = json!(keel_continuity::control::contract::targets_digest(&[
        "evil.txt".to_string(),
        "notes.txt".to_string()
    ]));
    c["authorization"]["targetsDigest"] = c["targetsDigest"].clone();
    std::fs::write(&file, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
    drive(&f.agent, &[Step::Notice("[N1] go on")]).await;
    assert_eq!(read(&f.cwd, "evil.txt"), None);
    let r = results(&f.agent);
    let name = file.display().to_string();
    assert!(
        r.iter()
            .filter(|t| t.contains(&name) && t.contains("changed outside keel"))
            .count()
            == 2,
        "the guard and control_status both name the file: {r:#?}"
    );
}

#[test]
fn a_corrupt_or_inconsistent_contract_is_refused_naming_the_file() {
    use keel_continuity::control::contract::{ContractStore, targets_digest};
    let home = tempfile::tempdir().unwrap();
    let store = ContractStore::new(home.path());
    let path = store.path("root-1").display().to_string();
    let good = json!({
        "schemaVersion": 1, "rootSessionId": "root-1", "revision": 2, "openedAtSeq": 3,
        "objective": "o", "acceptance": ["a"], "constraints": [], "targets": ["src"],
        "targetsDigest": targets_digest(&["src".to_string()]), "fence": {"pendingInputSeqs": []},
        "authorization": null, "issued": 0, "leases": []
    });
    assert!(
        store
            .parse("root-1", &serde_json::to_vec(&good).unwrap())
            .is_ok()
    );
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"targets": ["src", "etc"]}),
            "is not the digest of its targets",
        ),
        (json!({"schemaVersion": 2}), "schemaVersion 2"),
        (
            json!({"rootSessionId": "other"}),
            "names root session other",
        ),
        (json!({"extra": 1}), "unknown field"),
        (json!({"revision": 0}), "revision 0"),
    ];
    for (patch, needle) in cases {
        let mut v = good.clone();
        for (k, x) in patch.as_object().unwrap() {
            v[k] = x.clone();
        }
        let e = store
            .parse("root-1", &serde_json::to_vec(&v).unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&path) && e.contains(needle), "{e}");
    }
    let e = store.parse("root-1", b"{not json").unwrap_err().to_string();
    assert!(e.contains(&path) && e.contains("not trusted"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_request_mode_activates_on_the_humans_words() {
    let turns = [
        ("[T1]", vec![write("a.txt", "a"), open(&["b.txt"])]),
        ("[T2]", vec![write("c.txt", "c")]),
    ];
    let s = script(&turns);
    let f = agent_fixture(
        &s,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins: vec![PluginRow::with(
                "continuity",
                &json!({"control": "on-request"}),
            )],
            ..AgentOptions::default()
        },
    );
    drive(
        &f.agent,
        &[
            Step::Human("[T1] just write a.txt"),
            Step::Human("[T2] now Use Explicit Control for the rest"),
        ],
    )
    .await;
    // Before the phrase: the schemas are not on the wire, there is no guard, and a control
    // tool called anyway refuses. After it they are.
    let offered = |i: usize| -> Vec<String> {
        f.provider.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| n.starts_with("control_"))
            .collect()
    };
    assert!(offered(0).is_empty(), "{:?}", offered(0));
    let last = f.provider.requests().len() - 1;
    assert_eq!(offered(last).len(), 5, "{:?}", offered(last));
    assert!(read(&f.cwd, "a.txt").is_some());
    let r = results(&f.agent);
    assert!(
        r.iter()
            .any(|t| t.contains("explicit control is not active"))
    );
    // After it: guarded.
    assert_eq!(read(&f.cwd, "c.txt"), None);
    denied_with(&f.agent, "no contract is open");
    let activation = control_events(&f.agent);
    let EventBody::Other(o) = &activation[0].body else {
        unreachable!()
    };
    assert_eq!(o.data["reason"], "task text");
}

/// A human message after the contract is fenced; reviewed as unchanged, the work goes on with
/// a fresh authorization. Passes in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_review_of_an_unchanged_message_then_write_runs_in_both_modes() {
    let t1 = ("[T1]", vec![open(&["notes.txt"]), authorize(1)]);
    let human = [
        Step::Human("[T1] keep notes"),
        Step::Human("[T2] and make it friendly"),
    ];
    let seq = fenced_seq(&t1, &human).await;

    let turns = [
        t1,
        (
            "[T2]",
            vec![
                (
                    "control_review_input",
                    json!({"revision": 1, "input_seq": seq, "outcome": "unchanged", "rationale": "same scope"}),
                ),
                authorize(1),
                write("notes.txt", "hello, friend"),
            ],
        ),
    ];
    let (on, off) = both(&turns, &[], &human).await;
    assert_eq!(read(&on.cwd, "notes.txt").as_deref(), Some("hello, friend"));
    assert_eq!(
        read(&off.cwd, "notes.txt").as_deref(),
        Some("hello, friend")
    );
    let r = results(&on.agent);
    assert!(
        r.iter()
            .any(|t| t.contains(&format!("input_seq {seq} reviewed (unchanged)"))),
        "{r:#?}"
    );
}

/// (10) A subagent's write outside the targets: the guard is global, the child is checked
/// against the same contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_a_subagent_writes_outside_the_targets() {
    let mut s = format!("responses:\n{SUMMARY}");
    s += &turn_script(
        "[T1]",
        &[
            open(&["notes.txt"]),
            authorize(1),
            (
                "subagent",
                json!({"description": "helper", "prompt": "[CHILD] write the helper file"}),
            ),
        ],
    );
    s += &turn_script("[CHILD]", &[write("helper.txt", "x")]);
    for _ in 0..4 {
        s += "  - text: \"Done.\"\n";
    }
    let mut out = Vec::new();
    for control in [true, false] {
        let f = fixture_with(control, &s, &[], &["subagent"]);
        drive(&f.agent, &[Step::Human("[T1] keep notes, with help")]).await;
        out.push(f);
    }
    assert_eq!(read(&out[0].cwd, "helper.txt"), None);
    assert!(read(&out[1].cwd, "helper.txt").is_some());
    // The denial is in the child's own log.
    let f = &out[0];
    let (_, evs) = keel_testkit::agent::child_session_events(f);
    let r = keel_testkit::agent::tool_results(&evs);
    assert!(
        r.iter()
            .any(|t| t.contains("DENIED")
                && t.contains("helper.txt is outside the declared targets")),
        "{r:#?}"
    );
}

/// Build a new agent on the session file at `path` (a cold resume, a new process) with
/// `script`, with the home's configuration (control on).
fn resume(home: &Path, cwd: &Path, path: &Path, script: &str) -> Agent {
    keel_testkit::agent::resume_fixture(home, cwd, path, script, keel_agent::ApprovalPolicy::Allow)
        .0
}

/// The contract and its authorization survive a restart (the resumed process admits the
/// authorized write); a hand edit made while keel was down is still refused, because the
/// digest of what keel last wrote is in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_survives_a_restart_and_a_hand_edit_between_runs_is_refused() {
    let s = script(&[("[T1]", vec![open(&["notes.txt"]), authorize(1)])]);
    let AgentFixture {
        home,
        work: _work,
        cwd,
        agent,
        session_path,
        ..
    } = fixture(true, &s, &[]);
    drive(&agent, &[Step::Human("[T1] keep notes")]).await;
    drop(agent);

    // Process 2: the authorization issued by process 1 admits one write.
    let next = format!(
        "responses:\n{}  - text: \"Done.\"\n",
        turn_script("[N1]", &[write("notes.txt", "hello")])
    );
    let agent = resume(home.path(), &cwd, &session_path, &next);
    drive(&agent, &[Step::Notice("[N1] go on")]).await;
    assert_eq!(read(&cwd, "notes.txt").as_deref(), Some("hello"));
    drop(agent);

    // Between runs: a hand edit that re-issues the authorization, self-consistent.
    let file = std::fs::read_dir(home.path().join("continuity/control"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut c: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(c["authorization"]["used"], true);
    c["authorization"]["used"] = json!(false);
    std::fs::write(&file, serde_json::to_vec_pretty(&c).unwrap()).unwrap();

    // Process 3: refused, naming the file.
    let last = format!(
        "responses:\n{}  - text: \"Done.\"\n",
        turn_script("[N2]", &[write("notes.txt", "again")])
    );
    let agent = resume(home.path(), &cwd, &session_path, &last);
    drive(&agent, &[Step::Notice("[N2] once more")]).await;
    assert_eq!(read(&cwd, "notes.txt").as_deref(), Some("hello"));
    denied_with(&agent, &file.display().to_string());
    denied_with(&agent, "changed outside keel");
}

/// What `--control contract` needs: the continuity row's merged config with `control` set
/// (`with_contract`), the user's other keys kept.
#[test]
fn with_contract_sets_control_and_keeps_the_users_keys() {
    use keel_continuity::{ContinuityConfig, ControlMode, control::with_contract};
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[[plugins]]\nid = \"continuity\"\n[plugins.config]\nbudget_bytes = 4096\n",
    )
    .unwrap();
    let host = keel_host::Host::load(&keel_host::Sources::for_workspace(
        home.path().into(),
        work.path().into(),
    ))
    .unwrap();
    let row = host
        .config()
        .config
        .plugins
        .iter()
        .find(|r| r.id == "continuity")
        .unwrap();
    let value = serde_json::to_value(toml::Value::Table(row.config.clone().unwrap())).unwrap();
    let c: ContinuityConfig =
        keel_agent::plugin::plugin_config(keel_continuity::ID, with_contract(value)).unwrap();
    assert_eq!(c.control, ControlMode::Contract);
    assert_eq!(c.budget_bytes, 4096);
    let c: ContinuityConfig =
        keel_agent::plugin::plugin_config(keel_continuity::ID, with_contract(Value::Null)).unwrap();
    assert_eq!(c.control, ControlMode::Contract);
}

/// The seq of the human message the second step fences. Seqs are deterministic for a script:
/// find it with a run that stops at the fence.
async fn fenced_seq(t1: &(&str, Vec<(&str, Value)>), human: &[Step]) -> u64 {
    let probe = fixture(true, &script(std::slice::from_ref(t1)), &[]);
    drive(&probe.agent, human).await;
    let dir = probe.home.path().join("continuity/control");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let c: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    c["fence"]["pendingInputSeqs"][0].as_u64().unwrap()
}

fn review(seq: u64, outcome: &str) -> (&'static str, Value) {
    (
        "control_review_input",
        json!({"revision": 1, "input_seq": seq, "outcome": outcome, "rationale": "read it"}),
    )
}

/// (11) The model admits the request changed but re-authorizes without recording the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hazard_changed_request_reauthorized_without_an_update() {
    let t1 = ("[T1]", vec![open(&["notes.txt"]), authorize(1)]);
    let human = [
        Step::Human("[T1] keep notes"),
        Step::Human("[T2] no: keep them in a database instead"),
    ];
    let seq = fenced_seq(&t1, &human).await;
    let turns = [
        t1,
        (
            "[T2]",
            vec![
                review(seq, "changed"),
                authorize(1),
                write("notes.txt", "hello"),
            ],
        ),
    ];
    let (on, off) = both(&turns, &[], &human).await;
    assert_eq!(read(&on.cwd, "notes.txt"), None);
    assert!(read(&off.cwd, "notes.txt").is_some());
    let r = results(&on.agent);
    assert!(
        r.iter().any(|t| t.contains(&format!(
            "cannot authorize: human message input_seq {seq} changed the request"
        ))),
        "{r:#?}"
    );
    denied_with(&on.agent, "call control_update with revision 1");
}

/// A changed request recorded with control_update, then re-authorized: passes in both modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legitimate_changed_request_updated_then_write_runs_in_both_modes() {
    let t1 = ("[T1]", vec![open(&["notes.txt"]), authorize(1)]);
    let human = [
        Step::Human("[T1] keep notes"),
        Step::Human("[T2] put them in notes.md instead"),
    ];
    let seq = fenced_seq(&t1, &human).await;
    let turns = [
        t1,
        (
            "[T2]",
            vec![
                review(seq, "changed"),
                (
                    "control_update",
                    json!({"revision": 1, "targets": ["notes.md"], "rationale": "the human moved the notes"}),
                ),
                authorize(2),
                write("notes.md", "hello"),
            ],
        ),
    ];
    let (on, off) = both(&turns, &[], &human).await;
    assert_eq!(read(&on.cwd, "notes.md").as_deref(), Some("hello"));
    assert_eq!(read(&off.cwd, "notes.md").as_deref(), Some("hello"));
}

/// The file is behind the log while a guarded call runs (its admission is logged, the file
/// catches up when the call settles), and after a crash between a logged change and the file
/// write: the next run rolls it forward from what the log carries. (Simulated by putting back
/// the bytes from before the guarded call; the same covers a deliberate revert, which cannot
/// bring back a consumed authorization.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_behind_the_log_is_rolled_forward() {
    let s = script(&[("[T1]", vec![open(&["notes.txt"]), authorize(1)])]);
    let AgentFixture {
        home,
        work: _work,
        cwd,
        agent,
        session_path,
        ..
    } = fixture(true, &s, &[]);
    drive(&agent, &[Step::Human("[T1] keep notes")]).await;
    let file = std::fs::read_dir(home.path().join("continuity/control"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // The authorized write consumes auth-1 (a lease; logged only), and its result releases
    // the lease (logged, made durable, then written).
    let next = format!(
        "responses:\n{}  - text: \"Done.\"\n",
        turn_script("[N1]", &[write("notes.txt", "hello")])
    );
    drop(agent);
    let agent = resume(home.path(), &cwd, &session_path, &next);
    drive(&agent, &[Step::Notice("[N1] go on")]).await;
    assert_eq!(read(&cwd, "notes.txt").as_deref(), Some("hello"));
    let after = std::fs::read(&file).unwrap();
    // The contract before the last change (the release), as the log carries it.
    let logged: Vec<(String, Option<Value>)> = events_of(&agent)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == "continuity/control" => Some((
                o.data.get("action")?.as_str()?.to_owned(),
                o.data.get("contract").cloned(),
            )),
            _ => None,
        })
        .collect();
    let actions: Vec<&str> = logged.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(actions, ["open", "authorize", "consume", "release"]);
    assert!(
        logged[2].1.is_none(),
        "a consume logs the change, not the contract"
    );
    use keel_continuity::control::contract::{Contract, ContractStore};
    let before = ContractStore::new(home.path())
        .bytes_of(&serde_json::from_value::<Contract>(logged[1].1.clone().unwrap()).unwrap())
        .unwrap();
    drop(agent);

    // A crash between the logged release and the file write: the file as it was before the
    // guarded call.
    std::fs::write(&file, &before).unwrap();
    std::fs::remove_file(cwd.join("notes.txt")).unwrap();
    let last = format!(
        "responses:\n{}  - text: \"Done.\"\n",
        turn_script("[N2]", &[write("notes.txt", "again")])
    );
    let agent = resume(home.path(), &cwd, &session_path, &last);
    assert_eq!(std::fs::read(&file).unwrap(), after, "rolled forward");
    drive(&agent, &[Step::Notice("[N2] once more")]).await;
    assert_eq!(read(&cwd, "notes.txt"), None);
    denied_with(&agent, "auth-1 was already used");
}

/// With control on, the five schemas ride on every request, and nothing else changes in the
/// first request; with it off, none is there. The measured wire cost is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_ride_on_requests_only_when_configured() {
    let s = "responses:\n  - text: \"Hi.\"\n";
    let on = fixture(true, s, &[]);
    let off = fixture(false, s, &[]);
    for f in [&on, &off] {
        drive(&f.agent, &[Step::Human("[T1] hello")]).await;
    }
    let names = |f: &AgentFixture| -> Vec<String> {
        f.provider.requests()[0]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .filter(|n| n.starts_with("control_"))
            .collect()
    };
    assert_eq!(
        names(&on),
        [
            "control_open",
            "control_status",
            "control_update",
            "control_checkpoint",
            "control_review_input"
        ]
    );
    assert!(names(&off).is_empty());
    let wire = |r: &keel_llm::ChatRequest| {
        let body = keel_llm::request_body(
            r,
            &keel_llm::ModelCatalogue::default().lookup(r.model.as_str()),
        );
        serde_json::to_string(&body).unwrap()
    };
    let (r_on, r_off) = (
        on.provider.requests()[0].clone(),
        off.provider.requests()[0].clone(),
    );
    let (a, b) = (wire(&r_on).len(), wire(&r_off).len());
    eprintln!(
        "first request: {a} bytes with control, {b} without (+{})",
        a - b
    );
    assert!(a - b <= 3072, "+{} bytes", a - b);
    // Without the five schemas, the bytes are those of control off (the workspace path in the
    // system prompt aside: each fixture has its own).
    let mut stripped = r_on;
    stripped.tools.retain(|t| !t.name.starts_with("control_"));
    let on_text = wire(&stripped).replace(&on.cwd.display().to_string(), "WS");
    let off_text = wire(&r_off).replace(&off.cwd.display().to_string(), "WS");
    assert_eq!(on_text, off_text);
}

// ---------------------------------------------------------------------------------------
// A real SIGKILL during a guarded action.

/// The child process of `a_sigkill_during_a_guarded_action_is_not_repeated`: runs an agent
/// whose authorized `bash` appends to runs.txt, then sleeps until it is killed. Does nothing
/// unless started by that test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of the SIGKILL test"]
async fn crash_child_scenario() {
    let Ok(dir) = std::env::var("KEEL_CRASH_CHILD") else {
        return;
    };
    let control = std::env::var("KEEL_CRASH_CONTROL").as_deref() == Ok("1");
    let s = script(&[(
        "[T1]",
        vec![
            open(&["."]),
            authorize(1),
            (
                "bash",
                json!({"command": "echo start >> runs.txt; sleep 60; echo end >> runs.txt"}),
            ),
        ],
    )]);
    let f = fixture(control, &s, &[]);
    let info = json!({
        "home": f.home.path(),
        "cwd": f.cwd,
        "session": f.session_path,
    });
    std::fs::write(
        Path::new(&dir).join("info.json"),
        serde_json::to_vec(&info).unwrap(),
    )
    .unwrap();
    drive(&f.agent, &[Step::Human("[T1] run the long job")]).await;
    unreachable!("killed during the bash call");
}

/// Kill the child mid-`bash`, resume its session in this process, and let the model try the
/// same action again: returns runs.txt and the resumed agent's tool results.
async fn crash_and_resume(control: bool, resumed: &[(&str, Value)]) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash_child_scenario",
            "--nocapture",
        ])
        .env("KEEL_CRASH_CHILD", dir.path())
        .env("KEEL_CRASH_CONTROL", if control { "1" } else { "0" })
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let info_path = dir.path().join("info.json");
    let started = keel_testkit::agent::guarded(async {
        loop {
            if let Ok(bytes) = std::fs::read(&info_path)
                && let Ok(info) = serde_json::from_slice::<Value>(&bytes)
            {
                let cwd = info["cwd"].as_str().unwrap().to_owned();
                if read(Path::new(&cwd), "runs.txt").is_some() {
                    return info;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let home = Path::new(started["home"].as_str().unwrap()).to_path_buf();
    let cwd = Path::new(started["cwd"].as_str().unwrap()).to_path_buf();
    let session = Path::new(started["session"].as_str().unwrap()).to_path_buf();
    let again = format!(
        "responses:\n{}  - text: \"Done.\"\n",
        turn_script("[N1]", resumed)
    );
    let agent = resume(&home, &cwd, &session, &again);
    drive(&agent, &[Step::Notice("[N1] keel restarted; continue")]).await;
    let runs = read(&cwd, "runs.txt").unwrap();
    let r = results(&agent);
    drop(agent);
    let _ = std::fs::remove_dir_all(&home);
    let _ = std::fs::remove_dir_all(&cwd);
    (runs, r)
}

/// (12) After a SIGKILL in the middle of an authorized `bash`, the resumed session's model
/// runs the same action again: with control off it runs twice; with control on the
/// authorization was consumed durably before the body started, so it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_during_a_guarded_action_is_not_repeated() {
    let again = [rerun()];
    let (runs_on, results_on) = crash_and_resume(true, &again).await;
    let (runs_off, _) = crash_and_resume(false, &again).await;
    eprintln!("after the SIGKILL, control on: {results_on:?}");
    assert_eq!(runs_on, "start\n", "{results_on:#?}");
    assert_eq!(runs_off.matches("start").count(), 2, "{runs_off}");
    assert!(
        results_on.iter().any(|t| t.contains("DENIED")
            && t.contains("admitted with auth-1 never settled")
            && t.contains("indeterminate")),
        "{results_on:#?}"
    );
}

fn rerun() -> (&'static str, Value) {
    (
        "bash",
        json!({"command": "echo start >> runs.txt; echo end >> runs.txt"}),
    )
}

/// After the SIGKILL, the legitimate way on: the model checks, records a checkpoint that
/// accounts for the indeterminate call (its lease is resolved) with a new authorization, and
/// the action runs once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_sigkill_a_checkpoint_resolves_the_indeterminate_lease() {
    let (runs, results) = crash_and_resume(
        true,
        &[
            rerun(),
            (
                "control_checkpoint",
                json!({"revision": 1, "note": "runs.txt shows one start and no end: the job died; run it again", "authorize": {"intent": "re-run the job"}}),
            ),
            rerun(),
        ],
    )
    .await;
    assert_eq!(runs, "start\nstart\nend\n", "{results:#?}");
    assert!(
        results
            .iter()
            .any(|t| t.contains("authorization auth-2 issued")),
        "{results:#?}"
    );
}
