//! The web app in a real browser: `web/app_test.py` (Playwright, pinned in
//! `web/requirements.txt`, installed by `.ci/run` into `web/.venv`) drives Debian's Chromium
//! against a real `keel serve` and the loopback mock model: without the token the page gets no
//! data; with it, a session is created in a workspace, a prompt's answer streams in, an
//! escalated `bash` call is approved in the dialog and its card shows the output, two tabs on
//! the session stay in step, a page reloaded mid-turn goes on with the stream, an `edit` shows
//! as a diff, a rewind from a message takes its turn out of the conversation and the file back,
//! a fork from another opens the fork, and search finds the first session by a word; in an
//! undecided workspace the page asks whether to trust it and the server records the answer. This side then checks the
//! server's log for what the browser did. Screenshots go to `web/artifacts/`. Without
//! Playwright or Chromium the test is skipped, except under CI, where it fails.

use crate::client::{Server, events_of, wait_idle};
use crate::support::{Env, Mock};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCRIPT: &str = r###"
responses:
  - match: { last_user_contains: "say hello" }
    text: "Hello from the browser."
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel", sandbox_permissions: danger-full-access, justification: "the check reads outside the workspace" } }
  - match: { last_user_contains: "run the check" }
    text: "The check ran."
  - match: { last_user_contains: "from the second tab" }
    text: "Answered in both tabs."
  - match: { last_user_contains: "take your time" }
    behaviour: stall
    stall_ms: 3000
    text: "Slow but complete."
  - match: { last_user_contains: "fix the notes" }
    tool_calls:
      - { id: r1, name: read, arguments: { path: notes.txt } }
  - match: { last_user_contains: "fix the notes" }
    tool_calls:
      - { id: e1, name: edit, arguments: { file_path: notes.txt, old_string: "hello", new_string: "hello, world" } }
  - match: { last_user_contains: "fix the notes" }
    text: "Edited."
  - match: { last_user_contains: "plan the work" }
    tool_calls:
      - { id: t1, name: todo_write, arguments: { todos: [ { content: "Write the test", status: in_progress }, { content: "Fix the bug", status: pending } ] } }
  - match: { last_user_contains: "plan the work" }
    tool_calls:
      - { id: p1, name: exit_plan_mode, arguments: { plan: "1. Write the **test**\n2. Fix the bug" } }
  - match: { last_user_contains: "plan the work" }
    text: "Plan approved."
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, header: Language, question: "Which language?", options: [ { label: Rust, description: "fast" }, { label: Go } ] }
            - { id: name, question: "What is the project called?" }
  - match: { last_tool_result_contains: "The user answered" }
    text: "Setting up now."
  - match: { last_user_contains: "look at this" }
    text: "A small dot."
  - match: { last_user_contains: "dump the big output" }
    tool_calls:
      - { id: big1, name: bash, arguments: { command: "printf 'BIGOUTPUT-PLACEHOLDER\\nEND-OF-BIG\\n'" } }
  - match: { last_user_contains: "dump the big output" }
    text: "Dumped."
  - match: { last_user_contains: "show markdown" }
    text: "## The plan\n\n1. First *step*\n2. Read [the docs](https://example.com/docs), not [this](javascript:alert(1))\n   - a nested point\n\n| name | size |\n|------|-----:|\n| keel | 2 |\n\n```rust\nfn main() { let x = \"s\"; } // done\n```\n\n> quoted **words**"
  - match: { last_user_contains: "count the files please" }
    text: "There are 3 files."
  - match: { last_tool_result_contains: "There are 3 files" }
    text: "The subagent counted."
  - match: { last_user_contains: "delegate this" }
    tool_calls:
      - { id: s1, name: subagent, arguments: { description: "count files", prompt: "count the files please" } }
  - match: { last_user_contains: "tidy the notes" }
    behaviour: stall
    stall_ms: 3000
    text: "Tidying."
  - match: { last_user_contains: "run the scheduled check" }
    text: "Scheduled check done."
  - text: "Summary: the user said hello and planned the work."
