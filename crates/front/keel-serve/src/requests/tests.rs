//! The registry, the approver and the asker without a server.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use keel_protocol::QuestionOption;

fn call(name: &str, arguments: &str) -> ToolCallBlock {
    ToolCallBlock {
        id: "c1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn q(id: &str, labels: &[&str], multi: bool) -> Question {
    Question {
        id: id.into(),
        question: format!("{id}?"),
        header: None,
        options: labels
            .iter()
            .map(|l| QuestionOption {
                label: (*l).into(),
                description: None,
            })
            .collect(),
        multi_select: multi,
    }
}

fn approval(decision: &str) -> ApprovalBody {
    serde_json::from_value(json!({ "decision": decision })).unwrap()
}

fn open_id(requests: &Requests) -> String {
    let (open, _) = requests.snapshot();
    open[0]["requestId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_first_answer_wins_and_allow_always_is_remembered() {
    let requests = Arc::new(Requests::default());
    let approver = ServeApprover::new(requests.clone());
    let bash = call("bash", r#"{"command":"echo hi"}"#);
    let mut changed = requests.subscribe();
    let decided = tokio::spawn({
        let requests = requests.clone();
        async move {
            changed.changed().await.unwrap();
            let id = open_id(&requests);
            let view = requests.answer_approval(&id, approval("allow_always"));
            let again = requests.answer_approval(&id, approval("deny"));
            (view, again)
        }
    });
    assert_eq!(
        approver.decide(&bash, "a command").await,
        ApprovalOutcome::Approved
    );
    let (view, again) = decided.await.unwrap();
    let view = view.unwrap();
    assert_eq!(view["decision"], "allow_always");
    assert_eq!(view["by"], "client");
    let again = again.unwrap_err();
    assert_eq!(again.status, axum::http::StatusCode::CONFLICT);
    assert_eq!(again.code, "already_answered");
    // Remembered: the same command is not asked again; another one is.
    assert_eq!(
        approver.decide(&bash, "a command").await,
        ApprovalOutcome::Approved
    );
    assert_eq!(requests.snapshot().1, 2, "one request, opened and resolved");
    let other = call("bash", r#"{"command":"rm -rf x"}"#);
    let denied = {
        let fut = approver.decide(&other, "a command");
        tokio::pin!(fut);
        assert!(futures::poll!(&mut fut).is_pending());
        requests.resolve_all(BY_CANCEL, "the turn was cancelled");
        fut.await
    };
    assert_eq!(
        denied,
        ApprovalOutcome::Denied {
            reason: Some("the turn was cancelled".into())
        }
    );
    let (open, cursor) = requests.snapshot();
    assert!(open.is_empty());
    let mut from = 0;
    let notes = requests.since(&mut from);
    assert_eq!((notes.len(), from), (4, cursor));
    let Note::Resolved(last) = &notes[3] else {
        panic!("the last change is a resolution")
    };
    assert_eq!(last["by"], "cancelled");
    assert_eq!(last["decision"], "deny");
}

#[tokio::test]
async fn a_dropped_wait_resolves_its_request_and_unknown_ids_are_404() {
    let requests = Arc::new(Requests::default());
    let approver = ServeApprover::new(requests.clone());
    let plan = call("exit_plan_mode", r#"{"plan":"1. do it"}"#);
    {
        let fut = approver.decide(&plan, "approve the plan");
        tokio::pin!(fut);
        assert!(futures::poll!(&mut fut).is_pending());
        let (open, _) = requests.snapshot();
        assert_eq!(open[0]["plan"], "1. do it");
        assert_eq!(open[0]["options"], json!(["allow", "deny"]));
        let id = open_id(&requests);
        let refused = requests
            .answer_approval(&id, approval("allow_always"))
            .unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(refused.message.contains("allow, deny"), "{refused}");
    }
    let (open, _) = requests.snapshot();
    assert!(open.is_empty(), "dropped: resolved as cancelled");
    let missing = requests.answer_approval("nope", approval("allow"));
    assert_eq!(
        missing.unwrap_err().status,
        axum::http::StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn questions_take_checked_answers() {
    let requests = Arc::new(Requests::default());
    let asker = ServeAsker::new(requests.clone());
    let qs = [
        q("lang", &["Rust", "Go"], false),
        q("f", &["a", "b"], true),
        q("name", &[], false),
    ];
    let ask = call("ask_user_question", "{}");
    let fut = asker.ask(&ask, &qs);
    tokio::pin!(fut);
    assert!(futures::poll!(&mut fut).is_pending());
    let id = open_id(&requests);
    let body = |v: Value| -> QuestionBody { serde_json::from_value(v).unwrap() };
    for (wrong, says) in [
        (json!({"answers": {"lang": "Java"}}), "not an option"),
        (json!({"answers": {"lang": ["Rust"]}}), "takes one answer"),
        (json!({"answers": {"f": "a"}}), "multi-select"),
        (json!({"answers": {"zzz": "a"}}), "no question has the id"),
        (json!({}), "needs \"answers\""),
        (json!({"answers": {}, "declined": true}), "not both"),
    ] {
        let e = requests.answer_question(&id, body(wrong)).unwrap_err();
        assert_eq!(e.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(e.message.contains(says), "{e}");
    }
    let wrong_kind = requests
        .answer_approval(&id, approval("allow"))
        .unwrap_err();
    assert_eq!(wrong_kind.status, axum::http::StatusCode::NOT_FOUND);
    let view = requests
        .answer_question(
            &id,
            body(json!({"answers": {"lang": "Rust", "f": ["a", "b"], "name": "keel"}})),
        )
        .unwrap();
    assert_eq!(view["outcome"], "answered");
    let UserAnswer::Answered(answers) = fut.await else {
        panic!("answered")
    };
    assert_eq!(answers["lang"], QuestionAnswer::One("Rust".into()));
    assert_eq!(
        answers["f"],
        QuestionAnswer::Many(vec!["a".into(), "b".into()])
    );
    assert_eq!(answers["name"], QuestionAnswer::One("keel".into()));
}
