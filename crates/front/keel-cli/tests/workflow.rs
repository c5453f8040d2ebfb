//! End-to-end workflows and ralph: the real `keel` binary against the loopback mock model,
//! which answers the parent and every child (children are told apart by their prompts). The
//! plugins are off by default; a user config row switches each on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

fn enable(env: &Env, extra: &str) {
    std::fs::write(
        env.home.join("config.toml"),
        format!("[[plugins]]\nid = \"workflow\"\nenabled = true\n{extra}\n[[plugins]]\nid = \"ralph\"\nenabled = true\n"),
    )
    .unwrap();
}

/// The parent session's events and every child's loaded session.
fn sessions(env: &Env) -> (Vec<Value>, Vec<keel_session::Loaded>) {
    let mut parent = None;
    let mut children = Vec::new();
    for f in env.session_files() {
        let loaded = keel_session::Store::load(&f).unwrap();
        if loaded.session.header().parent_session.is_some() {
            children.push(loaded);
        } else {
            assert!(parent.is_none(), "one parent session");
            parent = Some(to_values(&loaded.session));
        }
    }
    (parent.unwrap(), children)
}

fn first_prompt(child: &keel_session::Loaded) -> String {
    let events = to_values(&child.session);
    of_type(&events, "user/message")
        .iter()
        .filter_map(|e| e["data"]["content"][0]["text"].as_str().map(str::to_owned))
        .find(|t| t.contains("TASK-") || t.contains("STEP-") || t.contains("Objective:"))
        .unwrap_or_default()
}

const SCHEMA_N: &str =
    "{ type: 'object', required: ['n'], properties: { n: { type: 'integer' } } }";

fn fan_out_script() -> String {
    format!(
        r#"interface Count {{ n: number }}
phase('fan out');
const tasks: string[] = ['TASK-1', 'TASK-2', 'TASK-3', 'TASK-4'];
const answers: string[] = await parallel(tasks.map((t: string) => () => agent(`${{t}}: sleep, then answer`, {{ label: t }})), {{ limit: 2 }});
phase('pipeline');
const total = await pipeline(
  () => agent('STEP-A: count the things', {{ schema: {SCHEMA_N}, label: 'count' }}),
  (prev: Count) => agent(`STEP-B: double ${{prev.n}}`, {{ schema: {SCHEMA_N}, label: 'double' }}),
);
log('total is', total);
return {{ answers, total: (total as Count).n, first: args.first }};"#
    )
}

fn child_sleeps(i: u32) -> String {
    format!(
        r#"
  - match: {{ last_user_contains: "TASK-{i}: sleep" }}
    tool_calls:
      - {{ id: call_sleep_{i}, name: bash, arguments: {{ command: "sleep 0.4; echo SLEPT-{i}" }} }}
  - match: {{ last_tool_result_contains: "SLEPT-{i}" }}
    text: "ANSWER-{i}"
"#
    )
}

