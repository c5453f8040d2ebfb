//! `--context managed` through the real binary and a loopback mock model: a 20-turn session
//! (one `keel run`, then `keel resume --last` per turn, the mode kept by the log) whose every
//! request body is rebuilt from the session file alone and compared byte for byte with what the
//! mock server received.

mod support;

use pretty_assertions::assert_eq;
use support::*;

const TURNS: usize = 20;

fn script() -> String {
    let mut s = String::from("responses:\n");
    for n in 1..=TURNS {
        s += &format!(
            "  - match: {{last_user_contains: \"[t{n:02}]\"}}\n    text: \"Reading f{n:02}.\"\n    tool_calls:\n      - {{id: r{n:02}, name: read, arguments: {{path: \"f{n:02}.txt\"}}}}\n"
        );
        s += &format!(
            "  - match: {{last_user_contains: \"[t{n:02}]\"}}\n    text: \"Done {n:02}.\"\n"
        );
    }
    s
}

#[test]
fn a_managed_session_rebuilds_every_request_body_from_its_log() {
    let env = Env::new();
    for n in 1..=TURNS {
        let body: String = (0..80)
            .map(|l| format!("file {n:02} line {l:03}: lorem ipsum dolor sit amet\n"))
            .collect();
        env.write(&format!("f{n:02}.txt"), &body);
    }
    let mock = Mock::start_tapped(&script());
    for n in 1..=TURNS {
        let prompt = format!("[t{n:02}] read f{n:02}.txt");
        let mut cmd = env.keel(&mock.base_url());
        cmd.args(["--approval", "auto", "--context-window", "16384"]);
        if n == 1 {
            cmd.args(["--context", "managed", "run", &prompt]);
        } else {
            cmd.args(["resume", "--last", &prompt]);
        }
        let out = run(&mut cmd);
        assert_eq!(out.code, Some(0), "turn {n}: {}", out.stderr);
        assert_eq!(out.stdout, format!("Done {n:02}.\n"));
    }
    let received = mock.raw_requests();
    assert_eq!(received.len(), TURNS * 2);

    let session = keel_session::Store::load(&env.only_session())
        .unwrap()
        .session;
    let rebuilt = keel_agent::rebuild::rebuild_requests(&session).unwrap();
    assert_eq!(rebuilt.len(), received.len(), "one projection per request");
    let info = keel_llm::ModelCatalogue::default().lookup("deepseek-v4-flash");
    for (i, (r, got)) in rebuilt.iter().zip(&received).enumerate() {
        let body = keel_llm::request_body_bytes(&r.request, &info);
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(got),
            "request {i} (turn {} step {})",
            r.turn,
            r.step
        );
    }
    // `keel sessions show --requests` prints the same bodies.
    let out = run(env
        .keel_bare()
        .args(["sessions", "show", "--requests"])
        .arg(env.only_session()));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), received.len());
    for (line, got) in lines.iter().zip(&received) {
        let got: serde_json::Value = serde_json::from_slice(got).unwrap();
        assert_eq!(line["body"], got);
    }
    // The policy narrowed the later requests; one mode event for the session.
    let events = to_values(&session);
    assert_eq!(of_type(&events, "context/mode").len(), 1);
    let omitted: Vec<u64> = of_type(&events, "context/projection")
        .iter()
        .map(|p| p["data"]["omittedCount"].as_u64().unwrap())
        .collect();
    assert!(omitted.iter().rev().take(5).all(|o| *o > 0), "{omitted:?}");
    assert!(of_type(&events, "compaction/start").is_empty());
}
