//! A resume never loosens (issue 44, part 6): a session whose log holds a late
//! `approval/policy` `auto` (an editor's `session/set_mode`, or a line anyone who can write the
//! session file appended) resumes under the approval policy the user's own flags and config
//! give. The logged `auto` is reported on stderr as not restored, and a command that needs
//! approval is refused headless instead of approved by policy.

use crate::support::*;
use keel_protocol::{ApprovalPolicyEvent, EventBody, Seq, SessionEvent};
use std::io::Write;

/// Append an `approval/policy {policy}` event to the session file at `path`, in the log's own
/// format (the next seq, one JSON line).
fn append_policy(path: &std::path::Path, policy: &str) -> u64 {
    let loaded = keel_session::Store::load(path).unwrap();
    let last = loaded.session.events().last().unwrap();
    let seq = Seq(last.seq.0 + 1);
    let event = SessionEvent::new(
        seq,
        last.time,
        EventBody::ApprovalPolicy(Box::new(ApprovalPolicyEvent {
            policy: policy.to_owned(),
        })),
    );
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    writeln!(file, "{}", event.to_json().unwrap()).unwrap();
    seq.0
}

#[test]
fn a_logged_auto_approval_policy_is_not_restored_on_resume() {
    let env = Env::new();
    let first = Mock::start("responses:\n  - text: \"First answer.\"\n");
    let out = run(env.keel(&first.base_url()).args(["run", "first prompt"]));
    assert_eq!(out.code, Some(0), "run stderr:\n{}", out.stderr);
    let session = env.only_session();
    let seq = append_policy(&session, "auto");
    let events = load_consistent(&session);
    let policies: Vec<&str> = of_type(&events, "approval/policy")
        .iter()
        .map(|e| e["data"]["policy"].as_str().unwrap())
        .collect();
    assert_eq!(policies, ["ask", "auto"]);

    // Under the read-only sandbox a command needs approval; it would write only to keel's
    // temp directory, so only an approval lets the marker appear.
    let marker = env.root().join("tmp").join("approved-by-policy");
    let mock = Mock::start(&format!(
        r#"
responses:
  - match: {{ last_user_contains: "touch it" }}
    tool_calls:
      - {{ id: b1, name: bash, arguments: {{ command: "touch '{}'" }} }}
  - text: "Done."
"#,
        marker.display()
    ));
    let out = run(env.keel(&mock.base_url()).args([
        "--sandbox",
        "read-only",
        "resume",
        "--last",
        "touch it",
    ]));
    assert_eq!(out.code, Some(0), "resume stderr:\n{}", out.stderr);
    assert_eq!(env.only_session(), session);
    let id = session_id(&session);
    assert!(
        out.stderr.contains(&format!(
            "keel: session {id} logged approval policy allow at seq {seq}; not restored: a \
             resumed session keeps the configured ask"
        )),
        "stderr:\n{}",
        out.stderr
    );

    // The call was put to nobody (headless ask), not approved by the `auto` policy.
    assert!(
        !marker.exists(),
        "the command ran: approvals were automatic"
    );
    let events = load_consistent(&session);
    let decided = of_type(&events, "approval/decided");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["approved"], false, "{decided:?}");
    assert_eq!(decided[0]["data"]["by"], "headless", "{decided:?}");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    let (call, text, is_error) = &results[0];
    assert_eq!(call, "b1");
    assert!(*is_error, "{text}");
    assert!(text.contains("--approval allow"), "{text}");
    // Resuming logged no new policy: the log still says what was set, and the next resume
    // reads the same.
    assert_eq!(of_type(&events, "approval/policy").len(), 2);
}
