//! Context modes and projection policies on a real agent (scripted model, real files, real
//! session log): native is byte-identical, the host refuses hostile projections, a managed
//! 20-turn session stays under its budget while `history_search` finds turn 1, requests are
//! rebuilt from the log, a replacement during projection recomputes, a third policy plugs in.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_agent::Agent;
use keel_agent::compaction::meter::message_tokens;
use keel_agent::modes::middleware;
use keel_agent::seams::{ContextRequest, HookRegistry, Projection};
use keel_memory::context::{Policy, PolicyInput};
use keel_protocol::{EventBody, Message, MessageSource, Seq, SessionEvent, SurfaceOp};
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture, events_of};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const TURNS: usize = 20;
const WINDOW: u64 = 16_384;

/// Turn n: the human names a word only that turn has; the model reads fNN.txt, then answers.
/// The last turn asks for turn 1's word with `history_search`.
fn script(turns: usize) -> String {
    let mut s = String::from("responses:\n");
    for n in 1..=turns {
        if n == turns {
            s += &format!(
                "  - match: {{last_user_contains: \"[t{n:02}]\"}}\n    tool_calls:\n      - {{id: hs, name: history_search, arguments: {{query: \"what was zebra01 about\"}}}}\n"
            );
        } else {
            s += &format!(
                "  - match: {{last_user_contains: \"[t{n:02}]\"}}\n    text: \"Reading f{n:02}.\"\n    tool_calls:\n      - {{id: r{n:02}, name: read, arguments: {{path: \"f{n:02}.txt\"}}}}\n"
            );
        }
        s += &format!(
            "  - match: {{last_user_contains: \"[t{n:02}]\"}}\n    text: \"Done {n:02}.\"\n"
        );
    }
    s
}

fn files(turns: usize) -> Vec<(String, String)> {
    (1..=turns)
        .map(|n| {
            let body: String = (0..80)
                .map(|l| {
                    format!("file {n:02} line {l:03}: lorem ipsum dolor sit amet consectetur\n")
                })
                .collect();
            (format!("f{n:02}.txt"), body)
        })
        .collect()
}

fn fixture(mut rows: Vec<PluginRow>, hooks: HookRegistry, turns: usize) -> AgentFixture {
    rows.push(PluginRow::new("compaction"));
    agent_fixture(
        &script(turns),
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins: rows,
            hooks,
            files: files(turns),
            edit: Some(Box::new(|c: &mut keel_agent::AgentConfig| {
                c.model_info.context_window = WINDOW;
            })),
            ..AgentOptions::default()
        },
    )
}

async fn drive(agent: &Agent, turns: usize) {
    for n in 1..=turns {
        let word = format!("zebra{n:02}");
        agent
            .followup(&format!("[t{n:02}] remember {word}, then read f{n:02}.txt"))
            .unwrap();
        let outcome = agent.run_pending().await.unwrap().unwrap();
        assert!(outcome.completed(), "turn {n}: {outcome:?}");
    }
}

/// The request bodies a fixture's model received, as the wire carries them.
fn wire(f: &AgentFixture) -> Vec<Vec<u8>> {
    let info = f.agent.config().model_info;
    let cwd = f.cwd.display().to_string();
    f.provider
        .requests()
        .iter()
        .map(|r| {
            String::from_utf8(keel_llm::request_body_bytes(r, &info))
                .unwrap()
                .replace(&cwd, "<cwd>")
                .into_bytes()
        })
        .collect()
}

fn of_type<'a>(evs: &'a [SessionEvent], t: &str) -> Vec<&'a SessionEvent> {
    evs.iter().filter(|e| e.type_name() == t).collect()
}

fn memory(config: Value) -> PluginRow {
    PluginRow::with("memory", &config)
}

/// `native` mode, and the memory row with its tools off, send exactly what keel sends without
/// the plugin: same request bodies, and no `context/*` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_mode_is_byte_identical_to_no_listener() {
    let turns = 4;
    let bare = fixture(vec![], HookRegistry::default(), turns);
    let native = fixture(
        vec![memory(json!({"tools": false, "context_mode": "native"}))],
        HookRegistry::default(),
        turns,
    );
    drive(&bare.agent, turns).await;
    drive(&native.agent, turns).await;
    let (a, b) = (wire(&bare), wire(&native));
    assert_eq!(a.len(), turns * 2);
    for (x, y) in a.iter().zip(&b) {
        pretty_assertions::assert_eq!(
            String::from_utf8_lossy(x),
            String::from_utf8_lossy(y),
            "native mode changed a request body"
        );
    }
    let evs = events_of(&native.agent);
    assert!(of_type(&evs, "context/projection").is_empty());
    assert!(of_type(&evs, "context/mode").is_empty());
}

