//! End-to-end: `ask_user_question` with the real binary and the loopback mock model. Headless
//! (`keel run`) the model is told that no person is present and the turn goes on; with
//! `keel run --json --inbox-stdin` the `question/asked` line is printed and a script answers it
//! on stdin; bad questions are refused `INVALID_ARGS`, naming what is wrong, and the turn goes
//! on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;
use support::*;

/// One call of `ask_user_question` with three questions (single-select, multi-select, free
/// text); the next response reads what came back.
const ASKING: &str = r#"
responses:
  - match: { last_user_contains: "set up the project" }
    tool_calls:
      - id: q1
        name: ask_user_question
        arguments:
          questions:
            - { id: lang, header: Language, question: "Which language?", options: [ { label: Rust, description: "fast" }, { label: Go } ] }
            - { id: features, question: "Which features?", multi_select: true, options: [ { label: auth }, { label: logging }, { label: metrics } ] }
            - { id: name, question: "What is the project called?" }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#;

fn question_events(events: &[Value]) -> (Value, Value) {
    let asked = of_type(events, "question/asked");
    let answered = of_type(events, "question/answered");
    assert_eq!((asked.len(), answered.len()), (1, 1), "{events:#?}");
    (asked[0]["data"].clone(), answered[0]["data"].clone())
}

#[test]
fn headless_the_model_is_told_no_person_is_present_and_the_turn_goes_on() {
    let env = Env::new();
    let mock = Mock::start(ASKING);
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "set up the project"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "DONE\n");
    // Said on stderr for whoever watches the run.
    assert!(
        out.stderr.contains("  ? Which language?\n"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("  ? no answer: no person is present to answer (headless run)\n"),
        "{}",
        out.stderr
    );
    let events = load_consistent(&env.only_session());
    let (asked, answered) = question_events(&events);
    assert_eq!(asked["callId"], "q1");
    assert_eq!(asked["questions"][1]["multi_select"], true);
    assert_eq!(asked["questions"][0]["options"][0]["description"], "fast");
    assert_eq!(answered["by"], "headless");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    let (id, text, is_error) = &results[0];
    assert_eq!((id.as_str(), *is_error), ("q1", false));
    assert!(
        text.starts_with("No answer: no person is present to answer (headless run)."),
        "{text}"
    );
    assert!(text.contains("state the assumptions you make"), "{text}");
    // The tool is offered with dsh's schema.
    let tools = mock.requests()[0]["tools"].clone();
    let ask = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "ask_user_question")
        .expect("ask_user_question offered")
        .clone();
    assert_eq!(
        ask["function"]["parameters"]["properties"]["questions"]["items"]["required"],
        json!(["id", "question"])
    );
}

/// `keel run --json --inbox-stdin` with stdout read line by line as it comes.
struct Live {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Live {
    fn start(env: &Env, mock: &Mock, prompt: &str) -> Live {
        Live::start_with(env, mock, &[], prompt)
    }

