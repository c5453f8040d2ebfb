//! End to end: a real session made by the real `keel` binary against the loopback mock model
//! (plan mode, a file read whose text is hostile markup, a todo list, an approved plan carried
//! out, a manual compaction, a run killed mid-tool and resumed), exported with
//! `keel sessions export ID --format html`, opened in headless Chromium: the DOM the browser
//! built holds every turn, tool call and marker of the log, the hostile text as text, and each
//! tool result's formation graph with the nodes `keel trace --format json` lists; a screenshot
//! is a real PNG. `keel trace --format svg` draws the nodes and edges of `--format dot`.
//!
//! Chromium is Debian's `chromium` package (`.ci/run` installs it). Set
//! `KEEL_VIEWER_SCREENSHOT=/some/file.png` to keep the screenshot.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use support::{Env, Mock, of_type, run, session_id, spawn};

/// Text of `notes.txt`: markup that must never become elements.
const HOSTILE: &str =
    "</script><script>document.title='pwned'</script><img src=x onerror=alert(1)>";

fn chromium() -> &'static str {
    "chromium"
}

/// Whether Chromium is installed. Under CI (`CI` set) it must be; elsewhere the browser test is
/// skipped with a note, as the terminal tests are without tmux.
fn have_chromium() -> bool {
    let found = Command::new(chromium())
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "headless Chromium is needed by the viewer test: apt-get install -y chromium \
             (.ci/run installs it)"
        );
        eprintln!("skipping: chromium is not installed (apt-get install -y chromium)");
    }
    found
}

/// Run Chromium headless on `page` with `args` and a fresh profile; its stdout.
fn browse(env: &Env, page: &Path, args: &[&str]) -> String {
    let profile = tempfile::tempdir_in(env.root()).unwrap();
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn keel_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert_eq!(
        out.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// The session: four processes and a compaction (see the module docs). Returns its id.
fn make_session(env: &Env) -> String {
    env.write("notes.txt", &format!("first line\n{HOSTILE}\n"));
    // 1. Plan mode: read, keep a todo list, hand in a plan (the run ends there).
    let mock = Mock::start(
        r#"
- reasoning: "The notes first. <b>not bold</b>"
  text: "Reading the notes."
  tool_calls:
    - { id: r_notes, name: read, arguments: { path: notes.txt } }
    - id: t_todo
      name: todo_write
      arguments:
        todos:
          - { content: "read the notes", status: completed }
          - { content: "check the <parser>", status: in_progress, activeForm: "checking the parser" }
          - { content: "report", status: pending }
  usage: { prompt: 1200, completion: 40, cache_hit: 900 }
- tool_calls:
    - { id: c_plan, name: exit_plan_mode, arguments: { plan: "1. echo a check\n2. report" } }
  usage: { prompt: 1500, completion: 20, cache_hit: 1200 }
"#,
    );
    keel_ok(env.keel(&mock.base_url()).args([
        "--provenance",
        "run",
        "--plan",
        "read the notes and plan a check",
    ]));
    let id = session_id(&env.only_session());
    // 2. The plan approved and carried out; a long answer, so compaction has history to cut.
    let answer = "The check passed and the notes have two lines. ".repeat(60);
    let mock = Mock::start(&format!(
        r#"
- tool_calls: [ {{ id: b_echo, name: bash, arguments: {{ command: "echo checked" }} }} ]
  usage: {{ prompt: 1700, completion: 15, cache_hit: 1600 }}
- text: "{answer}"
  usage: {{ prompt: 1800, completion: 700, cache_hit: 1700 }}
"#
    ));
    keel_ok(env.keel(&mock.base_url()).args([
        "--provenance",
        "--approval",
        "auto",
        "resume",
        &id,
        "--approve-plan",
    ]));
    // 3. A manual compaction.
    let summarizer = Mock::start(
        "responses:\n  - match: {last_user_contains: \"Context compaction\"}\n    text: \"SUMMARY: notes read, check passed.\"\n",
    );
    keel_ok(env.keel(&summarizer.base_url()).args(["compact", &id]));
    // 4. A slow command, killed mid-tool.
    let mock = Mock::start(
        r#"
- tool_calls: [ { id: b_slow, name: bash, arguments: { command: "touch started && sleep 60" } } ]
"#,
    );
    let running = spawn(env.keel(&mock.base_url()).args([
        "--provenance",
        "--approval",
        "auto",
        "resume",
        &id,
        "now run the slow check",
    ]));
    let deadline = std::time::Instant::now() + support::HANG_GUARD;
    while !env.ws.join("started").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the slow tool never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.signal(libc::SIGKILL);
    assert_eq!(running.wait().code, None, "killed by the signal");
    // 5. Resumed: crash repair, then one more turn.
    let mock = Mock::start("- text: \"The slow check was interrupted; nothing else ran.\"\n");
    keel_ok(
        env.keel(&mock.base_url())
            .args(["--provenance", "resume", &id, "what happened?"]),
    );
    id
}

/// The value of attribute `name` in the start tag text `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(
        tag[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&"),
    )
}

/// Start tags `<NAME …>` of `html` whose text contains `with`.
fn tags<'a>(html: &'a str, name: &str, with: &str) -> Vec<&'a str> {
    html.split(&format!("<{name} "))
        .skip(1)
        .map(|p| &p[..p.find('>').unwrap_or(p.len())])
        .filter(|t| t.contains(with))
        .collect()
}

