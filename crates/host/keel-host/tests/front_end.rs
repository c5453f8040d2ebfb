//! A new front end in a few lines: load the workspace's configuration, resolve flags, build an
//! agent, run a prompt against a model served over real loopback HTTP (the mock server), and
//! find the turn in the session file on disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_host::{Flags, Host, ModelSource, Sources};
use keel_llm::{ApiKey, Script, ScriptFormat};
use keel_testkit::MockServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_builds_and_runs_an_agent_with_keel_host() {
    let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let script = Script::from_str(
        "responses:\n  - text: \"hello from the model\"\n",
        ScriptFormat::Yaml,
    );
    let server = MockServer::start(script.unwrap()).await.unwrap();

    // ---- the front end: everything it needs to build and run an agent ----
    let cwd = work.path().canonicalize().unwrap();
    let host = Host::load(&Sources::for_workspace(home.path().into(), cwd)).unwrap();
    let flags = Flags {
        base_url: Some(server.base_url()),
        api_key: Some(ApiKey::new("sk-test-front-end", "the test").unwrap()),
        ..Flags::default()
    };
    let agent = host
        .factory(flags, ModelSource::Configured)
        .unwrap()
        .new_agent()
        .unwrap();
    agent.followup("say hello").unwrap();
    let outcome = agent.run_until_idle().await.unwrap().expect("a turn ran");
    // ---- end of the front end ----

    assert!(outcome.completed(), "{outcome:?}");
    assert_eq!(outcome.final_text, "hello from the model");
    let path = agent.log().writer().path().to_path_buf();
    drop(agent);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(path.starts_with(home.path()), "{}", path.display());
    assert!(text.contains("\"type\":\"turn/end\""), "{text}");
    assert!(text.contains("hello from the model"), "{text}");
}
