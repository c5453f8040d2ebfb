//! Named subagent definitions (`agents/*.md`) end to end: real files in a trusted workspace and
//! a plugin bundle, the `agent` parameter offered with their names, a named child whose first
//! request carries the definition's body and only its tools; an untrusted workspace's
//! definitions unread; unknown names refused; broken files skipped and logged.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use keel_agent::Agent;
use keel_agent::plugin::{Bundle, InstallContext, Plugin, PluginError, PluginId, ProjectTrust};
use keel_agent::subagent::{SubagentPlugin, defs};
use keel_protocol::{EventBody, SessionEvent};
use keel_testkit::agent::{AgentFixture, AgentOptions, PluginRow, agent_fixture, write_file};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::*;

/// The `subagent` plugin with one bundle in its install context (the host fills
/// `ctx.bundles` from the installed bundles; here the test does).
struct WithBundle(Bundle);

impl Plugin for WithBundle {
    fn id(&self) -> PluginId {
        keel_agent::subagent::ID
    }
    fn description(&self) -> &'static str {
        "subagent, with a bundle"
    }
    fn enabled_by_default(&self) -> bool {
        true
    }
    fn install(&self, ctx: &mut InstallContext, config: Value) -> Result<(), PluginError> {
        ctx.bundles.push(self.0.clone());
        SubagentPlugin.install(ctx, config)
    }
}

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews diffs for bugs\n\
tools: Read, Grep, NoSuchTool\nmodel: sonnet\n---\n\nREVIEWER-BODY: look for bugs, report them.\n";
const TESTER: &str = "---\ndescription: Runs the tests\n---\nTESTER-BODY: run the tests.\n";

fn fixture(
    script: &str,
    files: &[(&str, &str)],
    trust: ProjectTrust,
    bundle: Option<Bundle>,
) -> AgentFixture {
    // The host fills `ctx.bundles` from the bundles installed; here the built-in set's
    // `subagent` is replaced by one that adds the test's bundle.
    let plugin_set = bundle.map(|b| {
        let mut set = keel_host::plugins::builtin();
        set.retain(|pl| pl.id() != keel_agent::subagent::ID);
        set.push(Box::new(WithBundle(b)) as Box<dyn Plugin>);
        set
    });
    let plugins = vec![PluginRow::new("jobs"), PluginRow::new("subagent")];
    agent_fixture(
        script,
        AgentOptions {
            files: files
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            plugins,
            plugin_set,
            project_trust: trust,
            ..AgentOptions::default()
        },
    )
}

fn schema<'a>(req: &'a keel_llm::ChatRequest, name: &str) -> &'a keel_protocol::ToolSchema {
    req.tools.iter().find(|t| t.name == name).unwrap()
}

fn tool_names(req: &keel_llm::ChatRequest) -> Vec<String> {
    req.tools.iter().map(|t| t.name.clone()).collect()
}

fn descriptors(agent: &Agent) -> Vec<String> {
    events_of(agent)
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::SubagentDescriptor(d) => Some(d.child_session.to_string()),
            _ => None,
        })
        .collect()
}

/// The first user message of the child's session after the runtime context, as JSON.
fn first_prompt_source(f: &AgentFixture, child: &str) -> Value {
    let log = load(&keel_testkit::agent::session_file(f, child));
    let events: Vec<SessionEvent> = log.events().map(|e| e.into_owned()).collect();
    serde_json::to_value(&user_messages(&events)[1].source).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_and_bundle_definitions_are_offered_and_a_named_child_runs_one() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: subagent, arguments: {description: "review", prompt: "Review the diff.", agent: reviewer}}
  - text: "No bugs."
  - tool_calls:
      - {id: c2, name: subagent, arguments: {description: "test", prompt: "Run them.", subagent_type: "kit:tester"}}
  - text: "Tests pass."
  - text: "Reviewed and tested."
