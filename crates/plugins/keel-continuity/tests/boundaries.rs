//! The other boundaries, end to end on a real agent: cold resume of a compacted session,
//! spawned and forked subagents (lineage, delegation anchor, an inherited replacement is not a
//! boundary), the same-step retry after a context overflow, and the max-tokens continuation
//! budget across a resume.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::agent::Agent;
use keel_agent::compaction::{self, CompactionReason};
use keel_llm::ScriptedProvider;
use keel_protocol::{EventBody, KnownSource, MessageSource, SessionEvent, TurnEndReason};
use keel_testkit::agent::{
    AgentFixture, AgentOptions, PluginRow, agent_fixture, events_of, load_session, resume_fixture,
};
use pretty_assertions::assert_eq;
use std::path::Path;
use std::sync::Arc;

const SUMMARY: &str = "  - match: {last_message_contains: \"Context compaction\"}\n    text: \"SUMMARY: earlier turns were about codewords.\"\n";

fn fixture(script: &str, plugins: Vec<PluginRow>) -> AgentFixture {
    agent_fixture(
        script,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            ..AgentOptions::default()
        },
    )
}

fn rows(extra: &[(&'static str, &str)]) -> Vec<PluginRow> {
    let mut rows = vec![PluginRow::new("compaction"), PluginRow::new("continuity")];
    for (id, toml_text) in extra {
        let config: toml::Table = toml::from_str(toml_text).unwrap();
        rows.retain(|r| r.id != *id);
        rows.push(PluginRow { id, config });
    }
    rows
}

async fn turn(agent: &Agent, prompt: &str) -> keel_agent::TurnOutcome {
    agent.followup(prompt).unwrap();
    agent.run_pending().await.unwrap().unwrap()
}

/// Build a new agent on the session file at `path` (a cold resume), with `script`.
fn resume(home: &Path, cwd: &Path, path: &Path, script: &str) -> (Agent, Arc<ScriptedProvider>) {
    resume_fixture(home, cwd, path, script, keel_agent::ApprovalPolicy::Allow)
}

fn projections(evs: &[SessionEvent]) -> Vec<serde_json::Value> {
    evs.iter()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == "continuity/projection" => {
                assert!(e.ignorable, "continuity/projection is ignorable");
                Some(o.data.clone())
            }
            _ => None,
        })
        .collect()
}

