//! Format stability: a fixed capture workload gives pinned `receipts.jsonl` and `graph.json`
//! bytes. The hashes were produced by the first implementation of the format; a change here is
//! a change of the on-disk format (ids, canonical form, node/edge shapes), not a refactoring.
//! The workload is large enough for the two-thread paths (graph serialization ≥ 4,000 nodes,
//! verification ≥ 512 lines).
#![allow(clippy::unwrap_used)]

use keel_provenance::{
    Dispatch, ExecuteResult, Journal, Payload, PostDecision, PreDecision, SettledResult, verify,
};
use serde_json::json;
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn fixed_workload_gives_pinned_journal_and_graph_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("j");
    let mut j = Journal::open(&jdir, "golden").unwrap();
    let m = json!({"role": "assistant", "content": [{"type": "text", "text": "Reading \u{e9}\n\"x\""}]});
    let v = json!({"path": "src/main.rs", "n": [1.5, 1e30, -0.0]});
    for i in 0..120 {
        let r = j.recorder_mut();
        // Call ids repeat from i = 45 on (ambiguous aliases); every 7th call is denied, every
        // 5th fails, every 4th has its value replaced, every 9th has no tool/result.
        let (ev, call, tok) = (
            format!("ev-{i}"),
            format!("call_{}", i % 45),
            format!("tok-{i}"),
        );
        r.assistant_message(&ev, Payload::Value(&m));
        r.assistant_tool_call(&ev, &call, "read", "{\"path\":\"a\"}");
        r.tool_call_event(&call, &format!("tc-{i}"), Payload::Value(&v));
        r.pre_execute_enter(&call, Payload::Value(&v));
        if i % 7 == 3 {
            r.pre_execute_decision(&call, PreDecision::Deny { reason: "no" });
        } else {
            r.pre_execute_decision(&call, PreDecision::Allow);
            r.execute_enter(
                &call,
                Dispatch {
                    token: &tok,
                    parent_token: None,
                    arguments: Payload::Value(&v),
                },
            );
            if i % 5 == 1 {
                r.execute_result(
                    &tok,
                    ExecuteResult::Error {
                        code: None,
                        message: "boom",
                    },
                );
            } else {
                r.execute_result(&tok, ExecuteResult::Value(Payload::Value(&v)));
            }
            let decision = if i % 4 == 0 {
                PostDecision::ReplaceValue(Payload::Value(&m))
            } else {
                PostDecision::Accept
            };
            r.post_execute(&call, Payload::Value(&v), decision);
        }
        r.settled(
            &call,
            SettledResult {
                value: Payload::Value(&v),
                content: Payload::Str("c"),
                is_error: false,
                error_code: None,
            },
        );
        if i % 9 != 8 {
            r.tool_result_event(&call, &format!("tr-{i}"), Payload::Value(&v));
        }
        j.flush().unwrap();
    }
    let graph_id = j.write_graph().unwrap();
    let receipts = std::fs::read(jdir.join("receipts.jsonl")).unwrap();
    let graph = std::fs::read(jdir.join("graph.json")).unwrap();
    assert!(
        j.snapshot().nodes().len() >= 4_000,
        "too small for the parallel path"
    );
    assert_eq!(
        graph_id,
        "b06157ae8a19141f120e770dff988fa0e4aa329a9309284c65047076cb2b4a45"
    );
    assert_eq!(
        (hex(&receipts), receipts.len()),
        (
            "9ddc32256970ad969bb2a07d9e79e3131210c1448b5b80ce0b6bf45c932cbed7".to_owned(),
            698_988
        )
    );
    assert_eq!(
        (hex(&graph), graph.len()),
        (
            "bc0822fe93d3cd38fa140af6fcfa54c96a786aac00afafdab0b80ef64216faa3".to_owned(),
            3_118_486
        )
    );
    let report = verify(&jdir).unwrap();
    assert_eq!(
        report.receipts,
        receipts.iter().filter(|&&b| b == b'\n').count()
    );
    assert_eq!(report.graph_id.as_deref(), Some(graph_id.as_str()));
}
