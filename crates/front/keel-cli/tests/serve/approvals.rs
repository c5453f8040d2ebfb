//! Approvals and questions over the API: a served session (`--approval ask`, a read-only
//! sandbox, so `bash` asks) puts each request to every client of its event stream, lists it
//! under `…/pending`, and takes the first answer over `POST …/approvals/{requestId}` or
//! `POST …/questions/{requestId}`; a second answer is a 409, and a cancelled turn resolves
//! what it waited for.

use crate::client::{Server, Sse, check_ids, wait_idle};
use crate::support::{Env, Mock, of_type, tool_results};
use serde_json::{Value, json};

const SCRIPT: &str = r#"
responses:
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b1, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    tool_calls:
      - { id: b2, name: bash, arguments: { command: "echo checked-by-keel" } }
  - match: { last_user_contains: "run the check" }
    text: "The check ran twice."
  - match: { last_user_contains: "clean up" }
    tool_calls:
      - { id: d1, name: bash, arguments: { command: "echo cleaned-by-keel" } }
  - match: { last_user_contains: "clean up" }
    text: "I did not clean up."
  - match: { last_user_contains: "look again" }
    tool_calls:
      - { id: l1, name: bash, arguments: { command: "echo looked-by-keel" } }
  - match: { last_user_contains: "look again" }
    text: "Not reached."
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, question: "Which language?", options: [ { label: Rust }, { label: Go } ] }
            - { id: name, question: "What name?" }
  - match: { last_user_contains: "ask me" }
    text: "Noted your answers."
  - match: { last_user_contains: "ask again" }
    tool_calls:
      - id: q2
        name: ask_user_question
        arguments:
          questions:
            - { id: size, question: "How big?", options: [ { label: S }, { label: L } ], multi_select: true }
  - match: { last_user_contains: "ask again" }
    text: "Nobody answered."
"#;

/// A server whose sessions ask before running a command.
fn asking_server(env: &Env, mock: &Mock) -> Server {
    Server::start_with(env, mock, &["--sandbox", "read-only", "--approval", "ask"])
}

/// A new session without a prompt.
fn new_session(server: &Server, env: &Env) -> String {
    let created = server.call("POST", "/api/v1/sessions", Some(&json!({"cwd": env.ws})));
    assert_eq!(created.status, 201, "{}", created.body);
    created.json()["id"].as_str().unwrap().to_owned()
}

fn say(server: &Server, id: &str, text: &str) {
    let sent = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/messages"),
        Some(&json!({ "text": text })),
    );
    assert_eq!(sent.status, 202, "{}", sent.body);
}

fn pending(server: &Server, id: &str) -> Vec<Value> {
    let r = server.call("GET", &format!("/api/v1/sessions/{id}/pending"), None);
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["requests"].as_array().unwrap().clone()
}

fn values(events: &[(u64, Value)]) -> Vec<Value> {
    events.iter().map(|(_, e)| e.clone()).collect()
}