fn projection_texts(evs: &[SessionEvent]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) => match &m.source {
                MessageSource::Known(KnownSource::Plugin { plugin, .. })
                    if plugin == "keel/continuity" =>
                {
                    Some(m.text())
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn sent(provider: &ScriptedProvider) -> Vec<String> {
    provider
        .requests()
        .iter()
        .map(|r| serde_json::to_string(&r.messages).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_resume_of_a_compacted_session_projects_once() {
    let script = format!(
        "responses:\n{SUMMARY}  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Fine.\"\n"
    );
    let f = fixture(&script, rows(&[]));
    assert_eq!(
        turn(&f.agent, "[T0] the codeword is ZEBRA-7").await.reason,
        TurnEndReason::Completed
    );
    assert_eq!(
        turn(&f.agent, "[T1] and the second is OKAPI-3")
            .await
            .reason,
        TurnEndReason::Completed
    );
    // `keel compact` between turns: a replacement, and no request after it in this process.
    compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    assert!(
        f.agent
            .log()
            .session()
            .surface()
            .last_replacement()
            .is_some()
    );
    assert!(
        projections(&events_of(&f.agent)).is_empty(),
        "nothing is sent, nothing projected"
    );
    let AgentFixture {
        home,
        work: _work,
        cwd,
        agent,
        session_path,
        ..
    } = f;
    drop(agent);

    let next = "responses:\n  - match: {last_user_contains: \"[T2]\"}\n    text: \"Both codewords noted.\"\n";
    let (agent, provider) = resume(home.path(), &cwd, &session_path, next);
    assert_eq!(
        turn(&agent, "[T2] what were the codewords?")
            .await
            .final_text,
        "Both codewords noted."
    );
    let evs = events_of(&agent);
    let p = projections(&evs);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0]["kind"], "resume");
    let text = projection_texts(&evs).pop().unwrap();
    assert!(text.contains("[T0] the codeword is ZEBRA-7"), "{text}");
    assert!(
        sent(&provider)[0].contains("ZEBRA-7"),
        "the request carries the human's words"
    );
    drop(agent);

    // A second resume: no new boundary, no second projection.
    let again =
        "responses:\n  - match: {last_user_contains: \"[T3]\"}\n    text: \"Still noted.\"\n";
    let (agent, provider) = resume(home.path(), &cwd, &session_path, again);
    turn(&agent, "[T3] anything else?").await;
    assert_eq!(projections(&events_of(&agent)).len(), 1);
    assert_eq!(
        sent(&provider)[0].matches("Continuity (").count(),
        1,
        "the one projection is still on the surface, not sent again"
    );
}

fn child_script() -> String {
    format!(
        "responses:\n{SUMMARY}  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Delegating.\"\n    tool_calls:\n      - {{id: c_child, name: subagent, arguments: {{description: \"check\", prompt: \"[CHILD] check the codeword\"}}}}\n  - match: {{last_user_contains: \"[CHILD]\"}}\n    text: \"CHILD-RESULT: checked.\"\n  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Done.\"\n"
    )
}

/// The child's session, from the parent's `subagent/descriptor`.
fn child_events(f: &AgentFixture) -> (String, Vec<SessionEvent>) {
    keel_testkit::agent::child_session_events(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_child_gets_the_projection_with_lineage_in_its_first_request() {
    let mut plugins = rows(&[]);
    plugins.push(PluginRow::new("subagent"));
    let f = fixture(&child_script(), plugins);
    turn(&f.agent, "[T0] the codeword is ZEBRA-7").await;
    assert_eq!(
        turn(&f.agent, "[T1] ask a subagent to check it")
            .await
            .final_text,
        "Done."
    );
    let parent = f.agent.session_id().to_string();
    let (child, evs) = child_events(&f);
    let p = projections(&evs);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0]["kind"], "spawn");
    assert_eq!(p[0]["sourceSession"], parent.as_str());
    let text = projection_texts(&evs).pop().unwrap();
    assert!(
        text.contains("[T0] the codeword is ZEBRA-7"),
        "the parent's human words: {text}"
    );
    assert!(text.contains("[T1] ask a subagent to check it"), "{text}");
    assert!(text.contains(&format!("root session {parent}")), "{text}");
    assert!(text.contains(&format!("this session {child}")), "{text}");
    // The child's first message, as anchored and as logged.
    let first = evs
        .iter()
        .find_map(|e| match &e.body {
            EventBody::UserMessage(m) if m.text().contains("[CHILD]") => Some(m.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        text.contains(&format!("first message {}", first.id)),
        "{text}"
    );
    let anchors = keel_continuity::anchors::Anchors::new(f.home.path());
    let d = anchors
        .delegation(&child)
        .unwrap()
        .expect("a delegation anchor");
    assert_eq!(d.root_session_id, parent);
    assert_eq!(d.parent_session_id, parent);
    assert_eq!(d.initial_message.id, first.id);
    assert_eq!(
        d.initial_message.digest,
        keel_continuity::anchors::content_digest(&first.content)
    );
    // Its first request carried the projection, joined before its prompt.
    let child_req = f
        .provider
        .requests()
        .into_iter()
        .find(|r| r.messages.iter().any(|m| m.text().contains("[CHILD]")))
        .unwrap();
    assert!(
        child_req
            .messages
            .iter()
            .any(|m| m.text().contains("Continuity (spawn"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_seeded_with_a_replacement_projects_only_its_own_boundary() {
    let mut plugins = rows(&[]);
    let config: toml::Table = toml::from_str("mode = \"fork\"").unwrap();
    plugins.push(PluginRow {
        id: "subagent",
        config,
    });
    let f = fixture(&child_script(), plugins);
    turn(&f.agent, "[T0] the codeword is ZEBRA-7").await;
    turn(&f.agent, "[T0] and remember OKAPI-3").await;
    compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    assert!(
        f.agent
            .log()
            .session()
            .surface()
            .last_replacement()
            .is_some()
    );
    // A turn after the compaction, so the fork's seed (up to the last turn end) holds it.
    turn(&f.agent, "[T0] and a third: IBEX-9").await;
    turn(&f.agent, "[T1] ask a subagent to check it").await;
    // The parent answered its own replacement once.
    let parent = projections(&events_of(&f.agent));
    assert_eq!(parent.len(), 1);
    assert_eq!(parent[0]["kind"], "replace");

    let (_, evs) = child_events(&f);
    let seed = evs
        .iter()
        .position(|e| e.type_name() == "session/end-seed")
        .expect("a fork's seed ends with session/end-seed");
    let inherited_replace = evs
        .iter()
        .take(seed)
        .any(|e| matches!(e.surface_op, Some(keel_protocol::SurfaceOp::Replace { .. })));
    assert!(
        inherited_replace,
        "the fork's seed holds the parent's replacement"
    );
    // The seed carries the parent's own projection; the child adds one: its fork boundary,
    // not another for the inherited replacement.
    let inherited = projections(&evs[..seed]);
    assert_eq!(inherited.len(), 1);
    assert_eq!(inherited[0]["kind"], "replace");
    let own = projections(&evs[seed..]);
    assert_eq!(own.len(), 1, "the fork boundary only: {own:?}");
    assert_eq!(own[0]["kind"], "fork");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_step_retry_after_an_overflow_carries_the_projection() {
    let script = format!(
        "responses:\n{SUMMARY}  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Fine.\"\n  - match: {{last_user_contains: \"[T2]\"}}\n    behaviour: context_overflow\n  - match: {{last_user_contains: \"[T2]\"}}\n    text: \"ZEBRA-7.\"\n"
    );
    let f = fixture(&script, rows(&[]));
    turn(&f.agent, "[T0] the codeword is ZEBRA-7").await;
    turn(&f.agent, "[T1] remember it").await;
    let o = turn(&f.agent, "[T2] what was the codeword?").await;
    assert_eq!(o.reason, TurnEndReason::Completed);
    assert_eq!(o.final_text, "ZEBRA-7.");
    let evs = events_of(&f.agent);
    let types: Vec<&str> = evs.iter().map(|e| e.type_name()).collect();
    let retry = types
        .iter()
        .position(|t| *t == "llm/retry")
        .expect("the step was retried");
    let projected = types
        .iter()
        .position(|t| *t == "continuity/projection")
        .expect("a projection");
    assert!(
        projected > retry,
        "projected for the retried request: {types:?}"
    );
    let reqs = f.provider.requests();
    let overflowed = &reqs[reqs.len() - 2];
    let retried = reqs.last().unwrap();
    let has = |r: &keel_llm::ChatRequest| {
        r.messages
            .iter()
            .any(|m| m.text().contains("Continuity (replace"))
    };
    assert!(!has(overflowed));
    assert!(has(retried), "the retried request carries the projection");
    assert!(
        retried
            .messages
            .iter()
            .any(|m| m.text().contains("[T0] the codeword is ZEBRA-7")),
        "with the human's words that were summarised"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_continuation_budget_survives_a_resume() {
    // Every answer is cut at the output limit; one continuation is allowed per task.
    let cut = "  - text: \"partial answer\"\n    finish: length\n";
    let script = format!("responses:\n{cut}{cut}{cut}");
    let f = fixture(
        &script,
        rows(&[("continuity", "max_token_continuations = 1")]),
    );
    let o = turn(&f.agent, "[T0] write a long essay").await;
    assert_eq!(o.reason, TurnEndReason::MaxTokens);
    // The continuation was queued as a new turn (not a steer) and ran in the same run; then
    // the budget of 1 was spent.
    assert!(!f.agent.has_pending_turn(), "the budget of 1 is spent");
    let count = |evs: &[SessionEvent]| {
        keel_continuity::continuation::continuations(&{
            let mut s =
                keel_session::Session::new(keel_protocol::SessionHeader::new("x".into(), 0, None));
            for e in evs {
                s.append(e.clone()).unwrap();
            }
            s
        })
    };
    assert_eq!(count(&events_of(&f.agent)), 1);
    let starts = events_of(&f.agent)
        .iter()
        .filter(|e| e.type_name() == "turn/start")
        .count();
    assert_eq!(starts, 2, "the continuation is its own turn");
    let AgentFixture {
        home,
        work: _work,
        cwd,
        agent,
        session_path,
        ..
    } = f;
    drop(agent);

    // After a resume the budget is still spent: the log says so.
    let (agent, _) = resume(
        home.path(),
        &cwd,
        &session_path,
        &format!("responses:\n{cut}"),
    );
    let o = turn(&agent, "[T1] and another").await;
    assert_eq!(o.reason, TurnEndReason::MaxTokens);
    assert!(
        !agent.has_pending_turn(),
        "no continuation after the resume"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_disagrees_with_its_anchor_stops_the_turn_naming_the_file() {
    let script = format!(
        "responses:\n{SUMMARY}  - match: {{last_user_contains: \"[T0]\"}}\n    text: \"Noted.\"\n  - match: {{last_user_contains: \"[T1]\"}}\n    text: \"Fine.\"\n  - text: \"never sent\"\n"
    );
    let f = fixture(&script, rows(&[]));
    turn(&f.agent, "[T0] the codeword is ZEBRA-7").await;
    turn(&f.agent, "[T1] and OKAPI-3").await;
    // Someone rewrites what the anchor says the human typed at T0.
    let anchors = keel_continuity::anchors::Anchors::new(f.home.path());
    let root = f.agent.session_id().to_string();
    let path = anchors.authority_path(&root);
    let mut a = anchors.authority(&root).unwrap();
    assert_eq!(
        a.sources.len(),
        2,
        "both human messages anchored as they were committed"
    );
    a.sources[0].digest = keel_continuity::anchors::text_digest("something else");
    std::fs::write(&path, serde_json::to_vec(&a).unwrap()).unwrap();
    compaction::compact_now(&f.agent, CompactionReason::Manual)
        .await
        .unwrap();
    f.agent.followup("[T2] go on").unwrap();
    let e = f.agent.run_pending().await.unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("plugin continuity"), "{msg}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("was anchored with digest"), "{msg}");
    // No request went out with an unverified projection.
    assert_eq!(f.provider.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_gets_the_root_humans_words_and_its_whole_lineage() {
    let script = "responses:\n  - match: {last_user_contains: \"[T0]\"}\n    text: \"Delegating.\"\n    tool_calls:\n      - {id: c1, name: subagent, arguments: {description: \"child\", prompt: \"[CHILD] delegate again\"}}\n  - match: {last_user_contains: \"[CHILD]\"}\n    text: \"Delegating further.\"\n    tool_calls:\n      - {id: c2, name: subagent, arguments: {description: \"grandchild\", prompt: \"[GRAND] check ZEBRA-7\"}}\n  - match: {last_user_contains: \"[GRAND]\"}\n    text: \"GRAND-RESULT: fine.\"\n  - match: {last_user_contains: \"[CHILD]\"}\n    text: \"CHILD-RESULT: fine.\"\n  - match: {last_user_contains: \"[T0]\"}\n    text: \"Done.\"\n";
    let mut plugins = rows(&[]);
    let config: toml::Table = toml::from_str("max_depth = 2").unwrap();
    plugins.push(PluginRow {
        id: "subagent",
        config,
    });
    let f = fixture(script, plugins);
    assert_eq!(
        turn(&f.agent, "[T0] the codeword is ZEBRA-7; get it checked")
            .await
            .final_text,
        "Done."
    );
    let root = f.agent.session_id().to_string();
    let sessions = f.session_path.parent().unwrap().parent().unwrap();
    let mut grand = None;
    let mut child = None;
    for entry in std::fs::read_dir(sessions).unwrap() {
        let s = load_session(&entry.unwrap().path());
        match s.header().delegation_depth {
            1 => child = Some(s),
            2 => grand = Some(s),
            _ => {}
        }
    }
    let (child, grand) = (child.unwrap(), grand.unwrap());
    let evs: Vec<SessionEvent> = grand.events().map(|e| e.into_owned()).collect();
    let p = projections(&evs);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0]["kind"], "spawn");
    let text = projection_texts(&evs).pop().unwrap();
    assert!(
        text.contains("[T0] the codeword is ZEBRA-7; get it checked"),
        "{text}"
    );
    assert!(text.contains(&format!("root session {root}")), "{text}");
    assert!(
        text.contains(&format!("parent session {}", child.header().id)),
        "{text}"
    );
    let anchors = keel_continuity::anchors::Anchors::new(f.home.path());
    let d = anchors
        .delegation(&grand.header().id.to_string())
        .unwrap()
        .unwrap();
    assert_eq!(d.root_session_id, root);
    assert_eq!(d.parent_session_id, child.header().id.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_continuation_while_a_newer_human_message_waits() {
    // Every answer is cut at the output limit; the human types again before the turn ends.
    let cut = "  - text: \"partial answer\"\n    finish: length\n";
    let script = format!("responses:\n{cut}{cut}  - text: \"the rest\"\n");
    let mut hooks = keel_agent::HookRegistry::default();
    let typed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = typed.clone();
    hooks.turn_stopping.push(std::sync::Arc::new(
        move |t: &keel_agent::seams::TurnStopping| {
            if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                t.agent
                    .followup("[T1] actually, stop and summarise")
                    .unwrap();
            }
            Box::pin(async { keel_agent::seams::StopDecision::Stop })
        },
    ));
    let mut plugins = rows(&[("continuity", "max_token_continuations = 2")]);
    plugins.retain(|r| r.id == "continuity");
    let f = agent_fixture(
        &script,
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins,
            hooks,
            ..AgentOptions::default()
        },
    );
    // T0 (cut; the human typed meanwhile), T1 (cut; nothing waits: a continuation), the
    // continuation's turn.
    let o = turn(&f.agent, "[T0] write a long essay").await;
    assert_eq!(o.final_text, "the rest");
    assert!(typed.load(std::sync::atomic::Ordering::SeqCst));
    let evs = events_of(&f.agent);
    // The human's message took the next turn; no continuation was queued for T0.
    let texts: Vec<String> = evs
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::UserMessage(m) if m.source.is_user() => Some(m.text()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        [
            "[T0] write a long essay",
            "[T1] actually, stop and summarise"
        ]
    );
    let continuations = evs
        .iter()
        .filter(|e| {
            matches!(&e.body, EventBody::UserMessage(m)
            if matches!(&m.source, MessageSource::Known(KnownSource::Plugin { extra, .. })
                if extra.get("form").is_some_and(|f| f == "continuation")))
        })
        .count();
    // T1 was cut too and nothing else waited: one continuation, after T1, not after T0.
    assert_eq!(
        continuations,
        1,
        "{:?}",
        evs.iter().map(|e| e.type_name()).collect::<Vec<_>>()
    );
    // It was queued when T1 ended, not when T0 did (while the human's message waited).
    let queued = evs
        .iter()
        .position(|e| {
            matches!(&e.body, EventBody::InboxSpliced(i)
                if i.inserted.iter().any(|m| m.text().starts_with("Your previous answer was cut off")))
        })
        .expect("the continuation entered the inbox");
    let t1 = evs
        .iter()
        .position(|e| matches!(&e.body, EventBody::UserMessage(m) if m.text().starts_with("[T1]")))
        .unwrap();
    assert!(queued > t1, "queued at {queued}, before T1 (at {t1}) ran");
}