/// Four agents in `parallel` with limit 2 (never more than two running: the `workflow/agent`
/// events in the parent's log, and the children's sleeps overlap in pairs), then a two-step
/// `pipeline` with a schema where the second child misses its schema once and is told why.
/// A second workflow's child misses its schema twice: the `agent()` call rejects and the
/// workflow fails, naming the schema.
#[test]
fn a_typescript_workflow_fans_out_two_at_a_time_and_holds_children_to_their_schema() {
    let env = Env::new();
    enable(&env, "");
    let script = serde_json::to_string(&fan_out_script()).unwrap();
    let failing = serde_json::to_string(&format!(
        "return await pipeline(\n  () => agent('STEP-C: give json', {{ schema: {SCHEMA_N} }}),\n  (x) => x,\n);"
    ))
    .unwrap();
    let mut yaml = format!(
        r#"
responses:
  - match: {{ last_user_contains: "run the workflow" }}
    tool_calls:
      - id: call_wf
        name: workflow
        arguments:
          meta: {{ name: "fan-out", description: "four agents then a pipeline", phases: [{{ title: "fan out" }}, {{ title: "pipeline" }}] }}
          args: {{ first: "ARG-ONE" }}
          script: {script}
  - match: {{ last_user_contains: "STEP-A" }}
    text: "There are three. {{\"n\": 3}}"
  - match: {{ last_user_contains: "STEP-B: double 3" }}
    text: "I doubled it: six."
  - match: {{ last_user_contains: "does not match the required JSON Schema" }}
    text: "```json\n{{\"n\": 6}}\n```"
  - match: {{ last_tool_result_contains: "ANSWER-4" }}
    tool_calls:
      - id: call_wf2
        name: workflow
        arguments:
          meta: {{ name: "failing", description: "a child that will not comply" }}
          script: {failing}
  - match: {{ last_user_contains: "STEP-C" }}
    text: "no json at all"
  - match: {{ last_user_contains: "does not match the required JSON Schema" }}
    text: "still no json"
  - match: {{ last_tool_result_contains: "WORKFLOW_FAILED" }}
    text: "Done."
"#
    );
    for i in 1..=4 {
        yaml.push_str(&child_sleeps(i));
    }
    let mock = Mock::start(&yaml);
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--approval", "auto", "run", "run the workflow"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");

    let (events, children) = sessions(&env);
    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(!results[0].2, "{results:?}");
    let body: Value = serde_json::from_str(&results[0].1).unwrap();
    assert_eq!(
        body,
        json!({"answers": ["ANSWER-1", "ANSWER-2", "ANSWER-3", "ANSWER-4"], "total": 6, "first": "ARG-ONE"})
    );

    // At most two of the four ran at once, and two did run together.
    let agents: Vec<&Value> = of_type(&events, "workflow/agent");
    let mut running = 0i32;
    let mut most = 0i32;
    for e in agents
        .iter()
        .filter(|e| e["data"]["label"].as_str().unwrap().starts_with("TASK-"))
    {
        match e["data"]["status"].as_str().unwrap() {
            "running" => running += 1,
            _ => running -= 1,
        }
        most = most.max(running);
    }
    assert_eq!(most, 2, "{agents:#?}");
    // Every agent's start and end, with its phase and child session.
    let done: Vec<(String, String, String)> = agents
        .iter()
        .filter(|e| e["data"]["status"] != "running")
        .map(|e| {
            (
                e["data"]["label"].as_str().unwrap().to_owned(),
                e["data"]["phase"].as_str().unwrap_or("").to_owned(),
                e["data"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(done.len(), 7, "{done:?}");
    assert!(done.contains(&("double".into(), "pipeline".into(), "completed".into())));
    assert!(done.contains(&("TASK-3".into(), "fan out".into(), "completed".into())));
    assert!(done.contains(&("agent 1".into(), String::new(), "failed".into())));
    let started = of_type(&events, "workflow/started");
    assert_eq!(started[0]["data"]["phases"], json!(["fan out", "pipeline"]));
    let phases: Vec<&Value> = of_type(&events, "workflow/phase")
        .iter()
        .map(|e| &e["data"]["title"])
        .collect();
    assert_eq!(phases, vec!["fan out", "pipeline"]);
    assert_eq!(
        of_type(&events, "workflow/log")[0]["data"]["message"],
        "total is {\"n\":6}"
    );
    let finished: Vec<&Value> = of_type(&events, "workflow/finished")
        .iter()
        .map(|e| &e["data"]["status"])
        .collect();
    assert_eq!(finished, vec!["completed", "failed"]);

    // The second workflow failed on its child's schema, after telling it once.
    assert!(results[1].2);
    assert!(
        results[1].1.starts_with("WORKFLOW_FAILED: Error: agent \"agent 1\" failed: the agent's answer did not match its schema after it was told why once: it contains no JSON value"),
        "{results:?}"
    );

    // Seven children, each a fresh session under the parent, started by the workflow.
    assert_eq!(children.len(), 7);
    let descriptors = of_type(&events, "subagent/descriptor");
    assert_eq!(descriptors.len(), 7);
    assert!(
        descriptors.iter().all(|d| d["data"]["via"] == "workflow"),
        "{descriptors:?}"
    );
    let prompts: Vec<String> = children.iter().map(first_prompt).collect();
    assert!(
        prompts.iter().any(|p| p.starts_with("STEP-B: double 3")),
        "{prompts:?}"
    );
    // The told child answered twice in its own session.
    let told = children
        .iter()
        .find(|c| first_prompt(c).starts_with("STEP-B"))
        .unwrap();
    let told_events = to_values(&told.session);
    assert_eq!(turn_end_reasons(&told_events).len(), 2);
}

/// A script that throws names the user's line (types stripped, lines kept); one that loops
/// forever stops at the time limit; one that allocates without end stops at the memory limit.
/// Each is a tool error naming what stopped it, and the turn goes on.
#[test]
fn a_workflow_that_throws_loops_or_blows_up_is_a_tool_error_naming_why() {
    let env = Env::new();
    enable(
        &env,
        "[plugins.config]\ntime_limit_sec = 2\nmemory_limit_mib = 16\n",
    );
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "go" }
    tool_calls:
      - id: call_throw
        name: workflow
        arguments:
          meta: { name: "thrower", description: "throws" }
          script: "type T = { a: number };\nconst t: T = { a: 1 };\nthrow new Error('boom ' + t.a);"
  - match: { last_tool_result_contains: "boom" }
    tool_calls:
      - id: call_loop
        name: workflow
        arguments:
          meta: { name: "looper", description: "loops" }
          script: "while (true) {}"
  - match: { last_tool_result_contains: "time limit" }
    tool_calls:
      - id: call_mem
        name: workflow
        arguments:
          meta: { name: "hog", description: "allocates" }
          script: "const a = [];\nwhile (true) a.push('x'.repeat(100000) + a.length);"
  - match: { last_tool_result_contains: "memory" }
    tool_calls:
      - id: call_models
        name: workflow
        arguments:
          meta: { name: "models", description: "unknown model and provider" }
          script: "const errs: string[] = [];\ntry { await agent('M1', { model: 'no-such-model' }); } catch (e) { errs.push(e.code + ' ' + e.message); }\ntry { await agent('M2', { provider: 'elsewhere' }); } catch (e) { errs.push(e.code + ' ' + e.message); }\nreturn errs;"
  - match: { last_tool_result_contains: "no-such-model" }
    tool_calls:
      - id: call_bad
        name: workflow
        arguments:
          meta: { description: "no name" }
          script: "return 1;"
  - match: { last_tool_result_contains: "INVALID_ARGS" }
    text: "Handled."
"#,
    );
    let out = run(env.keel(&mock.base_url()).args(["run", "go"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Handled.\n");
    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 5, "{results:?}");
    // An unknown model and another provider are refused by name, and no child starts.
    let models: Value = serde_json::from_str(&results[3].1).unwrap();
    let models = models.as_array().unwrap();
    assert!(
        models[0]
            .as_str()
            .unwrap()
            .starts_with("INVALID_ARGS unknown model \"no-such-model\""),
        "{models:?}"
    );
    assert!(
        models[1]
            .as_str()
            .unwrap()
            .starts_with("INVALID_ARGS provider \"elsewhere\" is not available"),
        "{models:?}"
    );
    assert_eq!(env.session_files().len(), 1, "no child was started");
    let results: Vec<_> = results
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, r)| r)
        .collect();
    assert!(results.iter().all(|r| r.2), "{results:?}");
    assert!(
        results[0]
            .1
            .starts_with("WORKFLOW_FAILED: Error: boom 1 (uncaught error) at line 3"),
        "{results:?}"
    );
    assert!(
        results[1]
            .1
            .starts_with("WORKFLOW_FAILED: the program ran past its time limit of 2 s")
            && results[1].1.contains("time_limit_sec"),
        "{results:?}"
    );
    assert!(
        results[2].1.contains("(memory limit)") && results[2].1.contains("memory_limit_mib"),
        "{results:?}"
    );
    assert!(
        results[3].1.starts_with("INVALID_ARGS") && results[3].1.contains("meta"),
        "{results:?}"
    );
}

fn handoff(status: &str, tag: &str) -> String {
    serde_json::to_string(&format!(
        "I worked. {{\"status\": \"{status}\", \"summary\": \"{tag}-SUMMARY\", \"next\": \"{tag}-NEXT\"}}"
    ))
    .unwrap()
}

/// Ralph: `maxRounds` over 64 is refused naming it; then three rounds of fresh children, each
/// prompt carrying the previous round's hand-off, until the third says done.
#[test]
fn ralph_runs_rounds_with_hand_offs_until_done() {
    let env = Env::new();
    enable(&env, "");
    let mock = Mock::start(&format!(
        r#"
responses:
  - match: {{ last_user_contains: "keep going" }}
    tool_calls:
      - {{ id: call_many, name: ralph, arguments: {{ objective: "tidy", maxRounds: 65 }} }}
  - match: {{ last_tool_result_contains: "maxRounds" }}
    tool_calls:
      - {{ id: call_ralph, name: ralph, arguments: {{ objective: "OBJECTIVE-TIDY the notes", maxRounds: 5 }} }}
  - match: {{ last_user_contains: "This is round 1 of at most 5" }}
    text: {r1}
  - match: {{ last_user_contains: "R1-NEXT" }}
    text: {r2}
  - match: {{ last_user_contains: "R2-NEXT" }}
    text: {r3}
  - match: {{ last_tool_result_contains: "R3-SUMMARY" }}
    text: "Tidied."
"#,
        r1 = handoff("continue", "R1"),
        r2 = handoff("continue", "R2"),
        r3 = handoff("done", "R3"),
    ));
    let out = run(env.keel(&mock.base_url()).args(["run", "keep going"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Tidied.\n");
    let (events, children) = sessions(&env);
    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].2);
    assert!(
        results[0].1.starts_with("INVALID_ARGS") && results[0].1.contains("`maxRounds`"),
        "{results:?}"
    );
    assert!(!results[1].2, "{results:?}");
    let body: Value = serde_json::from_str(&results[1].1).unwrap();
    assert_eq!(body["status"], "done");
    let summaries: Vec<&Value> = body["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["summary"])
        .collect();
    assert_eq!(summaries, vec!["R1-SUMMARY", "R2-SUMMARY", "R3-SUMMARY"]);
    let rounds: Vec<(u64, String)> = of_type(&events, "ralph/round")
        .iter()
        .map(|e| {
            (
                e["data"]["round"].as_u64().unwrap(),
                e["data"]["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        rounds,
        vec![
            (1, "running".into()),
            (1, "continue".into()),
            (2, "running".into()),
            (2, "continue".into()),
            (3, "running".into()),
            (3, "done".into())
        ]
    );
    // Three fresh children under the parent; round 2's prompt holds round 1's hand-off.
    assert_eq!(children.len(), 3);
    let parent_id = of_type(&events, "subagent/descriptor")
        .iter()
        .map(|d| d["data"]["via"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    assert_eq!(parent_id, vec!["ralph", "ralph", "ralph"]);
    let prompts: Vec<String> = children.iter().map(first_prompt).collect();
    let round2 = prompts
        .iter()
        .find(|p| p.contains("This is round 2 of at most 5"))
        .unwrap();
    assert!(
        round2.contains("OBJECTIVE-TIDY")
            && round2.contains("R1-SUMMARY")
            && round2.contains("R1-NEXT"),
        "{round2}"
    );
    assert!(!round2.contains("R2-"), "{round2}");
}

/// The figure in docs/workflows.md: what `agent()` costs besides the child's own work. Thirty
/// sequential agents against the in-process scripted model (`--script`, no HTTP); each
/// `workflow/agent` start event carries `startUs`, the time from the bridge taking the call
/// (after its permit) to the child existing (session file, agent, descriptor, observers). The
/// engine's own dispatch of a call is measured in keel-codemode's bench (≈ 20 µs).
#[test]
fn agent_start_overhead_figure() {
    let env = Env::new();
    enable(&env, "");
    let n = 30;
    let mut yaml = String::from(
        r#"
responses:
  - match: { last_tool_result_contains: "DONE-BENCH" }
    text: "Benchmarked."
  - match: { last_user_contains: "bench it" }
    tool_calls:
      - id: call_bench
        name: workflow
        arguments:
          meta: { name: "bench", description: "sequential agents" }
          script: "for (let i = 0; i < 30; i++) { await agent('BENCH ' + i); }\nreturn 'DONE-BENCH';"
"#,
    );
    for _ in 0..n {
        yaml.push_str("  - text: \"ok\"\n");
    }
    env.write("script.yaml", &yaml);
    let script = env.ws.join("script.yaml");
    let started = std::time::Instant::now();
    let out = run(env
        .keel_bare()
        .args(["run", "--script", script.to_str().unwrap(), "bench it"]));
    let wall = started.elapsed();
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout, "Benchmarked.\n");
    let (events, children) = sessions(&env);
    assert_eq!(children.len(), n);
    let mut starts: Vec<u64> = of_type(&events, "workflow/agent")
        .iter()
        .filter_map(|e| e["data"]["startUs"].as_u64())
        .collect();
    assert_eq!(starts.len(), n);
    starts.sort_unstable();
    let median = starts[n / 2];
    println!(
        "agent() start: median {median} µs, min {} µs, max {} µs over {n} agents; whole run {} ms",
        starts[0],
        starts[n - 1],
        wall.as_millis()
    );
    // A loose bound (debug build, shared machine); the docs give the measured figure.
    assert!(median < 50_000, "{starts:?}");
}

/// Ctrl-C while a workflow's two children each run a long command: every child's turn is
/// cancelled and its process group killed, the workflow ends `ABORTED` and says so in
/// `workflow/finished`; then the same for ralph's running round.
#[test]
fn cancelling_the_turn_cancels_every_running_child() {
    for tool in ["workflow", "ralph"] {
        let env = Env::new();
        enable(&env, "");
        let call = match tool {
            "workflow" => {
                r#"{ id: call_wf, name: workflow, arguments: { meta: { name: "slow", description: "two slow agents" }, script: "return await parallel([() => agent('SLOW-A'), () => agent('SLOW-B')]);" } }"#
            }
            _ => r#"{ id: call_wf, name: ralph, arguments: { objective: "SLOW-A" } }"#,
        };
        let mock = Mock::start(&format!(
            r#"
responses:
  - match: {{ last_user_contains: "start it" }}
    tool_calls:
      - {call}
  - match: {{ last_user_contains: "SLOW-A" }}
    tool_calls:
      - {{ id: call_a, name: bash, arguments: {{ command: "echo $$ > pid-a.txt; sleep 300; echo done > finished.txt" }} }}
  - match: {{ last_user_contains: "SLOW-B" }}
    tool_calls:
      - {{ id: call_b, name: bash, arguments: {{ command: "echo $$ > pid-b.txt; sleep 300; echo done > finished.txt" }} }}
  - text: "not reached"
  - text: "not reached"
  - text: "not reached"
"#
        ));
        let keel =
            spawn(
                env.keel(&mock.base_url())
                    .args(["--approval", "auto", "run", "start it"]),
            );
        let mut pids = vec![env.wait_for_file("pid-a.txt")];
        if tool == "workflow" {
            pids.push(env.wait_for_file("pid-b.txt"));
        }
        let pgids: Vec<i32> = pids.iter().map(|p| p.trim().parse().unwrap()).collect();
        keel.signal(libc::SIGINT);
        let out = keel.wait();
        assert_eq!(out.code, Some(1), "{tool} stderr:\n{}", out.stderr);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pgids.iter().any(|g| group_alive(*g)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let survived: Vec<bool> = pgids.iter().map(|g| group_alive(*g)).collect();
        for g in &pgids {
            kill_group(*g);
        }
        assert!(
            survived.iter().all(|s| !s),
            "{tool}: a child's command outlived the cancel"
        );
        assert!(!env.ws.join("finished.txt").exists());
        let (events, children) = sessions(&env);
        assert_eq!(children.len(), pgids.len(), "{tool}");
        let results = tool_results(&events);
        assert_eq!(results.len(), 1, "{tool}: {results:?}");
        assert!(
            results[0].2 && results[0].1.starts_with("ABORTED"),
            "{tool}: {results:?}"
        );
        if tool == "workflow" {
            let finished = of_type(&events, "workflow/finished");
            assert_eq!(finished[0]["data"]["status"], "cancelled");
        } else {
            let rounds = of_type(&events, "ralph/round");
            assert_eq!(
                rounds.last().unwrap()["data"]["status"],
                "failed",
                "{rounds:?}"
            );
        }
        // Each child's own turn ended aborted.
        for child in &children {
            let child_events = to_values(&child.session);
            let ends = turn_end_reasons(&child_events);
            assert_eq!(ends.len(), 1, "{tool}: {ends:?}");
            assert_eq!(ends[0]["kind"], "aborted", "{tool}: {ends:?}");
        }
    }
}
