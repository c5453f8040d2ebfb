//! Compaction end to end: a real agent on a real workspace and session file, a scripted model
//! with a small context window; pressure compaction, overflow recovery, pruning and `/compact`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use keel_agent::HookRegistry;
use keel_agent::compaction::{
    self, CompactionConfig, CompactionOutcome, CompactionReason, Compactor, SummaryInstruction,
    SummaryMessage,
};
use keel_protocol::{EventBody, Message, Seq, SessionEvent, SurfaceOp, TurnEndReason};
use keel_session::Store;
use keel_tools::SandboxMode;
use pretty_assertions::assert_eq;
use std::collections::BTreeSet;

/// A turn per task: read `fNN.txt`, then answer. Each task's responses only match its own
/// prompt; the summary responses (no match) serve whatever else asks.
fn task_script(turns: usize, summaries: usize) -> String {
    let mut s = String::from("responses:\n");
    for n in 1..=turns {
        s += &format!(
            "  - match: {{last_user_contains: \"[task {n:02}]\"}}\n    text: \"Reading f{n:02}.\"\n    \
             tool_calls:\n      - {{id: call_{n:02}, name: read, arguments: {{path: \"f{n:02}.txt\"}}}}\n"
        );
        s += &format!(
            "  - match: {{last_user_contains: \"[task {n:02}]\"}}\n    text: \"Done {n:02}.\"\n"
        );
    }
    for i in 1..=summaries {
        s += &format!(
            "  - text: \"SUMMARY {i}: the user asked for files to be read; all were read.\"\n"
        );
    }
    s
}

fn write_files(f: &Fixture, turns: usize, lines: usize) {
    for n in 1..=turns {
        let body: String = (0..lines)
            .map(|i| {
                format!("file {n:02} line {i:04}: the quick brown fox jumps over the lazy dog\n")
            })
            .collect();
        std::fs::write(f.work.path().join(format!("f{n:02}.txt")), body).unwrap();
    }
}

fn small_window(config: &mut keel_agent::AgentConfig) {
    config.model_info.context_window = 16_384;
    config.approval = keel_agent::ApprovalPolicy::Allow;
}

fn of_type<'a>(evs: &'a [SessionEvent], t: &str) -> Vec<&'a SessionEvent> {
    evs.iter().filter(|e| e.type_name() == t).collect()
}

fn is_summary_request(m: &[Message]) -> bool {
    m.last()
        .is_some_and(|m| m.text() == SummaryInstruction::TEXT)
}

