//! End-to-end: `keel continuity show [SESSION] [--json]` (the real binary) against sessions
//! written by `keel run`, `keel compact` and `keel resume` with the loopback mock model: the
//! anchors the continuity plugin writes under `$KEEL_HOME/continuity`, the boundary a manual
//! compaction leaves pending, the one projection the next resume delivers, and a corrupt anchor
//! refused with its path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use support::*;

/// `keel continuity show --json [ARGS]`, which must succeed; its output parsed.
fn show_json(env: &Env, args: &[&str]) -> Value {
    let out = run(env
        .keel_bare()
        .args(["continuity", "show", "--json"])
        .args(args));
    assert_eq!(out.code, Some(0), "continuity show stderr:\n{}", out.stderr);
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("continuity show --json is not JSON ({e}):\n{}", out.stdout))
}

/// Seqs of the `user/message` events a human typed.
fn human_seqs(events: &[Value]) -> Vec<u64> {
    of_type(events, "user/message")
        .into_iter()
        .filter(|e| e["data"]["source"]["kind"] == "user")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect()
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// One turn: `keel run PROMPT` answered with `answer`.
fn run_turn(env: &Env, prompt: &str, answer: &str) {
    let mock = Mock::start(&format!("responses:\n  - text: \"{answer}\"\n"));
    let out = run(env.keel(&mock.base_url()).args(["run", prompt]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
}

#[test]
fn a_fresh_session_has_its_prompt_anchored_and_nothing_to_project() {
    let env = Env::new();
    run_turn(&env, "count the apples in the basket", "Seven apples.");
    let session = env.only_session();
    let id = session_id(&session);
    let events = load_consistent(&session);

    let p = show_json(&env, &[]);
    assert_eq!(p["session"], id.as_str());
    assert_eq!(p["root"], id.as_str());
    assert_eq!(p["pending"], Value::Null, "{p:#}");
    assert_eq!(p["delivered"], serde_json::json!([]));
    assert_eq!(p["text"], Value::Null, "{p:#}");
    assert_eq!(p["unanchored"], serde_json::json!([]), "{p:#}");

    // The human message is anchored: its seq and id, with a SHA-256 digest.
    let sources = p["authority"]["sources"].as_array().unwrap();
    let humans = human_seqs(&events);
    assert_eq!(humans.len(), 1, "{events:#?}");
    assert_eq!(sources.len(), 1, "{p:#}");
    assert_eq!(sources[0]["seq"].as_u64(), Some(humans[0]));
    assert_eq!(sources[0]["digest"].as_str().unwrap().len(), 64);
    assert_eq!(p["authority"]["rootSessionId"], id.as_str());

    // The anchor file is private and lives under this KEEL_HOME.
    let path = PathBuf::from(p["authorityPath"].as_str().unwrap());
    let dir = env.home.join("continuity").join("authority");
    assert_eq!(path.parent(), Some(dir.as_path()));
    assert!(path.is_file(), "{} is missing", path.display());
    assert_eq!(mode(&path), 0o600, "{}", path.display());
    assert_eq!(mode(&dir), 0o700, "{}", dir.display());

    // The same session by id prefix, as text.
    let anchor_before = std::fs::read(&path).unwrap();
    let log_before = std::fs::read(&session).unwrap();
    let out = run(env.keel_bare().args(["continuity", "show", &id[..8]]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    for needle in [
        format!("session  {id}"),
        "no boundary pending".to_owned(),
        format!("authority anchor {}", path.display()),
        format!(
            "seq {}  event {}  sha256 {}",
            humans[0],
            sources[0]["eventId"].as_str().unwrap(),
            &sources[0]["digest"].as_str().unwrap()[..12]
        ),
        "Would project now: nothing: every item is still on the surface".to_owned(),
    ] {
        assert!(
            out.stdout.contains(&needle),
            "{needle:?} not in:\n{}",
            out.stdout
        );
    }
    // Read-only: neither the log nor the anchor changed.
    assert_eq!(std::fs::read(&path).unwrap(), anchor_before);
    assert_eq!(std::fs::read(&session).unwrap(), log_before);
}

#[test]
fn a_manual_compaction_leaves_a_resume_boundary_that_the_next_resume_answers_once() {
    let env = Env::new();
    let first_prompt = "paint the garden fence cobalt blue with two coats";
    // A long first answer: a manual compaction keeps at most a quarter of the history, so the
    // first turn (with the runtime context before it) is what gets summarised.
    run_turn(&env, first_prompt, &"The fence is painted. ".repeat(300));
    let second = Mock::start("responses:\n  - text: \"Swept the porch.\"\n");
    let out = run(env
        .keel(&second.base_url())
        .args(["resume", "--last", "now sweep the porch"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let session = env.only_session();
    let id = session_id(&session);

    let summarizer = Mock::start(
        "responses:\n  - match: {last_user_contains: \"Context compaction\"}\n    text: \"SUMMARY: the user had a fence painted.\"\n",
    );
    let out = run(env.keel(&summarizer.base_url()).args(["compact", &id]));
    assert_eq!(out.code, Some(0), "compact stderr:\n{}", out.stderr);
    assert!(out.stdout.contains("summarised seqs"), "{}", out.stdout);
    let events = load_consistent(&session);
    assert_eq!(
        of_type(&events, "continuity/projection").len(),
        0,
        "compact projected: {events:#?}"
    );
    // The replacing summary: the message that replaces the start of the surface.
    let replacing: Vec<&Value> = events
        .iter()
        .filter(|e| e["surfaceOp"]["op"] == "replace")
        .collect();
    assert_eq!(replacing.len(), 1, "{replacing:#?}");
    assert_eq!(ty(replacing[0]), "user/message");
    assert!(
        replacing[0]
            .to_string()
            .contains("SUMMARY: the user had a fence painted."),
        "{}",
        replacing[0]
    );
    let summary_seq = replacing[0]["seq"].as_u64().unwrap();

    let p = show_json(&env, &[]);
    assert_eq!(
        p["pending"],
        serde_json::json!({"kind": "resume", "seq": summary_seq}),
        "{p:#}\n{events:#?}"
    );
    let text = p["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {p:#}"));
    assert!(text.contains(first_prompt), "{text}");
    let out = run(env.keel_bare().args(["continuity", "show"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("pending  resume boundary at seq {summary_seq}"))
            && out
                .stdout
                .contains("Would project now:\nContinuity (resume"),
        "{}",
        out.stdout
    );

    // The plugin's settings come from the layered configuration: a tiny budget digests the
    // items instead of rendering them.
    env.write(
        ".keel/config.toml",
        "[[plugins]]\nid = \"continuity\"\n[plugins.config]\nbudget_bytes = 300\n",
    );
    let tight = show_json(&env, &[]);
    assert!(
        tight["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["omitted"] == true),
        "{tight:#}"
    );
    assert!(
        !tight["text"].as_str().unwrap().contains(first_prompt),
        "{tight:#}"
    );
    std::fs::remove_file(env.ws.join(".keel/config.toml")).unwrap();

    // The next resume delivers the projection: one event, the request carries the first
    // prompt's words.
    let next = Mock::start("responses:\n  - text: \"Next done.\"\n");
    let out = run(env
        .keel(&next.base_url())
        .args(["resume", "--last", "next"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let events = load_consistent(&session);
    let projections = of_type(&events, "continuity/projection");
    assert_eq!(projections.len(), 1, "{projections:#?}");
    assert_eq!(
        projections[0]["data"]["kind"], "resume",
        "{}",
        projections[0]
    );
    assert_eq!(
        projections[0]["data"]["boundarySeq"].as_u64(),
        Some(summary_seq),
        "{}",
        projections[0]
    );
    let requests = next.requests();
    assert_eq!(requests.len(), 1);
    let wire = requests[0]["messages"].to_string();
    assert!(
        wire.contains(first_prompt) && wire.contains("Continuity (resume"),
        "{wire}"
    );
    assert_wire_valid(&requests[0]);

    // Answered: nothing pending, the delivery listed.
    let p = show_json(&env, &[&id]);
    assert_eq!(p["pending"], Value::Null, "{p:#}");
    assert_eq!(
        p["delivered"],
        serde_json::json!([{
            "seq": projections[0]["seq"],
            "boundarySeq": summary_seq,
            "kind": "resume",
        }])
    );

    // The items are still off the surface: shown, but for the next boundary only.
    let out = run(env.keel_bare().args(["continuity", "show"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stdout.contains("no boundary pending")
            && out
                .stdout
                .contains("Would project now (only at the next boundary; none is pending):"),
        "{}",
        out.stdout
    );

    // A second resume projects nothing more.
    let again = Mock::start("responses:\n  - text: \"Again done.\"\n");
    let out = run(env
        .keel(&again.base_url())
        .args(["resume", "--last", "again"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    let events = load_consistent(&session);
    assert_eq!(
        of_type(&events, "continuity/projection").len(),
        1,
        "{events:#?}"
    );
}

#[test]
fn a_corrupt_anchor_is_an_error_naming_the_file() {
    let env = Env::new();
    run_turn(&env, "list the files", "None.");
    let p = show_json(&env, &[]);
    let path = PathBuf::from(p["authorityPath"].as_str().unwrap());
    let anchor = std::fs::read(&path).unwrap();
    std::fs::write(&path, b"\x00not json at all{{").unwrap();

    for json in [false, true] {
        let mut cmd = env.keel_bare();
        cmd.args(["continuity", "show"]);
        if json {
            cmd.arg("--json");
        }
        let out = run(&mut cmd);
        assert_eq!(
            out.code,
            Some(2),
            "stdout:\n{}\nstderr:\n{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stderr.contains(&path.display().to_string()) && out.stderr.contains("not valid"),
            "stderr:\n{}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        assert_eq!(out.stdout, "");
    }
    // Unchanged: showing never rewrites an anchor.
    assert_eq!(std::fs::read(&path).unwrap(), b"\x00not json at all{{");

    // An anchor that disagrees with the log about what the human said: both digests named.
    std::fs::write(&path, &anchor).unwrap();
    let mut forged: Value = serde_json::from_slice(&anchor).unwrap();
    let digest = forged["sources"][0]["digest"].as_str().unwrap().to_owned();
    forged["sources"][0]["digest"] = Value::from("0".repeat(64));
    std::fs::write(&path, serde_json::to_vec(&forged).unwrap()).unwrap();
    let out = run(env.keel_bare().args(["continuity", "show"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.contains(&path.display().to_string())
            && out.stderr.contains(&"0".repeat(64))
            && out.stderr.contains(&digest),
        "stderr:\n{}",
        out.stderr
    );

    // A session that does not exist is named.
    let out = run(env
        .keel_bare()
        .args(["continuity", "show", "no-such-session"]));
    assert_eq!(out.code, Some(2), "stderr:\n{}", out.stderr);
    assert!(out.stderr.contains("no-such-session"), "{}", out.stderr);
}

/// The real binary against the loopback mock: with continuity on (the default) and off, a
/// multi-step session that crosses no boundary sends the same request bodies, byte for byte,
/// and writes nothing into the workspace.
#[test]
fn requests_are_byte_identical_with_continuity_on_and_off() {
    let script = r#"
responses:
  - text: "Planning."
    tool_calls:
      - { id: t1, name: todo_write, arguments: { todos: [ { content: "read notes", status: in_progress } ] } }
  - text: "Reading."
    tool_calls:
      - { id: r1, name: read, arguments: { path: notes.txt } }
  - text: "notes.txt says hello."
"#;
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let off = env.root().join("off.toml");
    std::fs::write(&off, "[[plugins]]\nid = \"continuity\"\nenabled = false\n").unwrap();
    let off = off.display().to_string();
    let listing = || {
        let mut v: Vec<String> = std::fs::read_dir(env.root().join("ws"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let before = listing();
    let mut bodies = Vec::new();
    for extra in [vec![], vec!["--config", off.as_str()]] {
        let mock = Mock::start_tapped(script);
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(extra)
            .args(["--approval", "auto", "run", "what do the notes say?"]);
        let out = run(&mut cmd);
        assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
        assert_eq!(out.stdout, "notes.txt says hello.\n");
        bodies.push(mock.raw_requests());
    }
    assert_eq!(bodies[0].len(), 3);
    assert_eq!(
        bodies[0], bodies[1],
        "request bodies differ with continuity on and off"
    );
    assert_eq!(listing(), before, "nothing written in the workspace");
    // On: the prompt was anchored (under $KEEL_HOME, not the workspace).
    assert!(env.root().join("home/continuity/authority").is_dir());
}

/// `keel run --control contract`: the control tools are offered, and a write before any
/// contract is refused with what to do next, with a project row that configures continuity
/// (the flag edits that row's config; `with_contract` keeps its other keys, unit-tested).
#[test]
fn control_contract_from_the_command_line_guards_writes() {
    let script = r#"
responses:
  - text: "Writing."
    tool_calls:
      - { id: w1, name: write, arguments: { path: out.txt, content: "x" } }
  - text: "Refused, as expected."
"#;
    let env = Env::new();
    std::fs::create_dir_all(env.root().join("ws/.keel")).unwrap();
    std::fs::write(
        env.root().join("ws/.keel/config.toml"),
        "[[plugins]]\nid = \"continuity\"\n[plugins.config]\nbudget_bytes = 300\n",
    )
    .unwrap();
    let mock = Mock::start(script);
    let out = run(env.keel(&mock.base_url()).args([
        "--control",
        "contract",
        "--approval",
        "auto",
        "run",
        "write out.txt",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(!env.root().join("ws/out.txt").exists(), "the write ran");
    let reqs = mock.requests();
    let tools: Vec<String> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    for t in [
        "control_open",
        "control_status",
        "control_update",
        "control_checkpoint",
        "control_review_input",
    ] {
        assert!(tools.iter().any(|n| n == t), "{t} missing from {tools:?}");
    }
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].2, "the write is an error result: {results:?}");
    assert!(results[0].1.contains("control_open"), "{results:?}");
    // And without the flag: no control tools.
    let mock = Mock::start("responses:\n  - text: \"ok\"\n");
    let out = run(env.keel(&mock.base_url()).args(["run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let body = serde_json::to_string(&mock.requests()[0]).unwrap();
    assert!(!body.contains("control_open"));
}

/// An open goal whose round prompt a compaction summarised away is re-projected at the next
/// boundary, with its id, revision, status and round.
#[test]
fn an_open_goal_is_projected_once_its_round_prompt_is_compacted_away() {
    let env = Env::new();
    let first = Mock::start(&format!(
        "responses:\n  - tool_calls: [{{ id: p1, name: update_goal, arguments: {{ goal_id: g1, revision: 1, action: pause }} }}]\n  - text: \"{}\"\n",
        "The fence is painted. ".repeat(300)
    ));
    let out = run(env
        .keel(&first.base_url())
        .args(["run", "--goal", "repaint the garden fence"]));
    assert!(
        out.stderr
            .contains("goal g1 paused: the goal is not complete"),
        "{}",
        out.stderr
    );
    let second = Mock::start("responses:\n  - text: \"Swept the porch.\"\n");
    let out = run(env
        .keel(&second.base_url())
        .args(["resume", "--last", "now sweep the porch"]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    // Before the compaction the round prompt is on the surface: nothing to project.
    let before = show_json(&env, &[]);
    assert!(
        !before["text"].to_string().contains("The session's goal"),
        "{before:#}"
    );
    let id = session_id(&env.only_session());
    let summarizer = Mock::start(
        "responses:\n  - match: {last_user_contains: \"Context compaction\"}\n    text: \"SUMMARY: a fence.\"\n",
    );
    let out = run(env.keel(&summarizer.base_url()).args(["compact", &id]));
    assert_eq!(out.code, Some(0), "compact stderr:\n{}", out.stderr);
    let p = show_json(&env, &[]);
    let text = p["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {p:#}"));
    assert!(
        text.contains("## The session's goal (goal g1, revision 2, paused, round 1 of 256;")
            && text.contains("repaint the garden fence"),
        "{text}"
    );
}