/// One client watches a turn whose `bash` call needs approval; a second client, connecting
/// after it was asked, sees it pending and answers `allow_always`; both see it resolved; the
/// other client's answer is a 409; the call runs, and the same command in the next step runs
/// without asking (allowed for the session).
#[test]
fn an_approval_is_answered_by_a_second_client_while_the_first_watches() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = asking_server(&env, &mock);
    let id = new_session(&server, &env);
    let events = format!("/api/v1/sessions/{id}/events");
    let mut watcher = Sse::open(&server, &events, None);
    assert_eq!(
        watcher.expect_named("pending"),
        json!({"requests": []}),
        "a stream starts with what waits: nothing yet"
    );
    say(&server, &id, "run the check");

    // The watcher is told of the request.
    let asked = watcher.expect_named("request");
    let request = asked["requestId"].as_str().unwrap().to_owned();
    assert_eq!(asked["kind"], "approval", "{asked}");
    assert_eq!(asked["callId"], "b1", "{asked}");
    assert_eq!(asked["tool"], "bash", "{asked}");
    assert_eq!(
        asked["arguments"]["command"], "echo checked-by-keel",
        "{asked}"
    );
    assert_eq!(asked["options"], json!(["allow", "allow_always", "deny"]));
    assert!(
        asked["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{asked}"
    );

    // A client that connects after it was asked sees it pending, first thing; so does the
    // listing.
    let mut answerer = Sse::open(&server, &events, None);
    let late = answerer.expect_named("pending");
    assert_eq!(late["requests"], json!([asked.clone()]), "{late}");
    assert_eq!(pending(&server, &id), vec![asked.clone()]);

    // Wrong answers change nothing: an unknown request, a malformed body, an unknown session,
    // the question route for an approval.
    let approvals = format!("/api/v1/sessions/{id}/approvals");
    let r = server.call(
        "POST",
        &format!("{approvals}/0123abcd"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (404, "not_found"),
        "{}",
        r.body
    );
    let r = server.call(
        "POST",
        &format!("{approvals}/{request}"),
        Some(&json!({"decision": "maybe"})),
    );
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (400, "bad_request"),
        "{}",
        r.body
    );
    assert!(
        r.body.contains("maybe") && r.body.contains("allow_always"),
        "{}",
        r.body
    );
    let r = server.call(
        "POST",
        &format!("{approvals}/{request}"),
        Some(&json!({"decision": "allow", "extra": 1})),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("extra"), "{}", r.body);
    let r = server.call(
        "POST",
        &format!("/api/v1/sessions/no-such-session/approvals/{request}"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    let r = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/questions/{request}"),
        Some(&json!({"answers": {}})),
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(pending(&server, &id).len(), 1, "still waiting");

    // The second client answers; the first one's answer comes second and is refused.
    let r = server.call(
        "POST",
        &format!("{approvals}/{request}"),
        Some(&json!({"decision": "allow_always", "note": "fine for this session"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let resolved = r.json()["resolved"].clone();
    assert_eq!(resolved["requestId"], request.as_str(), "{resolved}");
    assert_eq!(resolved["decision"], "allow_always", "{resolved}");
    assert_eq!(resolved["by"], "client", "{resolved}");
    let r = server.call(
        "POST",
        &format!("{approvals}/{request}"),
        Some(&json!({"decision": "deny"})),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.error_code(), "already_answered");

    // Every client sees it resolved.
    assert_eq!(watcher.expect_named("resolved"), resolved);
    assert_eq!(answerer.expect_named("resolved"), resolved);
    assert!(pending(&server, &id).is_empty());

    // The turn completes with the command's output; its second call of the same command was
    // not asked again (no other request reached either client).
    let seen = watcher.until_turn_end();
    check_ids(&seen);
    let logged = values(&seen);
    let results = tool_results(&logged);
    assert_eq!(results.len(), 2, "{results:?}");
    for (call, text, is_error) in &results {
        assert!(!is_error, "{call}: {text}");
        assert!(text.contains("checked-by-keel"), "{call}: {text}");
    }
    let decided: Vec<(&Value, &Value)> = of_type(&logged, "approval/decided")
        .iter()
        .map(|e| (&e["data"]["approved"], &e["data"]["by"]))
        .collect();
    assert_eq!(
        decided,
        vec![
            (&json!(true), &json!("user")),
            (&json!(true), &json!("user"))
        ]
    );
    let end = of_type(&logged, "turn/end")[0];
    assert_eq!(end["data"]["reason"]["kind"], "completed", "{end}");
    assert_eq!(
        answerer.until_turn_end(),
        seen,
        "both clients saw the same turn"
    );
    assert!(watcher.named_seen().is_empty(), "no second request");
    assert!(answerer.named_seen().is_empty(), "no second request");
}

/// A denial (with a note the model reads) refuses the call; a request still open when its
/// turn is cancelled resolves as denied, is seen so by a watcher, and takes no answer after.
#[test]
fn a_denied_approval_and_a_cancelled_one_refuse_the_call() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = asking_server(&env, &mock);
    let id = new_session(&server, &env);
    let events = format!("/api/v1/sessions/{id}/events");
    let mut watcher = Sse::open(&server, &events, None);
    watcher.expect_named("pending");

    // Denied, with a note.
    say(&server, &id, "clean up");
    let asked = watcher.expect_named("request");
    let request = asked["requestId"].as_str().unwrap().to_owned();
    let answer = format!("/api/v1/sessions/{id}/approvals/{request}");
    let r = server.call(
        "POST",
        &answer,
        Some(&json!({"decision": "deny", "note": "not on a Saturday"})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let resolved = watcher.expect_named("resolved");
    assert_eq!(
        (&resolved["decision"], &resolved["note"]),
        (&json!("deny"), &json!("not on a Saturday"))
    );
    let turn = values(&watcher.until_turn_end());
    let results = tool_results(&turn);
    assert_eq!(results.len(), 1, "{results:?}");
    let (call, text, is_error) = &results[0];
    assert_eq!(call, "d1");
    assert!(*is_error, "{text}");
    assert!(text.contains("not on a Saturday"), "{text}");
    assert!(
        !text.contains("cleaned-by-keel"),
        "the command did not run: {text}"
    );
    let decided = of_type(&turn, "approval/decided")[0];
    assert_eq!(decided["data"]["approved"], false, "{decided}");
    let r = server.call("POST", &answer, Some(&json!({"decision": "allow"})));
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (409, "already_answered")
    );
    wait_idle(&server, &id);

    // Cancelled while it waits: resolved as denied for every client, and no answer after.
    say(&server, &id, "look again");
    let asked = watcher.expect_named("request");
    let request = asked["requestId"].as_str().unwrap().to_owned();
    let cancel = server.call("POST", &format!("/api/v1/sessions/{id}/cancel"), None);
    assert_eq!(cancel.status, 200, "{}", cancel.body);
    let resolved = watcher.expect_named("resolved");
    assert_eq!(resolved["requestId"], request.as_str(), "{resolved}");
    assert_eq!(
        (&resolved["decision"], &resolved["by"]),
        (&json!("deny"), &json!("cancelled")),
        "{resolved}"
    );
    let r = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/approvals/{request}"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (409, "already_answered")
    );
    assert!(r.body.contains("cancelled"), "{}", r.body);
    let turn = values(&watcher.until_turn_end());
    assert!(
        tool_results(&turn)
            .iter()
            .all(|(_, text, _)| !text.contains("looked-by-keel")),
        "{turn:?}"
    );
    assert_eq!(
        of_type(&turn, "turn/end")[0]["data"]["reason"]["kind"],
        "aborted",
        "{turn:?}"
    );
    assert!(pending(&server, &id).is_empty());

    // Closed: the session's old requests still take no answer.
    let closed = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(closed.json()["closed"], true, "{}", closed.body);
    let r = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/approvals/{request}"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (409, "already_answered")
    );
    assert!(pending(&server, &id).is_empty());
}

/// `ask_user_question` over the API: the questions are published, a wrong answer is a 400
/// naming what is wrong, the first answer goes to the model, a second is a 409; a question
/// open when its session is closed resolves as unanswered and takes no answer after.
#[test]
fn a_question_is_answered_over_the_api() {
    let env = Env::new();
    let mock = Mock::start(SCRIPT);
    let server = asking_server(&env, &mock);
    let id = new_session(&server, &env);
    let events = format!("/api/v1/sessions/{id}/events");
    let mut watcher = Sse::open(&server, &events, None);
    watcher.expect_named("pending");
    say(&server, &id, "ask me");

    let asked = watcher.expect_named("request");
    assert_eq!(asked["kind"], "question", "{asked}");
    assert_eq!(asked["callId"], "q1", "{asked}");
    assert_eq!(asked["questions"][0]["id"], "lang", "{asked}");
    assert_eq!(
        asked["questions"][0]["options"][1]["label"], "Go",
        "{asked}"
    );
    assert_eq!(pending(&server, &id), vec![asked.clone()]);
    let request = asked["requestId"].as_str().unwrap().to_owned();
    let answer = format!("/api/v1/sessions/{id}/questions/{request}");

    for (body, says) in [
        (json!({"answers": {"lang": "Cobol"}}), "not an option"),
        (
            json!({"answers": {"colour": "red"}}),
            "no question has the id",
        ),
        (
            json!({"answers": {"lang": ["Rust", "Go"]}}),
            "takes one answer",
        ),
        (json!({"answer": {"lang": "Rust"}}), "answer"),
    ] {
        let r = server.call("POST", &answer, Some(&body));
        assert_eq!(
            (r.status, r.error_code().as_str()),
            (400, "bad_request"),
            "{body}"
        );
        assert!(r.body.contains(says), "{body}: {}", r.body);
    }
    let r = server.call(
        "POST",
        &format!("/api/v1/sessions/{id}/approvals/{request}"),
        Some(&json!({"decision": "allow"})),
    );
    assert_eq!(r.status, 404, "a question is not an approval: {}", r.body);

    let r = server.call(
        "POST",
        &answer,
        Some(&json!({"answers": {"lang": "Rust", "name": "keel"}})),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let resolved = r.json()["resolved"].clone();
    assert_eq!(resolved["outcome"], "answered", "{resolved}");
    assert_eq!(resolved["answers"], json!({"lang": "Rust", "name": "keel"}));
    let r = server.call("POST", &answer, Some(&json!({"declined": true})));
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (409, "already_answered")
    );
    assert_eq!(watcher.expect_named("resolved"), resolved);

    let turn = values(&watcher.until_turn_end());
    let results = tool_results(&turn);
    assert_eq!(results.len(), 1, "{results:?}");
    let (_, text, is_error) = &results[0];
    assert!(!is_error, "{text}");
    assert!(
        text.contains("lang: Rust") && text.contains("name: keel"),
        "{text}"
    );
    let answered = of_type(&turn, "question/answered")[0];
    assert_eq!(answered["data"]["by"], "user", "{answered}");
    assert_eq!(
        of_type(&turn, "turn/end")[0]["data"]["reason"]["kind"],
        "completed"
    );
    wait_idle(&server, &id);

    // Closed while a question waits: the watcher sees it resolved unanswered, and an answer
    // after is refused.
    say(&server, &id, "ask again");
    let asked = watcher.expect_named("request");
    assert_eq!(asked["questions"][0]["multi_select"], true, "{asked}");
    let request = asked["requestId"].as_str().unwrap().to_owned();
    let answer = format!("/api/v1/sessions/{id}/questions/{request}");
    let r = server.call("POST", &answer, Some(&json!({"answers": {"size": "S"}})));
    assert_eq!(
        r.status, 400,
        "a multi-select question takes an array: {}",
        r.body
    );
    let closed = server.call("POST", &format!("/api/v1/sessions/{id}/close"), None);
    assert_eq!(closed.json()["closed"], true, "{}", closed.body);
    let resolved = watcher.expect_named("resolved");
    assert_eq!(resolved["requestId"], request.as_str(), "{resolved}");
    assert_eq!(
        (&resolved["outcome"], &resolved["by"]),
        (&json!("unanswered"), &json!("closed")),
        "{resolved}"
    );
    let r = server.call("POST", &answer, Some(&json!({"answers": {"size": ["S"]}})));
    assert_eq!(
        (r.status, r.error_code().as_str()),
        (409, "already_answered")
    );
    assert!(r.body.contains("closed"), "{}", r.body);
    assert!(pending(&server, &id).is_empty());
}