type Graph = (BTreeSet<String>, BTreeSet<(String, String, String)>);

/// Nodes and edges drawn in an SVG fragment.
fn svg_graph(svg: &str) -> Graph {
    let nodes = tags(svg, "g", "class=\"node")
        .iter()
        .map(|t| attr(t, "data-id").unwrap())
        .collect();
    let edges = tags(svg, "g", "class=\"edge\"")
        .iter()
        .map(|t| {
            (
                attr(t, "data-from").unwrap(),
                attr(t, "data-to").unwrap(),
                attr(t, "data-kind").unwrap(),
            )
        })
        .collect();
    (nodes, edges)
}

/// Nodes and edges of `keel trace --format json`.
fn json_graph(answer: &Value) -> Graph {
    let nodes = answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap().to_owned())
        .collect();
    let edges = answer["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_owned();
            (s("from"), s("to"), s("kind"))
        })
        .collect();
    (nodes, edges)
}

/// Nodes and edges of `keel trace --format dot`.
fn dot_graph(dot: &str) -> Graph {
    let (mut nodes, mut edges) = (BTreeSet::new(), BTreeSet::new());
    for line in dot.lines().map(str::trim).filter(|l| l.starts_with('"')) {
        let q: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        if line.contains("\" -> \"") {
            edges.insert((q[0].to_owned(), q[1].to_owned(), q[2].to_owned()));
        } else {
            nodes.insert(q[0].to_owned());
        }
    }
    (nodes, edges)
}

/// The target and the part of `dom` inside the provenance `<details>` of the call `call`.
fn graph_of<'a>(dom: &'a str, call: &str) -> (String, &'a str) {
    let key = format!("data-call-id=\"{call}\"");
    let start = dom.find(&key).unwrap_or_else(|| panic!("no call {call}"));
    let end = dom[start..].find("</details>\n</div>").unwrap() + start;
    let part = &dom[start..end];
    let at = part
        .find("<details class=\"provenance\"")
        .unwrap_or_else(|| panic!("no formation graph for {call}:\n{part}"));
    let graph = &part[at..];
    let tag = &graph[..graph.find('>').unwrap()];
    (attr(tag, "data-target").unwrap(), graph)
}