/// A policy that returns a fixed kind of bad projection.
fn hostile(kind: &'static str) -> HookRegistry {
    let mut hooks = HookRegistry::default();
    hooks
        .context
        .push(middleware(move |req: ContextRequest, _next| {
            Box::pin(async move {
                let seqs: Vec<Seq> = req.nodes.iter().map(|d| d.seq).collect();
                if seqs.is_empty() {
                    return Projection::whole(seqs);
                }
                let include = match kind {
                    // A seq past the end of the log.
                    "foreign" => {
                        let mut v = seqs.clone();
                        v.push(Seq(seqs.last().unwrap().0 + 1_000));
                        v
                    }
                    // A seq that is in the log but not a surface node (the turn's start): the
                    // only way a projection could try to smuggle content in — it returns seqs,
                    // never text, and only surface seqs pass.
                    "injection" => {
                        let log_only = req.agent.with_session(|s| {
                            s.whole_event_iter()
                                .find(|e| e.type_name() == "turn/start")
                                .map(|e| e.seq)
                        });
                        let mut v = seqs.clone();
                        v.extend(log_only);
                        v.sort();
                        v
                    }
                    "reorder" => seqs.iter().rev().copied().collect(),
                    "duplicate" => {
                        let mut v = seqs.clone();
                        v.insert(0, seqs[0]);
                        v
                    }
                    // Keep each tool result, drop the assistant message that called it.
                    "split" => req
                        .nodes
                        .iter()
                        .filter(|d| d.message.tool_calls().next().is_none())
                        .map(|d| d.seq)
                        .collect(),
                    _ => unreachable!(),
                };
                Projection {
                    policy: format!("hostile-{kind}"),
                    include,
                    revision: None,
                }
            })
        }));
    hooks
}

/// Each host invariant against a hostile policy: its result is refused with an error naming
/// the policy, the whole surface is sent instead, and the log stays valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_projections_are_refused_and_the_whole_surface_is_sent() {
    let turns = 3;
    let bare = fixture(vec![], HookRegistry::default(), turns);
    drive(&bare.agent, turns).await;
    let want = wire(&bare);
    for (kind, reason) in [
        ("foreign", "is not on the current surface"),
        ("injection", "is not on the current surface"),
        ("reorder", "order must be kept"),
        ("duplicate", "is included twice"),
        ("split", "are split"),
    ] {
        let f = fixture(vec![], hostile(kind), turns);
        drive(&f.agent, turns).await;
        assert_eq!(wire(&f), want, "{kind}: not the whole surface");
        let evs = events_of(&f.agent);
        let refused = of_type(&evs, "context/projection-refused");
        assert!(!refused.is_empty(), "{kind}: no refusal logged");
        for r in &refused {
            let EventBody::Other(o) = &r.body else {
                unreachable!()
            };
            assert_eq!(o.data["policy"], format!("hostile-{kind}"));
            assert!(
                o.data["reason"].as_str().unwrap().contains(reason),
                "{kind}: {}",
                o.data["reason"]
            );
        }
        // Where there was nothing to break (a split before any tool call), the projection
        // was the whole surface and was logged as such; nothing was ever left out.
        for p in of_type(&evs, "context/projection") {
            let EventBody::ContextProjection(p) = &p.body else {
                unreachable!()
            };
            assert_eq!(p.omitted_count, 0, "{kind}");
        }
        // The log on disk is valid and complete.
        let loaded = keel_session::Store::load(&f.session_path).unwrap();
        assert_eq!(
            loaded.session.len(),
            f.agent.log().session().len(),
            "{kind}"
        );
    }
}