fn request_bytes(r: &keel_llm::ChatRequest) -> usize {
    serde_json::to_vec(&r.messages).unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_compacts_a_long_session_keeping_the_tail_and_every_event() {
    const TURNS: usize = 20;
    let mut hooks = HookRegistry::default();
    compaction::install(&mut hooks, CompactionConfig::default());
    let f = fixture_config(
        &task_script(TURNS, 6),
        hooks,
        SandboxMode::WorkspaceWrite,
        small_window,
    );
    write_files(&f, TURNS, 60);
    for n in 1..=TURNS {
        f.agent
            .followup(&format!("[task {n:02}] read f{n:02}.txt and say done"))
            .unwrap();
        let outcome = f.agent.run_pending().await.unwrap().unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed, "turn {n}");
        assert_eq!(outcome.final_text, format!("Done {n:02}."));
    }
    let evs = events(&f);

    // The log shows the bracket and the replace.
    let summaries = of_type(&evs, "compaction/summary");
    assert!(
        summaries.len() >= 2,
        "expected two pressure compactions: {:?}",
        types(&f)
    );
    let starts = of_type(&evs, "compaction/start");
    let ends = of_type(&evs, "compaction/end");
    assert_eq!(starts.len(), ends.len());
    for s in &starts {
        let EventBody::CompactionStart(s) = &s.body else {
            unreachable!()
        };
        assert_eq!(s.reason, "pressure");
        assert_eq!(s.context_window, 16_384);
        assert!(s.estimated_tokens >= 13_107, "{s:?}");
    }
    for e in &ends {
        let EventBody::CompactionEnd(e) = &e.body else {
            unreachable!()
        };
        assert_eq!(e.outcome, "compacted", "{e:?}");
        assert!(e.after_tokens < e.before_tokens, "{e:?}");
        assert!(e.after_tokens < 13_107, "{e:?}");
    }
    for s in &summaries {
        let EventBody::CompactionSummary(span) = &s.body else {
            unreachable!()
        };
        let next = &evs[s.seq.0 as usize + 1];
        assert_eq!(next.type_name(), "user/message");
        assert_eq!(
            next.surface_op,
            Some(SurfaceOp::Replace {
                start: span.shadowed_range.start,
                end: span.shadowed_range.end
            })
        );
        assert_eq!(next.source_event_seqs, span.shadowed_seqs);
        let EventBody::UserMessage(m) = &next.body else {
            unreachable!()
        };
        assert_eq!(m.source.plugin_id(), Some(compaction::ID.source()));
        assert!(
            m.text().starts_with(SummaryMessage::PREAMBLE),
            "{}",
            m.text()
        );
        assert_eq!(evs[next.seq.0 as usize + 1].type_name(), "compaction/end");
    }

    // Every original event is still in the log: all the results, prompts and answers.
    let results = of_type(&evs, "tool/result");
    assert_eq!(results.len(), TURNS);
    for n in 1..=TURNS {
        let needle = format!("file {n:02} line 0059");
        assert!(results.iter().any(|e| matches!(&e.body, EventBody::ToolResult(r) if r.message.tool_results().next().unwrap().text().contains(&needle))));
    }
    let loaded = Store::load(&f.session_path).unwrap();
    assert_eq!(loaded.session.len(), f.agent.log().session().len());
    loaded.session.check_invariants().unwrap();

    // Requests: the ones after a compaction are shorter, start with the summary and keep the
    // recent tail of the one before.
    let reqs = f.provider.requests();
    let summary_reqs = reqs
        .iter()
        .filter(|r| is_summary_request(&r.messages))
        .count();
    assert_eq!(summary_reqs, summaries.len());
    let normal: Vec<_> = reqs
        .iter()
        .filter(|r| !is_summary_request(&r.messages))
        .collect();
    assert_eq!(normal.len(), 2 * TURNS);
    let mut compacted_seen = 0;
    for pair in normal.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let summarised = b.messages[0].source.plugin_id() == Some(compaction::ID.source())
            && b.messages[0] != a.messages[0];
        if !summarised {
            assert_eq!(
                a.messages[..],
                b.messages[..a.messages.len()],
                "append-only between compactions"
            );
            continue;
        }
        compacted_seen += 1;
        assert!(
            request_bytes(b) < request_bytes(a),
            "a compacted request is shorter"
        );
        // The tail kept: everything after the summary is a suffix of the previous request,
        // followed by the new step's input.
        let kept = &b.messages[1..];
        let start = a
            .messages
            .iter()
            .position(|m| m.id == kept[0].id)
            .expect("tail starts in the old request");
        let tail = &a.messages[start..];
        assert_eq!(&kept[..tail.len()], tail);
        assert!(tail.len() >= 2, "a recent tail is kept");
        // The newest prompt is there.
        assert!(
            b.messages.iter().any(|m| m.source.is_user()),
            "the human's current prompt survives"
        );
    }
    assert_eq!(compacted_seen, summaries.len());
    // The summary requests reuse the prefix of the request before them (cache-friendly).
    for (i, r) in reqs
        .iter()
        .enumerate()
        .filter(|(_, r)| is_summary_request(&r.messages))
    {
        let prev = &reqs[i - 1];
        let prefix = &r.messages[..r.messages.len() - 1];
        assert_eq!(prefix, &prev.messages[..prefix.len()]);
        assert_eq!((&r.system, &r.tools), (&prev.system, &prev.tools));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_compacts_once_and_retries_the_step() {
    let script = format!(
        "{}  - match: {{last_user_contains: \"[task 03]\"}}\n    behaviour: context_overflow\n  \
         - match: {{last_user_contains: \"[task 03]\"}}\n    text: \"Done 03.\"\n  - text: \"SUMMARY: two files read.\"\n",
        task_script(2, 0)
    );
    let mut hooks = HookRegistry::default();
    compaction::install(&mut hooks, CompactionConfig::default());
    let f = fixture_config(&script, hooks, SandboxMode::WorkspaceWrite, |c| {
        c.approval = keel_agent::ApprovalPolicy::Allow
    });
    write_files(&f, 2, 40);
    for n in 1..=3 {
        f.agent
            .followup(&format!("[task {n:02}] read f{n:02}.txt and say done"))
            .unwrap();
        let outcome = f.agent.run_pending().await.unwrap().unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed, "turn {n}");
    }
    let evs = events(&f);
    let t: Vec<String> = types(&f)
        .into_iter()
        .skip_while(|t| t != "compaction/start")
        .collect();
    assert_eq!(
        t[..5],
        [
            "compaction/start",
            "compaction/summary",
            "user/message",
            "compaction/end",
            "llm/retry"
        ]
    );
    let EventBody::CompactionStart(s) = &of_type(&evs, "compaction/start")[0].body else {
        unreachable!()
    };
    assert_eq!(s.reason, "overflow");
    assert_eq!(of_type(&evs, "llm/retry").len(), 1);
    let reqs = f.provider.requests();
    // 2 + 2 for the first turns, then overflow, summary, retry.
    assert_eq!(reqs.len(), 7);
    assert!(is_summary_request(&reqs[5].messages));
    let (failed, retried) = (&reqs[4], &reqs[6]);
    assert!(request_bytes(retried) < request_bytes(failed));
    assert_eq!(
        retried.messages[0].source.plugin_id(),
        Some(compaction::ID.source())
    );
    // The open step's own input survived: the human's prompt of turn 3 is still sent.
    assert!(
        retried
            .messages
            .iter()
            .any(|m| m.text().contains("[task 03]"))
    );
    assert!(
        !retried
            .messages
            .iter()
            .any(|m| m.text().contains("[task 01]"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_overflow_in_the_step_is_not_compacted_again_and_the_turn_fails() {
    let script = format!(
        "{}  - match: {{last_user_contains: \"[task 02]\"}}\n    behaviour: context_overflow\n  \
         - match: {{last_user_contains: \"[task 02]\"}}\n    behaviour: context_overflow\n  - text: \"SUMMARY: one file read.\"\n",
        task_script(1, 0)
    );
    let mut hooks = HookRegistry::default();
    compaction::install(&mut hooks, CompactionConfig::default());
    let f = fixture_config(&script, hooks, SandboxMode::WorkspaceWrite, |c| {
        c.approval = keel_agent::ApprovalPolicy::Allow
    });
    write_files(&f, 1, 40);
    f.agent
        .followup("[task 01] read f01.txt and say done")
        .unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    f.agent.followup("[task 02] now fail").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(
        matches!(&outcome.reason, TurnEndReason::Error { code, .. } if code == "CONTEXT_WINDOW_EXCEEDED"),
        "{:?}",
        outcome.reason
    );
    let evs = events(&f);
    assert_eq!(of_type(&evs, "compaction/start").len(), 1);
    assert_eq!(of_type(&evs, "llm/retry").len(), 1);
    assert_eq!(f.provider.requests().len(), 2 + 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_with_nothing_to_compact_gives_up_without_retrying() {
    let script = "responses:\n  - behaviour: context_overflow\n";
    let mut hooks = HookRegistry::default();
    compaction::install(&mut hooks, CompactionConfig::default());
    let f = fixture(script, hooks);
    f.agent.followup("hello").unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert!(
        matches!(&outcome.reason, TurnEndReason::Error { code, .. } if code == "CONTEXT_WINDOW_EXCEEDED")
    );
    let evs = events(&f);
    let ends = of_type(&evs, "compaction/end");
    assert_eq!(ends.len(), 1);
    let EventBody::CompactionEnd(e) = &ends[0].body else {
        unreachable!()
    };
    assert_eq!(e.outcome, "skipped");
    assert!(of_type(&evs, "llm/retry").is_empty());
    assert_eq!(f.provider.requests().len(), 1);
}

fn big_read_script() -> &'static str {
    r#"
responses:
  - text: "Reading the big file."
    tool_calls:
      - {id: call_big, name: read, arguments: {path: "big.txt"}}
  - text: "It is big."
"#
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_replaces_oversized_results_once_and_keeps_head_and_tail() {
    let f = fixture(big_read_script(), HookRegistry::default());
    let body: String = (1..=4000).map(|i| format!("{i}\n")).collect();
    std::fs::write(f.work.path().join("big.txt"), &body).unwrap();
    f.agent.followup("read big.txt").unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());

    let compactor = Compactor::new(CompactionConfig {
        prune_over_tokens: 1000,
        ..CompactionConfig::default()
    });
    let pruned = compactor.prune_now(&f.agent).unwrap();
    assert_eq!(pruned.len(), 1);
    let again = compactor.prune_now(&f.agent).unwrap();
    assert_eq!(
        again,
        Vec::<Seq>::new(),
        "idempotent: a second pass prunes nothing"
    );

    let evs = events(&f);
    let original = &evs[pruned[0].0 as usize];
    let prune = &evs[evs.len() - 2];
    let replacement = &evs[evs.len() - 1];
    let EventBody::CompactionPrune(span) = &prune.body else {
        panic!("{prune:?}")
    };
    assert_eq!(
        (span.shadowed_range.start, span.shadowed_range.end),
        (original.seq, original.seq)
    );
    assert_eq!(span.shadowed_seqs, vec![original.seq]);
    assert!(span.shadowed_token_count > 1000);
    assert_eq!(
        replacement.surface_op,
        Some(SurfaceOp::Replace {
            start: original.seq,
            end: original.seq
        })
    );
    assert_eq!(replacement.source_event_seqs, vec![original.seq]);
    let (EventBody::ToolResult(old), EventBody::ToolResult(new)) =
        (&original.body, &replacement.body)
    else {
        panic!()
    };
    assert_eq!(
        (old.turn, old.step, &old.message.id, &old.message.source),
        (new.turn, new.step, &new.message.id, &new.message.source)
    );
    let old_text = old.message.tool_results().next().unwrap().text();
    let new_text = new.message.tool_results().next().unwrap().text();
    assert!(new_text.len() < 4096 + 1024 + 100, "{}", new_text.len());
    assert_eq!(&new_text[..4096], &old_text[..4096]);
    assert!(new_text.ends_with(&old_text[old_text.len() - 1024..]));
    let removed = old_text.len() - 4096 - 1024;
    assert!(
        new_text.contains(&format!(
            "\n[... {removed} bytes pruned by compaction ...]\n"
        )),
        "{new_text}"
    );
    // The surface now holds the replacement; the original is still in the log.
    let session = f.agent.log().session().clone();
    assert!(session.surface().nodes().contains(&replacement.seq));
    assert!(!session.surface().nodes().contains(&original.seq));
    f.agent
        .flush(keel_agent::seams::FlushPoint::TurnBoundary)
        .await
        .unwrap();
    let loaded = Store::load(&f.session_path).unwrap();
    assert_eq!(loaded.session.surface(), session.surface());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_prunes_first_and_stops_when_that_is_enough() {
    let script = r#"
responses:
  - text: "Reading the big file."
    tool_calls:
      - {id: call_big, name: read, arguments: {path: "big.txt"}}
  - text: "It is big."
"#;
    let mut hooks = HookRegistry::default();
    compaction::install(
        &mut hooks,
        CompactionConfig {
            threshold: 0.5,
            ..CompactionConfig::default()
        },
    );
    let f = fixture_config(script, hooks, SandboxMode::WorkspaceWrite, small_window);
    // ~38 KB once numbered (under the 50 KB spill cap): past half of 16K tokens on its own.
    let body: String = (1..=4000)
        .map(|i| format!("line {i:05} of a big file\n"))
        .collect();
    std::fs::write(f.work.path().join("big.txt"), &body[..30_000]).unwrap();
    f.agent.followup("read big.txt").unwrap();
    assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    let t = types(&f);
    let from = t
        .iter()
        .position(|t| t == "compaction/start")
        .expect("compacted");
    assert_eq!(
        t[from..from + 4],
        [
            "compaction/start",
            "compaction/prune",
            "tool/result",
            "compaction/end"
        ]
    );
    assert!(!t.iter().any(|t| t == "compaction/summary"));
    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 2, "no summary request");
    let sent = keel_llm::scripted::last_tool_result_text(&reqs[1].messages).unwrap();
    assert!(
        sent.contains("bytes pruned by compaction"),
        "the step after sees the pruned result"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_compaction_between_turns_summarises_and_a_failed_summary_loses_nothing() {
    let script = format!(
        "{}  - behaviour: server_error\n  - text: \"SUMMARY: three files read.\"\n",
        task_script(3, 0)
    );
    let f = fixture_config(
        &script,
        HookRegistry::default(),
        SandboxMode::WorkspaceWrite,
        |c| c.approval = keel_agent::ApprovalPolicy::Allow,
    );
    write_files(&f, 3, 20);
    for n in 1..=3 {
        f.agent
            .followup(&format!("[task {n:02}] read f{n:02}.txt and say done"))
            .unwrap();
        assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    }
    let before_len = f.agent.log().session().len();
    let before_surface = f.agent.log().session().surface().clone();
    // First attempt: the summary request fails; nothing but the bracket is logged.
    let report = compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    assert!(
        matches!(report.outcome, CompactionOutcome::Failed { .. }),
        "{report:?}"
    );
    assert_eq!(f.agent.log().session().surface(), &before_surface);
    assert_eq!(f.agent.log().session().len(), before_len + 2);
    let evs = events(&f);
    let EventBody::CompactionEnd(end) = &evs.last().unwrap().body else {
        panic!()
    };
    assert_eq!(end.outcome, "failed");
    assert!(
        end.error.as_deref().unwrap_or("").contains("SERVER"),
        "{end:?}"
    );
    // Second attempt succeeds and keeps a tail.
    let report = compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    assert_eq!(report.outcome, CompactionOutcome::Compacted);
    assert!(report.shrank(), "{report:?}");
    let span = report.summarised.unwrap();
    assert_eq!(span.start, before_surface.nodes()[0]);
    let surface = f.agent.log().session().surface().clone();
    assert_eq!(surface.nodes()[0], report.summary_seq.unwrap());
    assert!(surface.nodes().len() > 1);
    let kept: BTreeSet<_> = surface.nodes()[1..].iter().collect();
    assert!(kept.iter().all(|s| before_surface.nodes().contains(s)));
    let evs = events(&f);
    let EventBody::CompactionStart(s) = &of_type(&evs, "compaction/start")[1].body else {
        panic!()
    };
    assert_eq!(s.reason, "manual");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_config_is_refused_by_key() {
    let bad: CompactionConfig = serde_json::from_str(r#"{"threshold": 1.5}"#).unwrap();
    let e = bad.validate().unwrap_err();
    assert!(e.to_string().contains("threshold"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pressure_is_measured_on_the_projection_when_one_is_active() {
    use keel_agent::modes::middleware;
    use keel_agent::seams::{ContextRequest, Projection};
    const TURNS: usize = 20;
    let mut hooks = HookRegistry::default();
    // Send only the current turn (the host adds the required seqs back).
    hooks
        .context
        .push(middleware(|_req: ContextRequest, _next| {
            Box::pin(async move {
                Projection {
                    policy: "current-turn".into(),
                    include: Vec::new(),
                    revision: None,
                }
            })
        }));
    compaction::install(&mut hooks, CompactionConfig::default());
    let f = fixture_config(
        &task_script(TURNS, 6),
        hooks,
        SandboxMode::WorkspaceWrite,
        small_window,
    );
    write_files(&f, TURNS, 60);
    for n in 1..=TURNS {
        f.agent
            .followup(&format!("[task {n:02}] read f{n:02}.txt and say done"))
            .unwrap();
        assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
    }
    // The same session compacts twice without the projection (see above); with it, the
    // projected requests stay small and nothing is compacted.
    let evs = events(&f);
    assert_eq!(of_type(&evs, "compaction/start").len(), 0);
    assert!(!of_type(&evs, "context/projection").is_empty());
    assert_eq!(f.agent.log().session().surface().generation(), 0);
}

/// The wire form of a request, as the provider would receive it.
fn wire(r: &keel_llm::ChatRequest) -> serde_json::Value {
    keel_llm::request_body(
        r,
        &keel_llm::ModelCatalogue::default().lookup(r.model.as_str()),
    )
}

fn assert_no_consecutive_users(reqs: &[keel_llm::ChatRequest]) {
    for (i, r) in reqs.iter().enumerate() {
        let body = wire(r);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert!(
            !roles.windows(2).any(|w| w == ["user", "user"]),
            "request {i}: {roles:?}"
        );
    }
}

fn overflow_compactor() -> HookRegistry {
    let mut hooks = HookRegistry::default();
    compaction::install(&mut hooks, CompactionConfig::default());
    hooks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_prunes_first_and_does_not_summarise_when_pruning_fits() {
    let script = r#"
responses:
  - match: {last_user_contains: "[task 01]"}
    text: "Reading the big file."
    tool_calls:
      - {id: call_big, name: read, arguments: {path: "big.txt"}}
  - match: {last_user_contains: "[task 01]"}
    text: "Done 01."
  - match: {last_user_contains: "[task 02]"}
    behaviour: context_overflow
  - match: {last_user_contains: "[task 02]"}
    text: "Done 02."
  - text: "SUMMARY: must not be asked for."
"#;
    let f = fixture_config(
        script,
        overflow_compactor(),
        SandboxMode::WorkspaceWrite,
        |c| c.approval = keel_agent::ApprovalPolicy::Allow,
    );
    let body: String = (1..=4000)
        .map(|i| format!("line {i:05} of a big file\n"))
        .collect();
    std::fs::write(f.work.path().join("big.txt"), &body[..30_000]).unwrap();
    for prompt in ["[task 01] read big.txt", "[task 02] and now?"] {
        f.agent.followup(prompt).unwrap();
        let outcome = f.agent.run_pending().await.unwrap().unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed, "{prompt}");
    }
    let t = types(&f);
    let from = t.iter().position(|t| t == "compaction/start").unwrap();
    assert_eq!(
        t[from..from + 5],
        [
            "compaction/start",
            "compaction/prune",
            "tool/result",
            "compaction/end",
            "llm/retry"
        ]
    );
    assert!(!t.iter().any(|t| t == "compaction/summary"));
    let reqs = f.provider.requests();
    // 2 for turn 1, then the overflow and its retry: no summary request.
    assert_eq!(reqs.len(), 4);
    let retried = &reqs[3];
    assert!(request_bytes(retried) < request_bytes(&reqs[2]));
    for prompt in ["[task 01] read big.txt", "[task 02] and now?"] {
        assert!(
            retried.messages.iter().any(|m| m.text() == prompt),
            "{prompt} is still sent as typed"
        );
    }
    assert_no_consecutive_users(&reqs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_summarises_earlier_turns_but_never_the_current_prompt() {
    let script = r#"
responses:
  - match: {last_user_contains: "[task 01]"}
    tool_calls:
      - {id: call_01, name: read, arguments: {path: "f01.txt"}}
  - match: {last_user_contains: "[task 01]"}
    text: "Done 01."
  - match: {last_user_contains: "[task 02]"}
    tool_calls:
      - {id: call_02, name: read, arguments: {path: "f02.txt"}}
  - match: {last_user_contains: "[task 02]"}
    behaviour: context_overflow
  - text: "SUMMARY: f01 was read."
  - text: "Done 02."
"#;
    let f = fixture_config(
        script,
        overflow_compactor(),
        SandboxMode::WorkspaceWrite,
        |c| c.approval = keel_agent::ApprovalPolicy::Allow,
    );
    write_files(&f, 2, 40);
    for prompt in ["[task 01] read f01.txt", "[task 02] read f02.txt"] {
        f.agent.followup(prompt).unwrap();
        let outcome = f.agent.run_pending().await.unwrap().unwrap();
        assert_eq!(outcome.reason, TurnEndReason::Completed, "{prompt}");
    }
    let evs = events(&f);
    assert_eq!(of_type(&evs, "compaction/summary").len(), 1);
    let reqs = f.provider.requests();
    // 2 for turn 1; then step 1, the overflowing step 2, the summary, the retry.
    assert_eq!(reqs.len(), 6);
    let summary = &reqs[4];
    assert!(is_summary_request(&summary.messages));
    let summarised: String = summary.messages.iter().map(Message::text).collect();
    assert!(summarised.contains("[task 01]"));
    assert!(
        !summarised.contains("[task 02]"),
        "the current turn's prompt is not summarised"
    );
    let retried = &reqs[5];
    assert!(
        retried.messages[0]
            .text()
            .contains("SUMMARY: f01 was read.")
    );
    assert!(
        retried
            .messages
            .iter()
            .any(|m| m.text() == "[task 02] read f02.txt"),
        "the prompt is sent as typed"
    );
    assert!(
        retried
            .messages
            .iter()
            .any(|m| m.tool_results().any(|r| r.tool_call_id == "call_02")),
        "the current turn's work is kept"
    );
    assert_no_consecutive_users(&reqs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_turn_overflow_carries_the_prompt_word_for_word_in_the_summary() {
    let script = r#"
responses:
  - tool_calls:
      - {id: call_01, name: read, arguments: {path: "f01.txt"}}
  - behaviour: context_overflow
  - text: "SUMMARY: f01 was read."
  - text: "Done."
"#;
    let f = fixture_config(
        script,
        overflow_compactor(),
        SandboxMode::WorkspaceWrite,
        |c| c.approval = keel_agent::ApprovalPolicy::Allow,
    );
    write_files(&f, 1, 40);
    let prompt = "read f01.txt and\n\ntell me its first line";
    f.agent.followup(prompt).unwrap();
    let outcome = f.agent.run_pending().await.unwrap().unwrap();
    assert_eq!(outcome.reason, TurnEndReason::Completed);
    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 4);
    let summary = reqs[3].messages[0].text();
    assert!(
        summary.ends_with(&format!("{}\n\n{prompt}", SummaryMessage::KEPT)),
        "{summary}"
    );
    assert_no_consecutive_users(&reqs);
}
