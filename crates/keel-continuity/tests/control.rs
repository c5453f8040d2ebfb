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
    let row = if control {
        PluginRow::with("continuity", &json!({"control": "contract"}))
    } else {
        PluginRow::new("continuity")
    };
    agent_fixture(
        script,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Auto,
            plugins: vec![row],
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
            "continuity/control consume"
        ]
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
            approval: keel_agent::ApprovalPolicy::Auto,
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
    // Before the phrase: no guard, and control tools refuse.
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