"###;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/web")
}

/// The venv's Python and the browser, when both are there.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let python = dir().join(".venv/bin/python");
    let chromium = std::env::var_os("KEEL_TEST_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    (python.exists() && chromium.exists()).then_some((python, chromium))
}

/// Run `app_test.py SCENARIO` against `server`: what it printed (JSON).
fn browse(
    scenario: &str,
    server: &Server,
    env: &Env,
    artifacts: &Path,
    python: &Path,
    chromium: &Path,
) -> Value {
    browse_url(scenario, &server.url, env, artifacts, python, chromium)
}

/// [`browse`] from `url`.
fn browse_url(
    scenario: &str,
    url: &str,
    env: &Env,
    artifacts: &Path,
    python: &Path,
    chromium: &Path,
) -> Value {
    let out = Command::new(python)
        .arg(dir().join("app_test.py"))
        .arg(scenario)
        .arg(url)
        .arg(&env.ws)
        .arg(artifacts)
        .env("KEEL_TEST_CHROMIUM", chromium)
        .env("HOME", env.root())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}\n{stdout}");
    serde_json::from_str(stdout.trim()).unwrap()
}

/// [`tools`], or `None` and the test skipped; under CI a missing tool fails the test.
#[allow(clippy::print_stderr)] // says why a test was skipped
fn browser() -> Option<(PathBuf, PathBuf)> {
    let found = tools();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Playwright (tests/serve/web/.venv) or Chromium is missing: .ci/run installs them"
        );
        eprintln!("skipped: Playwright (tests/serve/web/.venv) or /usr/bin/chromium is missing");
    }
    found
}

#[test]
fn the_web_app_creates_a_session_streams_approves_and_stays_in_step_across_tabs() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    // keel's defaults (workspace-write, ask): the edit runs, the escalated command is asked.
    // The model reads images (for the one sent with a message).
    let server = Server::start_with(&env, &mock, &["-c", "models.deepseek-v4-flash.vision=true"]);
    let artifacts = dir().join("artifacts");
    // This run's screenshots only.
    let _ = std::fs::remove_dir_all(&artifacts);
    let shown = browse("main", &server, &env, &artifacts, &python, &chromium);
    let id = shown["session"].as_str().unwrap();
    wait_idle(&server, id);

    // The server's log holds what the browser did: in the workspace it named, the prompts of
    // both tabs, the approvals it gave, the command's output, the rewind.
    let events = events_of(&env, id);
    let of = |ty: &str| -> Vec<&Value> { events.iter().filter(|e| e["type"] == ty).collect() };
    assert_eq!(
        prompts(&events),
        [
            "say hello",
            "run the check",
            "from the second tab",
            "take your time",
            "fix the notes",
            "ask me",
            "look at this"
        ]
    );
    // The questions answered in the form: the model got both answers.
    let answered = mock.requests().iter().any(|r| {
        let text = r.to_string();
        text.contains("The user answered") && text.contains("Go") && text.contains("keelweb")
    });
    assert!(answered, "the model never got the form's answers");
    // The image sent with "look at this" reached the model (once: the refused one never left).
    let with_image: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| r.to_string().contains("look at this"))
        .collect();
    assert!(
        with_image
            .iter()
            .any(|r| r.to_string().contains("data:image/png;base64,iVBOR")),
        "no image in {with_image:?}"
    );
    // The attachment route serves only names keel writes, that hold the image they say.
    for name in [
        "..%2Fconfig.toml",
        "serve.json",
        &format!("{}.png", "0".repeat(64)),
    ] {
        let refused = server.call("GET", &format!("/api/v1/attachments/{name}"), None);
        assert_eq!(refused.status, 404, "{name}: {}", refused.body);
    }
    // The thumb given in the page: one rating of the first answer, up.
    let rated = of("feedback/rated");
    assert_eq!(rated.len(), 1, "{rated:?}");
    assert_eq!(rated[0]["data"]["rating"], "up");
    let rated_seq = rated[0]["data"]["seq"].as_u64().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["seq"] == rated_seq && e["type"] == "assistant/message")
    );
    let decided = of("approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], true);
    assert!(
        of("tool/result")
            .iter()
            .any(|e| e.to_string().contains("checked-by-keel")),
        "the approved command ran"
    );
    assert_eq!(of("surface/rewind").len(), 1, "one rewind");
    assert_eq!(
        env.read("notes.txt"),
        "hello\n",
        "the rewind restored the file"
    );
    // The fork: seeded with the first session's log up to before "run the check".
    let fork = events_of(&env, shown["fork"].as_str().unwrap());
    assert!(fork.iter().any(|e| e["type"] == "session/end-seed"));
    assert_eq!(prompts(&fork), ["say hello"]);
    assert_screenshots(&artifacts, &["answer", "approval", "session", "search"]);
}