/// Managed mode over 20 turns: every projection fits its budget (half the window), nothing is
/// compacted (pressure is measured on the projection), `history_search` still finds turn 1,
/// and every request is rebuilt from the log alone, exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_session_stays_under_budget_finds_turn_one_and_rebuilds_from_the_log() {
    // Without the projection the same session outgrows the window's compaction threshold.
    let native = fixture(vec![], HookRegistry::default(), TURNS);
    drive(&native.agent, TURNS).await;
    let native_evs = events_of(&native.agent);
    assert!(
        !of_type(&native_evs, "compaction/start").is_empty(),
        "the fixture must need compaction in native mode"
    );

    let f = fixture(
        vec![memory(
            json!({"context_mode": "managed", "policy": "recent"}),
        )],
        HookRegistry::default(),
        TURNS,
    );
    drive(&f.agent, TURNS).await;
    let evs = events_of(&f.agent);
    assert!(of_type(&evs, "compaction/start").is_empty(), "compacted");
    let modes = of_type(&evs, "context/mode");
    assert_eq!(modes.len(), 1);
    let projections = of_type(&evs, "context/projection");
    let requests = f.provider.requests();
    assert_eq!(
        projections.len(),
        requests.len(),
        "one projection per request"
    );
    let budget = WINDOW / 2;
    let mut narrowed = 0;
    for (p, r) in projections.iter().zip(&requests) {
        let EventBody::ContextProjection(p) = &p.body else {
            unreachable!()
        };
        assert_eq!(p.policy, "recent");
        assert_eq!(
            p.revision.as_deref(),
            Some(format!("recent/1 budget={budget}").as_str())
        );
        let history: u64 = r.messages.iter().map(message_tokens).sum();
        assert!(
            history <= budget,
            "turn {} step {}: {history} > {budget}",
            p.turn,
            p.step
        );
        narrowed += usize::from(p.omitted_count > 0);
    }
    assert!(narrowed > 5, "the budget never narrowed the history");
    // Turn 1's word is out of the last requests, and history_search finds it with its seq.
    let last = requests.last().unwrap();
    let found = last
        .messages
        .iter()
        .find_map(|m| {
            m.tool_results()
                .next()
                .map(|r| keel_protocol::message::text_of(&r.content))
                .filter(|t| t.contains("history-data"))
        })
        .expect("the history_search result");
    assert!(found.contains("zebra01"), "{found}");
    assert!(found.contains("seq "), "{found}");
    let turn_one_visible = last
        .messages
        .iter()
        .any(|m| m.source.is_user() && m.text().contains("[t01]"));
    // The first human message is pinned (the task); its word is found either way, but the
    // read of f01 is gone from the request.
    assert!(turn_one_visible, "the task message is pinned");
    assert!(
        !last
            .messages
            .iter()
            .any(|m| m.text().contains("Reading f01")),
        "turn 1's work should be out of the request"
    );

    // Rebuild every request from the session file alone.
    let loaded = keel_session::Store::load(&f.session_path).unwrap();
    let rebuilt = keel_agent::rebuild::rebuild_requests(&loaded.session).unwrap();
    assert_eq!(rebuilt.len(), requests.len());
    for (i, (r, want)) in rebuilt.iter().zip(&requests).enumerate() {
        assert_eq!(&r.request, want, "request {i} differs when rebuilt");
    }
}

/// A listener during which the surface is replaced gets asked again: the projection logged is
/// of the new surface.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_during_projection_recomputes() {
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let replaced = Arc::new(AtomicUsize::new(0));
    // The agent itself, as its owner holds it: a plugin's handle cannot replace the surface
    // (compaction, inside keel-agent, does); this test stands in for one that could.
    let owner: Arc<std::sync::OnceLock<Agent>> = Arc::default();
    let c = calls.clone();
    let mut hooks = HookRegistry::default();
    let o = owner.clone();
    hooks
        .context
        .push(middleware(move |req: ContextRequest, _next| {
            let (c, replaced, owner) = (c.clone(), replaced.clone(), o.clone());
            Box::pin(async move {
                c.lock()
                    .unwrap()
                    .push((req.turn.0, req.step.0, req.generation));
                if req.turn.0 == 2 && replaced.fetch_add(1, Ordering::SeqCst) == 0 {
                    // Replace turn 1 (its first and last surface nodes) by a note.
                    let shadowed: Vec<Seq> = req.nodes[..req.nodes.len() - 1]
                        .iter()
                        .map(|d| d.seq)
                        .collect();
                    let (first, last) = (shadowed[0], *shadowed.last().unwrap());
                    let note = Message::user_text(
                        "[summary of turn 1]",
                        MessageSource::plugin("test/replacer"),
                        "replacement-1",
                    );
                    owner
                        .get()
                        .unwrap()
                        .push_surface(
                            EventBody::UserMessage(Box::new(note)),
                            SurfaceOp::Replace {
                                start: first,
                                end: last,
                            },
                            shadowed,
                        )
                        .unwrap();
                }
                Projection {
                    policy: "everything".into(),
                    include: req.nodes.iter().map(|d| d.seq).collect(),
                    revision: Some(format!("everything gen={}", req.generation)),
                }
            })
        }));
    let f = fixture(vec![], hooks, 2);
    owner.set(f.agent.clone()).unwrap();
    drive(&f.agent, 2).await;
    let evs = events_of(&f.agent);
    let gens: Vec<(u32, u32, u64)> = of_type(&evs, "context/projection")
        .iter()
        .map(|e| match &e.body {
            EventBody::ContextProjection(p) => (p.turn.0, p.step.0, p.surface_generation),
            _ => unreachable!(),
        })
        .collect();
    // Turn 2 step 1 was computed twice (before and after the replacement), logged once, of
    // generation 1; the request carries the note.
    assert_eq!(gens, vec![(1, 1, 0), (1, 2, 0), (2, 1, 1), (2, 2, 1)]);
    let seen = calls.lock().unwrap().clone();
    let first = seen.iter().position(|c| *c == (2, 1, 0)).unwrap();
    assert!(seen[first + 1..].contains(&(2, 1, 1)), "{seen:?}");
    let third = &f.provider.requests()[2];
    assert!(
        third
            .messages
            .iter()
            .any(|m| m.text() == "[summary of turn 1]")
    );
    assert!(!third.messages.iter().any(|m| m.text().contains("[t01]")));
    let loaded = keel_session::Store::load(&f.session_path).unwrap();
    let rebuilt = keel_agent::rebuild::rebuild_requests(&loaded.session).unwrap();
    assert_eq!(rebuilt[2].request, *third);
}