#[test]
fn an_exported_session_opens_in_a_browser_with_every_turn_call_marker_and_graph() {
    if !have_chromium() {
        return;
    }
    let env = Env::new();
    let id = make_session(&env);
    let events = support::load_consistent(&env.only_session());

    let page = env.root().join("s.html");
    let html = keel_ok(
        env.keel_bare()
            .args(["sessions", "export", &id, "--format", "html"]),
    );
    std::fs::write(&page, &html).unwrap();
    let dom = browse(&env, &page, &["--dump-dom"]);
    assert!(dom.contains("<main>"), "not the page:\n{dom}");

    // Every turn of the log, and how it ended.
    let turns: Vec<u64> = of_type(&events, "turn/start")
        .iter()
        .map(|e| e["data"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(
        turns.len(),
        4,
        "plan, approved plan, killed, after the resume"
    );
    let ends: Vec<String> = of_type(&events, "turn/end")
        .iter()
        .map(|e| e["data"]["reason"].to_string())
        .collect();
    for n in &turns {
        assert!(
            dom.contains(&format!("id=\"turn-{n}\" data-turn=\"{n}\"")),
            "turn {n}"
        );
    }
    let sections = tags(&dom, "section", "class=\"turn\"");
    assert_eq!(sections.len(), turns.len(), "{ends:?}");
    // Every step of the log, with its usage and cache-hit share where the model reported one.
    for e in of_type(&events, "step/start") {
        let (t, s) = (&e["data"]["turn"], &e["data"]["step"]);
        assert!(
            dom.contains(&format!("data-step=\"{t}.{s}\"")),
            "step {t}.{s}"
        );
    }
    assert!(
        dom.contains("data-prompt=\"1200\" data-cached=\"900\""),
        "usage of step 1.1"
    );
    assert!(dom.contains("75% cache hit"), "900 of 1200 prompt tokens");
    // Every tool call of the log, expandable, with its arguments and result.
    let calls: Vec<String> = of_type(&events, "tool/call")
        .iter()
        .map(|e| e["data"]["callId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls, ["r_notes", "t_todo", "c_plan", "b_echo", "b_slow"]);
    for call in &calls {
        let t = tags(&dom, "details", &format!("data-call-id=\"{call}\""));
        assert_eq!(t.len(), 1, "tool call {call}");
    }
    assert!(dom.contains("checked\n"), "the echo's output");
    assert!(
        tags(&dom, "details", "data-call-id=\"b_slow\"")[0].contains("class=\"tool error\""),
        "the killed call's repaired result is an error"
    );
    // The markers: plan mode on and approved, the todo list, the compaction and its summary,
    // the interrupted turn, and the user's words.
    for marker in [
        "data-marker=\"plan\" data-active=\"true\"",
        "data-marker=\"plan\" data-active=\"false\"",
        "data-marker=\"todo\"",
        "data-marker=\"compaction\" data-phase=\"start\"",
        "data-marker=\"compaction\" data-phase=\"end\"",
        "data-marker=\"compaction-summary\"",
        "data-marker=\"interrupted\"",
        "SUMMARY: notes read, check passed.",
        "compacted → #",
        "read the notes and plan a check",
        "now run the slow check",
        "what happened?",
        "The slow check was interrupted; nothing else ran.",
        "checking the parser",
        "1. echo a check\n2. report",
    ] {
        assert!(dom.contains(marker), "missing {marker:?}");
    }
    assert_eq!(
        dom.matches("data-marker=\"interrupted\"").count(),
        ends.iter().filter(|r| r.contains("interrupted")).count()
    );

    // The hostile file text is text: no element came of it, in the page or in the browser.
    assert!(!html.contains("<img"), "the export has an img element");
    assert!(!dom.contains("<img"), "the browser built an img element");
    assert!(
        !dom.contains("<script"),
        "the browser holds a script element"
    );
    assert!(dom.contains("<title>keel session "), "the page's own title");
    assert!(
        dom.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "shown as text"
    );
    assert!(
        dom.contains("&lt;b&gt;not bold&lt;/b&gt;"),
        "reasoning markup as text"
    );

    // Each tool result's graph: the nodes and edges of `keel trace`, in every format. The
    // killed call's result was written by crash repair, not settled by the pipeline: the
    // journal has no result for it, and the page says so.
    for call in calls.iter().filter(|c| *c != "b_slow") {
        let (target, graph) = graph_of(&dom, call);
        assert_eq!(target, format!("result:{call}"));
        let trace = |format: &str| {
            keel_ok(
                env.keel_bare()
                    .args(["trace", &target, "--session", &id, "--format", format]),
            )
        };
        let answer: Value = serde_json::from_str(&trace("json")).unwrap();
        let expected = json_graph(&answer);
        assert!(expected.0.len() > 3, "{call}: {answer:#}");
        assert_eq!(svg_graph(graph), expected, "{call}: page vs json");
        let svg = trace("svg");
        assert!(svg.starts_with("<?xml"), "{svg}");
        assert_eq!(svg_graph(&svg), expected, "{call}: svg vs json");
        assert_eq!(dot_graph(&trace("dot")), expected, "{call}: dot vs json");
    }
    let slow = tags(&dom, "div", "class=\"note provenance-missing\"");
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert_eq!(attr(slow[0], "data-target").unwrap(), "result:b_slow");

    // With no budget for graphs, each result names the command that draws its graph.
    let lean = keel_ok(env.keel_bare().args([
        "sessions",
        "export",
        &id,
        "--format",
        "html",
        "--graph-budget",
        "0",
    ]));
    assert!(!lean.contains("<svg"), "no graph embedded");
    let omitted = tags(&lean, "div", "class=\"note graph-omitted\"");
    assert_eq!(omitted.len(), calls.len() - 1, "every settled result");
    assert!(lean.contains(&format!(
        "keel trace result:r_notes --session {id} --format svg</code>"
    )));
    assert!(
        lean.contains("4 left out over the page's budget of 0 KiB"),
        "the footer says so"
    );

    // A screenshot of the page: a real PNG of the window's size.
    let shot = env.root().join("s.png");
    browse(
        &env,
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000",
            "--hide-scrollbars",
        ],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.len() > 10_000, "{} bytes", png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    assert_eq!(&png[12..16], b"IHDR");
    let (w, h) = (
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        u32::from_be_bytes(png[20..24].try_into().unwrap()),
    );
    assert_eq!((w, h), (1280, 2000));
    if let Some(keep) = std::env::var_os("KEEL_VIEWER_SCREENSHOT") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::copy(&shot, &keep).unwrap();
        std::fs::copy(&page, keep.with_extension("html")).unwrap();
    }
}