/// The person's prompts in `events`, in order.
fn prompts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "user")
        .map(|e| {
            e["data"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[test]
fn the_web_app_asks_whether_to_trust_an_undecided_workspace_and_the_server_records_it() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::untrusted();
    let hook = serde_json::json!({"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
        "command": "true"}]}]}});
    env.write(".claude/settings.json", &hook.to_string());
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let artifacts = env.root().join("artifacts");
    browse("trust", &server, &env, &artifacts, &python, &chromium);
    let cwd = env.ws.to_str().unwrap().replace('/', "%2F");
    let trust = server.call("GET", &format!("/api/v1/trust?cwd={cwd}"), None);
    assert_eq!(trust.json()["level"], "trusted", "{}", trust.body);
}

#[test]
fn keel_web_starts_a_server_once_and_opens_the_browser_on_a_new_session_form_for_the_directory() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    // A browser that notes the URL it is given.
    let browser = env.root().join("browser.sh");
    let opened = env.root().join("opened.txt");
    std::fs::write(
        &browser,
        format!("#!/bin/sh\nprintf '%s\\n' \"$1\" >> {}\n", opened.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &browser,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let web = || {
        let out = env
            .keel(&mock.base_url())
            .args(["web", "--listen", "127.0.0.1:0"])
            .env("BROWSER", &browser)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        stdout
            .trim()
            .strip_prefix("keel web: ")
            .unwrap_or_else(|| panic!("{stdout}"))
            .to_owned()
    };
    let first = web();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home.join("serve.json")).unwrap())
            .unwrap();
    let pid = saved["pid"].as_i64().unwrap() as i32;
    let stop = Stop(pid);
    let token = saved["token"].as_str().unwrap();
    let ws = env.ws.canonicalize().unwrap();
    assert_eq!(
        first,
        format!(
            "{}#/new?cwd={}",
            saved["url"].as_str().unwrap(),
            ws.display()
        )
    );
    assert!(first.contains(&format!("?token={token}")));
    // The server answers, and is not the terminal's: its own process group.
    let addr: std::net::SocketAddr = first
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let auth = format!("Bearer {token}");
    let listed = crate::client::request(
        addr,
        "GET",
        "/api/v1/sessions",
        &[("Authorization", &auth), ("Host", &addr.to_string())],
        None,
    );
    assert_eq!(listed.status, 200, "{}", listed.body);
    // SAFETY: getpgid(2) only reads.
    assert_eq!(unsafe { libc::getpgid(pid) }, pid, "its own process group");
    // Run again: the same server, opened again.
    assert_eq!(web(), first);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&opened)
        .unwrap_or_default()
        .lines()
        .count()
        < 2
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the browser was not opened twice"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let urls = std::fs::read_to_string(&opened).unwrap();
    assert!(urls.lines().all(|u| u == first), "{urls}");
    // The page the browser gets: the new-session form, for the directory.
    if let Some((python, chromium)) = tools() {
        let artifacts = env.root().join("artifacts");
        let shown = browse_url("open", &first, &env, &artifacts, &python, &chromium);
        let id = shown["session"].as_str().unwrap();
        let state = crate::client::request(
            addr,
            "GET",
            &format!("/api/v1/sessions/{id}"),
            &[("Authorization", &auth), ("Host", &addr.to_string())],
            None,
        );
        let state = state.json();
        assert_eq!(state["cwd"], ws.to_str().unwrap(), "{state}");
        assert_eq!(state["model"], "deepseek-v4-pro", "{state}");
        // Read-only, then plan mode, left by the plan approved in the page.
        let events = events_of(&env, id);
        let modes: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "sandbox/mode")
            .collect();
        assert!(
            modes.iter().any(|e| e["data"]["mode"] == "read-only"),
            "{modes:?}"
        );
        let plans: Vec<&Value> = events.iter().filter(|e| e["type"] == "plan/mode").collect();
        assert!(
            plans.iter().any(|e| e["data"]["approved"] == true),
            "the plan approved: {plans:?}"
        );
        assert!(
            events.iter().any(|e| e["type"] == "compaction/end"),
            "/compact ran on the server"
        );
        // The model asked under the name picked in the page.
        let asked = mock.requests();
        assert_eq!(asked.last().unwrap()["model"], "deepseek-v4-pro");
    }
    drop(stop);
}