/// A policy from outside the crate: keep only the required nodes and every other older one.
struct EveryOther;

impl Policy for EveryOther {
    fn name(&self) -> &str {
        "every-other"
    }
    fn revision(&self, _input: &PolicyInput<'_>) -> String {
        "every-other/1".into()
    }
    fn project(&self, input: &PolicyInput<'_>) -> Vec<Seq> {
        let units = input.index.units();
        input.index.seqs_of(
            units
                .iter()
                .enumerate()
                .filter(|(u, _)| u % 2 == 0)
                .flat_map(|(_, members)| members.iter().copied()),
        )
    }
}

/// A third policy is added without touching keel-memory: an embedder's plugin set carries the
/// memory plugin with it, and `policy = "every-other"` selects it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_policy_plugs_in_from_outside_the_crate() {
    let turns = 4;
    let mut set = keel_host::plugins::builtin();
    set.retain(|p| p.id().as_str() != "memory");
    set.push(Box::new(
        keel_memory::MemoryPlugin::default().with_policy(Arc::new(EveryOther)),
    ));
    let f = agent_fixture(
        &script(turns),
        AgentOptions {
            approval: keel_agent::ApprovalPolicy::Allow,
            plugins: vec![
                memory(json!({"context_mode": "managed", "policy": "every-other"})),
                PluginRow::new("compaction"),
            ],
            files: files(turns),
            plugin_set: Some(set),
            ..AgentOptions::default()
        },
    );
    drive(&f.agent, turns).await;
    let evs = events_of(&f.agent);
    let p = of_type(&evs, "context/projection");
    let EventBody::ContextProjection(last) = &p.last().unwrap().body else {
        unreachable!()
    };
    assert_eq!(last.policy, "every-other");
    assert_eq!(last.revision.as_deref(), Some("every-other/1"));
    assert!(last.omitted_count > 0);
    // Unknown policy names are refused at build, naming the ones there are.
    let err = std::panic::catch_unwind(|| {
        agent_fixture(
            "responses: []\n",
            AgentOptions {
                plugins: vec![
                    memory(json!({"context_mode": "managed", "policy": "nope"})),
                    PluginRow::new("compaction"),
                ],
                ..AgentOptions::default()
            },
        )
    });
    assert!(err.is_err());
}

/// `managed` is refused, naming the missing part, when compaction is disabled.
#[test]
fn managed_mode_is_refused_without_compaction() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[[plugins]]\nid = \"compaction\"\nenabled = false\n\n[[plugins]]\nid = \"memory\"\nenabled = true\n[plugins.config]\ncontext_mode = \"managed\"\n",
    )
    .unwrap();
    let host = keel_host::Host::load(&keel_host::Sources::for_workspace(
        home.path().into(),
        work.path().into(),
    ))
    .unwrap();
    let provider: Arc<dyn keel_llm::Provider> = Arc::new(
        keel_llm::ScriptedProvider::from_str("responses: []\n", keel_llm::ScriptFormat::Yaml)
            .unwrap(),
    );
    let factory = host
        .factory(
            keel_host::Flags {
                model: Some("deepseek-v4-flash".into()),
                ..keel_host::Flags::default()
            },
            keel_host::ModelSource::Provider(provider),
        )
        .unwrap();
    let log = factory.new_session(keel_host::LogFormat::Plain).unwrap();
    let err = factory
        .build(log, keel_host::BuildOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("context mode managed is refused"), "{err}");
    assert!(err.contains("`compaction` plugin row is disabled"), "{err}");
}