"#;
    let bundle_dir = tempfile::tempdir().unwrap();
    let bundle_root = bundle_dir.path().canonicalize().unwrap();
    write_file(&bundle_root, "agents/tester.md", TESTER);
    let f = fixture(
        script,
        &[(".claude/agents/reviewer.md", REVIEWER)],
        ProjectTrust::Trusted,
        Some(Bundle {
            name: "kit".into(),
            root: bundle_root,
        }),
    );
    f.agent.followup("Review and test.").unwrap();
    let outcome = guarded(f.agent.run_until_idle()).await.unwrap().unwrap();
    assert_eq!(outcome.final_text, "Reviewed and tested.");
    assert_eq!(
        tool_results(&events_of(&f.agent)),
        ["No bugs.", "Tests pass."]
    );

    let reqs = f.provider.requests();
    assert_eq!(reqs.len(), 5);
    // The parent is offered both names, on `subagent` only.
    let agent = &schema(&reqs[0], "subagent").parameters["properties"]["agent"];
    assert_eq!(agent["type"], "string");
    let text = agent["description"].as_str().unwrap();
    assert!(
        text.contains("\nreviewer — Reviews diffs for bugs")
            && text.contains("\nkit:tester — Runs the tests"),
        "{text}"
    );
    assert!(
        schema(&reqs[0], "subagent_fork").parameters["properties"]
            .get("agent")
            .is_none()
    );
    assert!(!reqs[0].system.contains("REVIEWER-BODY"));

    // The reviewer: its body after keel's own prompt, and only its known tools.
    let child = &reqs[1];
    let body_at = child.system.find("REVIEWER-BODY").unwrap();
    let intro_at = child
        .system
        .find("You are running as the named subagent `reviewer` (defined in .claude/agents/reviewer.md)")
        .unwrap();
    let persona_at = child.system.find("You are keel").unwrap();
    assert!(
        persona_at < intro_at && intro_at < body_at,
        "{}",
        child.system
    );
    assert_eq!(tool_names(child), ["read", "grep"]);
    // `model: sonnet` is not a model keel knows: the parent's model.
    assert_eq!(child.model, reqs[0].model);

    // The tester (named by `subagent_type`, from the bundle): its body, every inherited tool.
    let tester = &reqs[3];
    assert!(tester.system.contains("TESTER-BODY: run the tests."));
    assert!(!tester.system.contains("REVIEWER-BODY"));
    assert!(tool_names(tester).contains(&"bash".to_owned()));

    // Each child's first message records the definition it ran.
    let children = descriptors(&f.agent);
    assert_eq!(children.len(), 2);
    assert_eq!(first_prompt_source(&f, &children[0])["agent"], "reviewer");
    assert_eq!(first_prompt_source(&f, &children[1])["agent"], "kit:tester");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_projects_definitions_are_not_read_and_the_schema_is_unchanged() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: subagent, arguments: {description: "review", prompt: "Review.", agent: reviewer}}
  - text: "Then I review it myself."
"#;
    let f = fixture(
        script,
        &[(".claude/agents/reviewer.md", REVIEWER)],
        ProjectTrust::Untrusted,
        None,
    );
    f.agent.followup("Review.").unwrap();
    guarded(f.agent.run_until_idle()).await.unwrap().unwrap();
    let reqs = f.provider.requests();
    // No definition anywhere (the user's folders aside): the schema of old, byte for byte.
    let params = &schema(&reqs[0], "subagent").parameters;
    if params["properties"].get("agent").is_none() {
        assert_eq!(
            serde_json::to_string(params).unwrap(),
            serde_json::to_string(&json!({"type":"object","properties":{
                "description":{"type":"string","description":"3-5 words."},
                "prompt":{"type":"string"},
                "run_in_background":{"type":"boolean"},
                "cwd":{"type":"string"}
            },"required":["description","prompt"]}))
            .unwrap()
        );
    } else {
        // Someone's own ~/.claude/agents: still never the project's.
        let text = params["properties"]["agent"]["description"]
            .as_str()
            .unwrap();
        assert!(!text.contains("reviewer — Reviews diffs"), "{text}");
    }
    // Naming it is refused (the parameter does not exist: the call's `agent` is an unknown
    // property), and no child is started.
    let results = tool_results(&events_of(&f.agent));
    assert_eq!(results.len(), 1);
    assert!(
        results[0].contains("agent") && results[0].contains("INVALID_ARGS"),
        "{}",
        results[0]
    );
    assert!(descriptors(&f.agent).is_empty());
    assert_eq!(reqs.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_definition_is_skipped_and_logged_and_unknown_names_are_refused() {
    let script = r#"
responses:
  - tool_calls:
      - {id: c1, name: subagent, arguments: {description: "x", prompt: "x", agent: broken}}
  - text: "ok"
"#;
    let f = fixture(
        script,
        &[
            (".keel/agents/good.md", "---\nname: good\n---\nGood."),
            (".keel/agents/broken.md", "---\nname: broken\ntools: Read\n"),
        ],
        ProjectTrust::Trusted,
        None,
    );
    f.agent.followup("go").unwrap();
    guarded(f.agent.run_until_idle()).await.unwrap().unwrap();
    let events = events_of(&f.agent);
    let skipped: Vec<Value> = events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Other(o) if o.type_name == defs::PROBLEM_EVENT => Some(o.data.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0]["file"]
            .as_str()
            .unwrap()
            .ends_with(".keel/agents/broken.md")
    );
    assert!(skipped[0]["error"].as_str().unwrap().contains("not closed"));
    let reqs = f.provider.requests();
    let text = schema(&reqs[0], "subagent").parameters["properties"]["agent"]["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("\ngood") && !text.contains("broken"),
        "{text}"
    );
    let results = tool_results(&events);
    assert!(
        results[0].contains("\"broken\"") && results[0].contains("good"),
        "{}",
        results[0]
    );
    assert!(descriptors(&f.agent).is_empty());
}