/// SIGTERMs the server `keel web` started when the test ends, and waits for it.
struct Stop(i32);

impl Drop for Stop {
    fn drop(&mut self) {
        // SAFETY: kill(2) of the server this test started.
        unsafe { libc::kill(self.0, libc::SIGTERM) };
        for _ in 0..200 {
            // SAFETY: kill(2) with signal 0 only checks for existence.
            if unsafe { libc::kill(self.0, 0) } != 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

#[test]
fn a_damaged_session_log_is_named_in_the_page_and_the_app_goes_on() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "say hello");
    wait_idle(&server, &id);
    // A stored session whose third line is not a record, with whole records after it (not a
    // torn tail, which a load would leave out).
    let dir = env.home.join("sessions/--damaged--/session-damaged");
    std::fs::create_dir_all(&dir).unwrap();
    let ws = serde_json::to_string(&env.ws).unwrap();
    std::fs::write(
        dir.join("session.jsonl"),
        format!(
            "{{\"type\":\"session\",\"version\":0,\"id\":\"session-damaged\",\"createdAt\":1,\"cwd\":{ws}}}\n\
             {{\"type\":\"turn/start\",\"seq\":0,\"time\":2,\"data\":{{\"turn\":1}}}}\n\
             {{\"type\":\"turn/end\",\"seq\":GARBAGE\n\
             {{\"type\":\"turn/start\",\"seq\":1,\"time\":4,\"data\":{{\"turn\":2}}}}\n\
             {{\"type\":\"turn/end\",\"seq\":2,\"time\":5,\"data\":{{\"turn\":2,\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
        ),
    )
    .unwrap();
    let artifacts = env.root().join("artifacts");
    browse("damaged", &server, &env, &artifacts, &python, &chromium);
    // Nothing of it was changed by looking.
    let text = std::fs::read_to_string(dir.join("session.jsonl")).unwrap();
    assert!(text.contains("GARBAGE"));
}

#[test]
fn the_web_app_draws_a_formation_graph_caps_a_5_mb_output_and_names_a_server_restart() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let mock = Mock::start(SCRIPT);
    let mut server = Server::start_with(&env, &mock, &["--provenance"]);
    let notes = server.create(&env.ws, "fix the notes");
    wait_idle(&server, &notes);
    let markdown = server.create(&env.ws, "show markdown");
    wait_idle(&server, &markdown);
    let delegated = server.create(&env.ws, "delegate this");
    wait_idle(&server, &delegated);
    // A session whose bash output is 5 MB in its log (as an older keel, or a tool that does not
    // spill, would leave it): a real log, copied under a new id with the output blown up.
    let small = server.create(&env.ws, "dump the big output");
    wait_idle(&server, &small);
    let log = session_log(&env, &small);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("BIGOUTPUT-PLACEHOLDER"), "{text}");
    let huge = text
        .replace(&small, "session-huge")
        .replace("dump the big output", "the huge one")
        .replace("BIGOUTPUT-PLACEHOLDER", &"x".repeat(5 << 20));
    let dir = log.parent().unwrap().with_file_name("session-huge");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("session.jsonl"), huge).unwrap();

    let artifacts = env.root().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let page = Command::new(&python)
        .arg(self::dir().join("app_test.py"))
        .args(["rough", &server.url])
        .arg(&env.ws)
        .arg(&artifacts)
        .env("KEEL_TEST_CHROMIUM", &chromium)
        .env("HOME", env.root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The page is up on the first session: the server restarts on its port, with a new token.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !artifacts.join("ready").exists() {
        if std::time::Instant::now() > deadline {
            let out = page.wait_with_output().unwrap();
            panic!(
                "the page never got ready:\n{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let port = server.addr.port();
    assert!(server.stop().success());
    let again = Server::start_on(&env, &mock, &format!("127.0.0.1:{port}"), &["--provenance"]);
    assert_ne!(again.token, server.token);
    std::fs::write(artifacts.join("restarted"), &again.url).unwrap();
    let out = page.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    // The graph the page showed is the server's, and nothing in the stored logs changed.
    let graph = again.call(
        "GET",
        &format!("/api/v1/sessions/{notes}/provenance?call=r1"),
        None,
    );
    assert_eq!(graph.status, 200, "{}", graph.body);
    assert!(graph.body.contains("<svg"), "{}", graph.body);
    let none = again.call(
        "GET",
        &format!("/api/v1/sessions/{notes}/provenance?call=nope"),
        None,
    );
    assert_eq!(none.status, 404, "{}", none.body);
    assert_eq!(none.json()["error"]["code"], "no_graph");
    assert!(
        std::fs::read_to_string(dir.join("session.jsonl"))
            .unwrap()
            .contains("END-OF-BIG")
    );
    keep_screenshots(
        &artifacts,
        &["provenance", "markdown", "trajectory", "stale"],
    );
}

/// The screenshots `shots` in `artifacts` are PNG images.
fn assert_screenshots(artifacts: &Path, shots: &[&str]) {
    for shot in shots {
        let png = artifacts.join(format!("{shot}.png"));
        let bytes = std::fs::read(&png).unwrap_or_default();
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is no screenshot",
            png.display()
        );
    }
}

/// The screenshots `shots` of a test's own `artifacts` ([`assert_screenshots`]), copied beside
/// the other tests' (`web/artifacts/`).
fn keep_screenshots(artifacts: &Path, shots: &[&str]) {
    assert_screenshots(artifacts, shots);
    let kept = dir().join("artifacts");
    let _ = std::fs::create_dir_all(&kept);
    for shot in shots {
        let name = format!("{shot}.png");
        let _ = std::fs::copy(artifacts.join(&name), kept.join(name));
    }
}

/// The log file of session `id` under `env`'s home.
fn session_log(env: &Env, id: &str) -> PathBuf {
    env.session_files()
        .into_iter()
        .find(|p| p.ends_with(format!("{id}/session.jsonl")))
        .unwrap_or_else(|| panic!("no log of {id}"))
}

#[test]
fn the_plugins_page_switches_provenance_on_and_an_mcp_server_off_for_the_workspace_alone() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::new();
    env.write("notes.txt", "hello\n");
    let config = env.home.join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(
        &config,
        format!("{before}\n[mcp_servers.docs]\ncommand = \"docs-server-that-is-not-installed\"\n"),
    )
    .unwrap();
    let skill = env.home.join("skills/tidy");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tidy\ndescription: Tidy the notes.\n---\nTidy them.\n",
    )
    .unwrap();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let artifacts = env.root().join("artifacts");
    let shown = browse("plugins", &server, &env, &artifacts, &python, &chromium);
    let id = shown["session"].as_str().unwrap();
    wait_idle(&server, id);
    // Recorded in the user's configuration for this workspace, nothing in the repository.
    let text = std::fs::read_to_string(&config).unwrap();
    let root = env.ws.canonicalize().unwrap();
    assert!(
        text.contains(&format!("[projects.\"{}\"]", root.display())),
        "{text}"
    );
    assert!(text.contains("provenance = true"), "{text}");
    assert!(text.contains("docs = false"), "{text}");
    assert!(!env.ws.join(".keel").exists());
    // The session recorded provenance and never started the server switched off.
    assert!(
        env.home
            .join("provenance")
            .join(id)
            .join("receipts.jsonl")
            .is_file()
    );
    let events = events_of(&env, id);
    assert!(
        !events.iter().any(|e| e.to_string().contains("docs-server")),
        "the switched-off server was started"
    );
    // The API says the same; another workspace keeps the defaults.
    let cwd = root.to_str().unwrap().replace('/', "%2F");
    let listed = server
        .call("GET", &format!("/api/v1/plugins?cwd={cwd}"), None)
        .json();
    let row = |rows: &Value, name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(row(&listed["plugins"], "provenance")["enabled"], true);
    assert_eq!(row(&listed["mcpServers"], "docs")["enabled"], false);
    // Named by the layers that set it, as `keel mcp list` names them: the file, then the switch.
    let layer = row(&listed["mcpServers"], "docs")["layer"].to_string();
    assert!(
        layer.contains(&config.display().to_string()) && layer.contains("[projects."),
        "{layer}"
    );
    let other = env.root().join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.to_str().unwrap().replace('/', "%2F");
    let elsewhere = server
        .call("GET", &format!("/api/v1/plugins?cwd={other}"), None)
        .json();
    assert_eq!(row(&elsewhere["plugins"], "provenance")["enabled"], false);
    // A row nobody defines is not recorded.
    let refused = server.call(
        "POST",
        "/api/v1/plugins",
        Some(&serde_json::json!({"cwd": root, "kind": "plugin", "name": "nope", "enabled": true})),
    );
    assert_eq!(refused.status, 404, "{}", refused.body);
    keep_screenshots(&artifacts, &["plugins", "settings"]);
}