    fn start_with(env: &Env, mock: &Mock, extra: &[&str], prompt: &str) -> Live {
        let mut child = env
            .keel(&mock.base_url())
            .args(["run", "--json", "--inbox-stdin"])
            .args(extra)
            .arg(prompt)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let stdin = child.stdin.take();
        Live {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// The next stdout line that is an event of type `ty` (hang guard: 60 s).
    fn until(&self, ty: &str) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {ty} line came"));
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == ty {
                return v;
            }
        }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Close stdin and wait for the exit: (code, the rest of stdout, stderr).
    fn finish(mut self) -> (Option<i32>, Vec<Value>, String) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(60)) {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        let status = self.child.wait().unwrap();
        (status.code(), rest, self.stderr.join().unwrap())
    }
}

#[test]
fn a_script_answers_the_printed_question_on_stdin() {
    let env = Env::new();
    let mock = Mock::start(ASKING);
    let mut live = Live::start(&env, &mock, "set up the project");
    let asked = live.until("question/asked");
    assert_eq!(asked["data"]["callId"], "q1");
    assert_eq!(asked["data"]["questions"][2]["id"], "name");
    // A wrong line is reported and the question keeps waiting.
    live.send(r#"{"answer": {"call_id": "q1", "answers": {"colour": "red"}}}"#);
    live.send(r#"{"answer": {"call_id": "nope", "answers": {}}}"#);
    live.send(
        r#"{"answer": {"call_id": "q1", "answers": {"lang": "Rust", "features": ["auth", "logging"], "name": "keelboat"}}}"#,
    );
    let answered = live.until("question/answered");
    assert_eq!(answered["data"]["by"], "user");
    assert_eq!(
        answered["data"]["answers"],
        json!({"lang": "Rust", "features": ["auth", "logging"], "name": "keelboat"})
    );
    let (code, _rest, stderr) = live.finish();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("keel: --inbox-stdin: no question has the id 'colour' (the ids are: lang, features, name)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("keel: --inbox-stdin: no question is waiting for call_id 'nope'"),
        "{stderr}"
    );
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(
        results[0].1,
        "The user answered:\nlang: Rust\nfeatures: auth, logging\nname: keelboat"
    );
    assert!(!results[0].2);
    // What the model read next.
    let second = &mock.requests()[1];
    assert!(
        second.to_string().contains("features: auth, logging"),
        "{second}"
    );
}

#[test]
fn stdin_closing_answers_the_waiting_question_no_person_answered() {
    let env = Env::new();
    let mock = Mock::start(ASKING);
    let live = Live::start(&env, &mock, "set up the project");
    live.until("question/asked");
    let (code, _rest, stderr) = live.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let events = load_consistent(&env.only_session());
    let (_, answered) = question_events(&events);
    assert_eq!(answered["by"], "headless");
    assert_eq!(answered["reason"], "no person answered (stdin closed)");
    assert!(
        tool_results(&events)[0]
            .1
            .starts_with("No answer: no person answered (stdin closed)."),
        "{events:#?}"
    );
}

#[test]
fn bad_questions_are_refused_naming_what_is_wrong_and_the_turn_goes_on() {
    let env = Env::new();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "ask me" }
    tool_calls:
      - { id: b1, name: ask_user_question, arguments: { questions: [] } }
      - { id: b2, name: ask_user_question, arguments: { questions: [ { id: size, question: "  " } ] } }
      - { id: b3, name: ask_user_question, arguments: { questions: [ { id: size } ] } }
      - { id: b4, name: ask_user_question, arguments: { questions: [ { id: a, question: "A?" }, { id: a, question: "B?" } ] } }
      - { id: ok, name: ask_user_question, arguments: { questions: [ { id: free, question: "Anything else?" } ] } }
  - match: { last_tool_result_contains: "" }
    text: "DONE"
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "ask me"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "DONE\n");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    let texts: Vec<(&str, &str, bool)> = results
        .iter()
        .map(|(id, text, err)| (id.as_str(), text.as_str(), *err))
        .collect();
    assert_eq!(
        texts[..2],
        [
            (
                "b1",
                "INVALID_ARGS: 'questions' is empty: send at least one question",
                true
            ),
            (
                "b2",
                "INVALID_ARGS: question 'size' has no text: 'question' must say what you ask",
                true
            ),
        ]
    );
    assert!(
        texts[2].1.starts_with("INVALID_ARGS:") && texts[2].1.contains("question"),
        "{texts:?}"
    );
    assert_eq!(
        texts[3],
        (
            "b4",
            "INVALID_ARGS: two questions have the id 'a': ids must differ",
            true
        )
    );
    // A question with no options is a free-text question, asked like any other.
    assert_eq!(texts[4].0, "ok");
    assert!(!texts[4].2, "{texts:?}");
    assert_eq!(of_type(&events, "question/asked").len(), 1);
}

/// A delegated run (`--delegated-from`, keel's delegation provider) has an agent, not a person,
/// behind its stdin: its questions are answered at once, without waiting for stdin.
#[test]
fn a_delegated_run_does_not_wait_for_an_answer() {
    let env = Env::new();
    let mock = Mock::start(ASKING);
    let live = Live::start_with(
        &env,
        &mock,
        &["--delegated-from", "parent-session"],
        "set up the project",
    );
    // stdin stays open until the turn has ended.
    let end = live.until("turn/end");
    assert_eq!(end["data"]["reason"]["kind"], "completed", "{end}");
    let (code, _rest, stderr) = live.finish();
    assert_eq!(code, Some(0), "{stderr}");
    let events = load_consistent(&env.only_session());
    let (_, answered) = question_events(&events);
    assert_eq!(answered["by"], "headless");
    assert_eq!(
        answered["reason"],
        "no person is present to answer (headless run)"
    );
}

/// Plan mode's section tells the model to ask open questions with the tool, and the tool is
/// allowed in plan mode (it changes nothing).
#[test]
fn plan_mode_points_to_the_tool_and_allows_it() {
    let env = Env::new();
    let mock = Mock::start(ASKING);
    let out = run(env
        .keel(&mock.base_url())
        .args(["run", "--plan", "set up the project"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    let system = mock.requests()[0]["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("# Plan mode is active")
            && system.contains("Ask open questions with ask_user_question."),
        "{system}"
    );
    let events = load_consistent(&env.only_session());
    let (_, answered) = question_events(&events);
    assert_eq!(answered["by"], "headless");
}