/// `relevant` brings back an old turn that shares words with the current message; `recent`
/// over the same session does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relevant_brings_back_an_old_turn_that_matches_the_question() {
    let turns = 12;
    let mut s = script(turns - 1);
    s += "  - match: {last_user_contains: \"[ask]\"}\n    text: \"It was about zebra03.\"\n";
    let mut last_messages = Vec::new();
    for policy in ["relevant", "recent"] {
        let f = agent_fixture(
            &s,
            AgentOptions {
                approval: keel_agent::ApprovalPolicy::Allow,
                plugins: vec![
                    memory(
                        json!({"context_mode": "managed", "policy": policy, "budget_fraction": 0.25}),
                    ),
                    PluginRow::new("compaction"),
                ],
                files: files(turns),
                edit: Some(Box::new(|c: &mut keel_agent::AgentConfig| {
                    c.model_info.context_window = WINDOW;
                })),
                ..AgentOptions::default()
            },
        );
        drive(&f.agent, turns - 1).await;
        f.agent
            .followup("[ask] what did I say about zebra03 and f03.txt?")
            .unwrap();
        assert!(f.agent.run_pending().await.unwrap().unwrap().completed());
        let last = f.provider.requests().last().unwrap().clone();
        last_messages.push(
            last.messages
                .iter()
                .map(|m| m.text())
                .collect::<Vec<_>>()
                .join("\n"),
        );
        let evs = events_of(&f.agent);
        let p = of_type(&evs, "context/projection");
        let EventBody::ContextProjection(p) = &p.last().unwrap().body else {
            unreachable!()
        };
        assert_eq!(p.policy, policy);
        assert!(p.omitted_count > 0, "{policy}: nothing left out");
    }
    assert!(last_messages[0].contains("[t03]"), "relevant missed turn 3");
    assert!(!last_messages[1].contains("[t03]"), "recent kept turn 3");
}

/// The mode is logged and kept by a resume; a resume asking for `native` switches back (at
/// build, between turns) and sends the whole history again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_keeps_the_logged_mode_and_can_switch_it_between_turns() {
    let turns = 8;
    let AgentFixture {
        home,
        work: _work,
        cwd,
        agent,
        session_path,
        ..
    } = fixture(
        vec![memory(
            json!({"context_mode": "managed", "budget_fraction": 0.2}),
        )],
        HookRegistry::default(),
        turns,
    );
    drive(&agent, turns - 2).await;
    drop(agent);
    let config = |mode: Option<&str>| {
        let row = match mode {
            Some(m) => format!(
                "[[plugins]]\nid = \"memory\"\nenabled = true\n[plugins.config]\ncontext_mode = \"{m}\"\n"
            ),
            None => "[[plugins]]\nid = \"memory\"\nenabled = true\n".to_owned(),
        };
        std::fs::write(home.path().join("config.toml"), row).unwrap();
    };
    let resume = || {
        keel_testkit::agent::resume_fixture(
            home.path(),
            &cwd,
            &session_path,
            &script(turns),
            keel_agent::ApprovalPolicy::Allow,
        )
    };
    // Resumed with the row but no mode: still managed (narrowed requests, no new mode event).
    config(None);
    let (agent, provider) = resume();
    drive_one(&agent, turns - 1).await;
    let surface = agent.log().derive_messages().len();
    assert!(
        provider
            .requests()
            .iter()
            .all(|r| r.messages.len() < surface),
        "a resumed managed session sent its whole history"
    );
    assert_eq!(of_type(&events_of(&agent), "context/mode").len(), 1);
    drop(agent);
    // Resumed asking for native: one more mode event, and the whole surface is sent.
    config(Some("native"));
    let (agent, provider) = resume();
    drive_one(&agent, turns).await;
    let evs = events_of(&agent);
    let modes = of_type(&evs, "context/mode");
    assert_eq!(modes.len(), 2);
    let EventBody::Other(o) = &modes[1].body else {
        unreachable!()
    };
    assert_eq!(o.data["mode"], "native");
    // The last request carried everything but the answer it produced.
    let last = provider.requests().last().unwrap().messages.len();
    assert_eq!(
        last + 1,
        agent.log().derive_messages().len(),
        "native sends the whole surface"
    );
}

async fn drive_one(agent: &Agent, n: usize) {
    agent
        .followup(&format!(
            "[t{n:02}] remember zebra{n:02}, then read f{n:02}.txt"
        ))
        .unwrap();
    assert!(agent.run_pending().await.unwrap().unwrap().completed());
}