#[test]
fn the_automation_page_makes_and_deletes_schedules_and_a_one_shot_fires_into_its_session() {
    let Some((python, chromium)) = browser() else {
        return;
    };
    let env = Env::new();
    let config = env.home.join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap_or_default();
    std::fs::write(
        &config,
        format!("{before}\n[[plugins]]\nid = \"schedule\"\nenabled = true\n"),
    )
    .unwrap();
    let mock = Mock::start(SCRIPT);
    let server = Server::start(&env, &mock);
    let id = server.create(&env.ws, "say hello");
    wait_idle(&server, &id);
    let artifacts = env.root().join("artifacts");
    browse("automation", &server, &env, &artifacts, &python, &chromium);
    wait_idle(&server, &id);
    // The log has what the page did: two schedules made, one deleted, the other fired.
    let events = events_of(&env, &id);
    let of = |ty: &str| events.iter().filter(|e| e["type"] == ty).count();
    assert_eq!(of("schedule/created"), 2);
    assert_eq!(of("schedule/deleted"), 1);
    assert_eq!(of("schedule/fired"), 1);
    // The goal set, paused and cleared from its bar: one round ran.
    let goals: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "goal/set")
        .filter_map(|e| e["data"]["status"].as_str())
        .collect();
    assert_eq!(goals, ["active", "paused", "cleared"], "{goals:?}");
    assert_eq!(of("goal/round"), 1);
    let listed = server.call("GET", "/api/v1/schedules", None).json();
    assert_eq!(listed["schedules"], serde_json::json!([]), "{listed}");
    // A schedule the command cannot read is refused, naming what is wrong.
    let bad = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/commands/schedule"),
        Some(&serde_json::json!({"args": "every soon check"})),
    );
    assert!(bad.status >= 400, "{}", bad.body);
    assert!(
        bad.body
            .contains(r#"/schedule: every: \"soon\" is not a whole number"#),
        "{}",
        bad.body
    );
    keep_screenshots(&artifacts, &["automation", "goal"]);
}
