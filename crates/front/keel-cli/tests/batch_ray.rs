//! `keel batch --engine ray` against a real Ray cluster on this machine: a head and a second
//! node started with `ray start` (the `ray[default]` package pinned in
//! `tests/ray/requirements.txt`, installed by `.ci/run` into `tests/ray/.venv`), the real keel
//! binary shipped to them, the jobs submitted through Ray's Jobs REST API. Only the model is
//! the loopback mock. Without Ray installed the cluster test is skipped, except under CI, where
//! it fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

/// The `ray` command: `$KEEL_TEST_RAY`, else the venv `.ci/run` makes.
fn ray_command() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KEEL_TEST_RAY") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ray/.venv/bin/ray");
    venv.exists().then_some(venv)
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` from 127.0.0.1:port; the body of a 200.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_owned())
}

/// A head and one more node, each a `ray start --block` child (which takes its node's
/// processes down with it); everything under a temp dir of its own.
struct Cluster {
    head: Child,
    node: Child,
    temp: PathBuf,
    dashboard: u16,
    node_name: String,
}

impl Cluster {
    fn start(ray: &Path) -> Cluster {
        // Ray's socket paths must stay short: not under the test's deep temp dir.
        let temp = PathBuf::from(format!("/tmp/keel-ray-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&temp);
        std::fs::create_dir_all(&temp).unwrap();
        let (gcs, dashboard) = (free_port(), free_port());
        let node_name = format!("keel-node2-{}", std::process::id());
        let spawn_node = |args: &[String], log: &str| {
            let out = std::fs::File::create(temp.join(log)).unwrap();
            Command::new(ray)
                .arg("start")
                .args(args)
                .args([
                    "--block",
                    "--num-cpus",
                    "2",
                    "--object-store-memory",
                    "100000000",
                    "--disable-usage-stats",
                ])
                // A dead node is noticed in seconds rather than Ray's default half minute.
                .env("RAY_health_check_period_ms", "500")
                .env("RAY_health_check_timeout_ms", "1000")
                .env("RAY_health_check_failure_threshold", "3")
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .spawn()
                .unwrap()
        };
        let head = spawn_node(
            &[
                "--head".into(),
                "--port".into(),
                gcs.to_string(),
                "--dashboard-host".into(),
                "127.0.0.1".into(),
                "--dashboard-port".into(),
                dashboard.to_string(),
                "--include-dashboard".into(),
                "true".into(),
                "--temp-dir".into(),
                temp.display().to_string(),
                "--ray-client-server-port".into(),
                free_port().to_string(),
                "--dashboard-agent-listen-port".into(),
                free_port().to_string(),
                "--node-name".into(),
                format!("keel-head-{}", std::process::id()),
            ],
            "head.log",
        );
        let where_ = temp.display().to_string();
        let wait = move |what: &str, ok: &dyn Fn() -> bool| {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !ok() {
                assert!(
                    Instant::now() < deadline,
                    "Ray: {what} did not happen; see {where_}"
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        };
        wait("the head's Jobs API answering", &|| {
            http_get(dashboard, "/api/jobs/").is_some()
        });
        let node = spawn_node(
            &[
                "--address".into(),
                format!("127.0.0.1:{gcs}"),
                "--node-name".into(),
                node_name.clone(),
                "--dashboard-agent-listen-port".into(),
                free_port().to_string(),
            ],
            "node.log",
        );
        let cluster = Cluster {
            head,
            node,
            temp,
            dashboard,
            node_name,
        };
        wait("two nodes alive", &|| cluster.alive_nodes().len() == 2);
        cluster
    }

    fn address(&self) -> String {
        format!("http://127.0.0.1:{}", self.dashboard)
    }

    /// (node id, node name) of the nodes alive.
    fn alive_nodes(&self) -> Vec<(String, String)> {
        let Some(body) = http_get(self.dashboard, "/api/v0/nodes?detail=0") else {
            return Vec::new();
        };
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["data"]["result"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["state"] == "ALIVE")
            .map(|n| {
                (
                    n["node_id"].as_str().unwrap_or("").to_owned(),
                    n["node_name"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    fn node_id(&self) -> String {
        self.alive_nodes()
            .into_iter()
            .find(|(_, name)| *name == self.node_name)
            .expect("the second node is alive")
            .0
    }

    /// The node a job runs on.
    fn job_node(&self, job: &str) -> Option<String> {
        let body = http_get(self.dashboard, &format!("/api/jobs/{job}"))?;
        let v: Value = serde_json::from_str(&body).ok()?;
        (v["status"] == "RUNNING")
            .then(|| v["driver_node_id"].as_str().map(str::to_owned))
            .flatten()
    }

    /// The second node dies: SIGKILL its raylet and, in the same instant, every process under
    /// it (its workers, the job supervisors and the sessions they run), as a machine's death
    /// would take them. (The raylet alone would leave its workers running for seconds until
    /// Ray's own fate-sharing caught up, and their sessions with them.)
    fn kill_node(&self) {
        let needle = &self.node_name;
        let raylet: Vec<i32> = processes()
            .iter()
            .filter(|(_, cmd)| cmd.contains("/raylet ") && cmd.contains(needle.as_str()))
            .map(|(pid, _)| *pid)
            .collect();
        assert_eq!(raylet.len(), 1, "the second node's raylet: {raylet:?}");
        // Freeze the tree first, growing it until nothing in it has started anything more (a
        // job starting right now forks; a process killed before its child was seen would leave
        // that child running, reparented out of the tree), then kill it all at once.
        let mut tree = raylet;
        loop {
            for &pid in &tree {
                // SAFETY: kill(2) of a process of this test's cluster.
                unsafe {
                    libc::kill(pid, libc::SIGSTOP);
                }
            }
            std::thread::sleep(Duration::from_millis(30));
            let more: Vec<i32> = processes()
                .iter()
                .map(|(pid, _)| *pid)
                .filter(|pid| {
                    !tree.contains(pid) && parent(*pid).is_some_and(|p| tree.contains(&p))
                })
                .collect();
            if more.is_empty() {
                break;
            }
            tree.extend(more);
        }
        for pid in tree {
            // SAFETY: kill(2) of a process of this test's cluster.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// A process's parent (from /proc).
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in [&mut self.node, &mut self.head] {
            // SAFETY: SIGTERM to the `ray start --block` children this test started.
            unsafe {
                libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for child in [&mut self.node, &mut self.head] {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever of the cluster is left (its processes name the temp dir or its session).
        let needle = self.temp.display().to_string();
        for (pid, cmd) in processes() {
            if cmd.contains(&needle) && pid != i32::try_from(std::process::id()).unwrap() {
                // SAFETY: kill(2) of a leftover process of this test's cluster.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.temp);
    }
}

fn state(out: &Path) -> Value {
    std::fs::read_to_string(out.join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// The session file `id` under `$KEEL_HOME`.
fn session_file(env: &Env, id: &str) -> PathBuf {
    env.session_files()
        .into_iter()
        .find(|p| p.parent().unwrap().file_name().unwrap().to_string_lossy() == id)
        .unwrap_or_else(|| panic!("session {id} is not in $KEEL_HOME"))
}

/// The commands of the `bash` calls that have a result in `events`, in order.
fn settled_commands(events: &[Value]) -> Vec<String> {
    let calls: Vec<&Value> = of_type(events, "tool/call");
    let results: Vec<String> = of_type(events, "tool/result")
        .iter()
        .map(|r| tool_result(r).0)
        .collect();
    calls
        .iter()
        .filter(|c| results.contains(&c["data"]["callId"].as_str().unwrap_or("").to_owned()))
        .map(|c| {
            let args: Value =
                serde_json::from_str(c["data"]["arguments"].as_str().unwrap_or("{}")).unwrap();
            args["command"].as_str().unwrap_or("").to_owned()
        })
        .collect()
}

/// Tasks `prefix-1…prefix-n` of `steps` steps each on the template `tpl`, scored by `check`,
/// written to `tasks`; their ids and a mock with their responses.
fn write_phase(
    tasks: &Path,
    tpl: &Path,
    prefix: &str,
    n: usize,
    steps: usize,
    check: &str,
) -> (Vec<String>, Mock) {
    let ids: Vec<String> = (1..=n).map(|i| format!("{prefix}-{i:02}")).collect();
    // A spare answer each: a dying node may take one that never reaches the batch.
    let mock = step_tasks(tasks, tpl, &ids, (steps, "sleep 0.4; ", 2), check);
    (ids, mock)
}

/// `keel --approval auto batch TASKS --engine ray --address … --concurrency N --out OUT`.
fn ray_batch(
    env: &Env,
    mock: &Mock,
    cluster: &Cluster,
    tasks: &Path,
    concurrency: u32,
    out: &Path,
) -> Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "batch"])
        .arg(tasks)
        .args(["--engine", "ray", "--address", &cluster.address()])
        .args(["--concurrency", &concurrency.to_string(), "--out"])
        .arg(out);
    cmd
}

#[test]
fn ray_ten_tasks_survive_a_node_dying_ctrl_c_resumes_and_bad_tasks_fail_alone() {
    let Some(ray) = ray_command() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Ray is not installed (tests/ray/.venv): .ci/run installs it"
        );
        eprintln!("skipped: Ray is not installed (tests/ray/.venv, or set KEEL_TEST_RAY)");
        return;
    };
    let cluster = Cluster::start(&ray);
    let env = Env::new();
    let tpl = env.outside.join("template");
    std::fs::create_dir_all(&tpl).unwrap();
    std::fs::write(tpl.join("README.md"), "template\n").unwrap();
    let tasks = env.outside.join("tasks.jsonl");
    let check = "grep -q done log.txt && test $(sort log.txt | uniq -d | wc -l) -eq 0";
    let (ids, mock) = write_phase(&tasks, &tpl, "task", 10, 8, check);
    let out = env.outside.join("out");
    let mut cmd = ray_batch(&env, &mock, &cluster, &tasks, 4, &out);
    let batch = spawn(&mut cmd);
    // Once a task's session runs on the second node, kill that node's raylet.
    let node = cluster.node_id();
    let deadline = Instant::now() + Duration::from_secs(240);
    let on_node: Vec<String> = loop {
        let st = state(&out);
        let there: Vec<String> = ids
            .iter()
            .filter(|id| {
                let t = &st["tasks"][id.as_str()];
                t["status"] == "running"
                    && t["session"].is_string()
                    && t["job"]
                        .as_str()
                        .and_then(|j| cluster.job_node(j))
                        .is_some_and(|n| n == node)
            })
            .cloned()
            .collect();
        if !there.is_empty() {
            break there;
        }
        assert!(
            Instant::now() < deadline,
            "no task ran on the second node: {st}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    cluster.kill_node();
    let done = batch.wait();
    assert_eq!(done.code, Some(0), "{done:?}");
    assert!(
        done.stderr.contains("was lost") && done.stderr.contains("running it again"),
        "{}",
        done.stderr
    );
    let results = read_results(&out);
    assert_eq!(results.len(), 10, "every task is accounted for");
    let mut retried = Vec::new();
    for (r, id) in results.iter().zip(&ids) {
        assert_eq!(r["id"], id.as_str());
        assert_eq!(r["outcome"], "completed", "{r}");
        assert_eq!(r["check"], "passed", "{r}");
        assert_eq!(r["error"], Value::Null, "{r}");
        if r["attempts"].as_u64().unwrap() > 1 {
            retried.push(id.clone());
        }
        // The session is here, in $KEEL_HOME, and loads cleanly (crash repair included).
        let session = r["session"].as_str().unwrap();
        let events = load_consistent(&session_file(&env, session));
        assert!(of_type(&events, "turn/end").len() as u64 == r["turns"].as_u64().unwrap());
        // No step whose result the session holds ran twice.
        let commands = settled_commands(&events);
        let mut unique = commands.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), commands.len(), "{id}: {commands:?}");
        assert!(
            commands.iter().any(|c| c.contains("echo done")),
            "{id}: {commands:?}"
        );
        // The workspace came back from the node that ran its last job.
        let log = std::fs::read_to_string(out.join("work").join(id).join("log.txt")).unwrap();
        assert!(log.contains("done"), "{id}: {log}");
        // A task runs again only after its node died: it resumes its session (a second
        // turn), or starts afresh if it had none yet.
        assert!(r["turns"].as_u64().unwrap() <= 2, "{r}");
        if r["turns"] == 2 {
            assert!(r["attempts"].as_u64().unwrap() > 1, "{r}");
        }
    }
    // The tasks whose sessions ran on the dead node were resumed elsewhere (one may have ended
    // in the instant before the kill).
    let resumed: Vec<&String> = on_node.iter().filter(|id| retried.contains(id)).collect();
    assert!(
        !resumed.is_empty(),
        "retried {retried:?}, on the dead node {on_node:?}"
    );
    for id in resumed {
        let r = results.iter().find(|r| r["id"] == id.as_str()).unwrap();
        assert_eq!(r["turns"], 2, "{r}");
    }
    assert!(cluster.alive_nodes().len() == 1);

    // Ctrl-C stops the jobs (Ray's stop, SIGINT to keel: its turn ends and is logged) and each
    // comes home with its workspace; the same command again resumes them.
    let (ids, mock) = write_phase(&tasks, &tpl, "stop", 3, 16, check);
    let out = env.outside.join("out-stop");
    let batch_cmd = || ray_batch(&env, &mock, &cluster, &tasks, 2, &out);
    let first = spawn(&mut batch_cmd());
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        // Two sessions running, a few steps in (as mirrored here): the steps of this phase's
        // sessions only ($KEEL_HOME holds the first phase's too).
        let st = state(&out);
        let sessions: Vec<&str> = ids
            .iter()
            .filter_map(|id| st["tasks"][id.as_str()]["session"].as_str())
            .collect();
        let steps: usize = env
            .session_files()
            .iter()
            .filter(|p| sessions.contains(&session_id(p).as_str()))
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .matches("\"tool/result\"")
                    .count()
            })
            .sum();
        if sessions.len() >= 2 && steps >= 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the sessions did not start: {st}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    first.signal(libc::SIGINT);
    let stopped = first.wait();
    assert_eq!(stopped.code, Some(130), "{stopped:?}");
    let results = read_results(&out);
    let interrupted: Vec<&Value> = results
        .iter()
        .filter(|r| r["outcome"] == "interrupted")
        .collect();
    assert!(interrupted.len() >= 2, "{results:?}");
    for r in &interrupted {
        // The stopped turn is in the session here, closed (logged, not torn).
        let events = load_consistent(&session_file(&env, r["session"].as_str().unwrap()));
        let ends = turn_end_reasons(&events);
        assert_eq!(ends.len(), 1, "{ends:?}");
        // Its check did not run (the batch was stopped), on the node as here.
        assert_eq!(r["check"], "stopped", "{r}");
        // Its workspace came back with the steps it took: no more than the session asked for.
        let log = std::fs::read_to_string(
            out.join("work")
                .join(r["id"].as_str().unwrap())
                .join("log.txt"),
        )
        .unwrap_or_default();
        assert!(
            log.lines().count() <= of_type(&events, "tool/call").len(),
            "{r}: {log}"
        );
    }
    assert!(
        interrupted.iter().any(|r| {
            std::fs::read_to_string(
                out.join("work")
                    .join(r["id"].as_str().unwrap())
                    .join("log.txt"),
            )
            .is_ok_and(|l| l.contains("step 1"))
        }),
        "no workspace came back with a step in it"
    );
    let again = run(&mut batch_cmd());
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(
        again.stderr.contains("resuming session"),
        "{}",
        again.stderr
    );
    for r in read_results(&out) {
        assert_eq!(r["outcome"], "completed", "{r}");
        // No step ran twice: the resumed session went on in the workspace that came back.
        assert_eq!(r["check"], "passed", "{r}");
        let was_stopped = interrupted.iter().any(|i| i["id"] == r["id"]);
        assert_eq!(r["turns"], if was_stopped { 2 } else { 1 }, "{r}");
    }

    // A `kill -9` of the batch leaves its jobs running on the cluster: the same command again
    // stops each, reads what it printed and resumes (or only scores) its session.
    let (ids, mock) = write_phase(&tasks, &tpl, "kill", 3, 20, check);
    let out = env.outside.join("out-kill");
    let batch_cmd = || ray_batch(&env, &mock, &cluster, &tasks, 3, &out);
    let first = spawn(&mut batch_cmd());
    let deadline = Instant::now() + Duration::from_secs(240);
    let before = loop {
        // Two sessions a few steps into their twenty, neither past half of them (as mirrored
        // here, which under load lags the node by a step or more: a narrower window can be
        // stepped over). The third may be anywhere, its check included.
        let st = state(&out);
        let midway = ids
            .iter()
            .filter_map(|id| st["tasks"][id.as_str()]["session"].as_str())
            .filter(|s| {
                env.session_files()
                    .iter()
                    .find(|p| p.to_string_lossy().contains(s))
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .is_some_and(|t| (2..10).contains(&t.matches("\"tool/result\"").count()))
            })
            .count();
        if midway >= 2 {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "the sessions did not start: {st}"
        );
        std::thread::sleep(Duration::from_millis(30));
    };
    first.signal(libc::SIGKILL);
    assert_eq!(first.wait().code, None);
    let killed_at = Instant::now();
    let again = run(&mut batch_cmd());
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(
        again
            .stderr
            .contains("were running when the last batch stopped")
            && again.stderr.contains("resuming session"),
        "{again:?}\nstate at the kill: {before}\nthe second run took {:?}",
        killed_at.elapsed()
    );
    let results = read_results(&out);
    assert_eq!(results.len(), 3);
    let mut caught_up = 0;
    for r in &results {
        // A job still running when the batch came back was stopped (Ctrl-C for its session)
        // and read to its end: its first turn ends as keel ends a stopped turn, not as crash
        // repair closes a copy that stopped short.
        let events = load_consistent(&session_file(&env, r["session"].as_str().unwrap()));
        let ends = turn_end_reasons(&events);
        if r["turns"] == 2 {
            assert_eq!(ends[0]["kind"], "aborted", "{ends:?}");
            caught_up += 1;
        }
    }
    assert!(caught_up >= 1, "{results:?}");
    for r in &results {
        assert_eq!(r["outcome"], "completed", "{r}");
        // No step ran twice, across the job the killed batch left and the resumed one.
        assert_eq!(r["check"], "passed", "{r}");
        assert!(r["turns"].as_u64().unwrap() <= 2, "{r}");
        let id = r["id"].as_str().unwrap();
        if let Some(s) = before["tasks"][id]["session"].as_str() {
            assert_eq!(r["session"], s, "{r}");
        }
        let events = load_consistent(&session_file(&env, r["session"].as_str().unwrap()));
        let commands = settled_commands(&events);
        let mut unique = commands.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), commands.len(), "{id}: {commands:?}");
    }

    // Bad input, each reported on its own task: a keel that fails on the node, a workspace
    // that does not exist, a line that is not a task.
    let lines = [
        json!({"id": "bad-flag", "prompt": "Work on bad-flag.", "workspace": tpl, "flags": ["--no-such-flag"]}).to_string(),
        json!({"id": "no-ws", "prompt": "x", "workspace": env.outside.join("missing")}).to_string(),
        "{not json".to_owned(),
    ];
    std::fs::write(&tasks, lines.join("\n") + "\n").unwrap();
    let out = env.outside.join("out-bad");
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "batch"])
        .arg(&tasks)
        .args(["--engine", "ray", "--address", &cluster.address(), "--out"])
        .arg(&out);
    let bad = run(&mut cmd);
    assert_eq!(bad.code, Some(1), "{bad:?}");
    let results = read_results(&out);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0]["outcome"], "failed");
    let error = results[0]["error"].as_str().unwrap();
    assert!(error.contains("keel exited with status 2"), "{error}");
    let log = std::fs::read_to_string(out.join("logs/bad-flag.log")).unwrap();
    assert!(log.contains("--no-such-flag"), "{log}");
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{}",
        results[1]
    );
    assert_eq!(results[2]["outcome"], "invalid");
    assert!(results[2]["error"].as_str().unwrap().starts_with("line 3"));

    // A job that fails on its node before keel runs (no keel at --keel-on-nodes).
    let lines = [json!({"id": "no-keel", "prompt": "x", "workspace": tpl}).to_string()];
    std::fs::write(&tasks, lines.join("\n") + "\n").unwrap();
    let out = env.outside.join("out-nokeel");
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto", "batch"])
        .arg(&tasks)
        .args(["--engine", "ray", "--address", &cluster.address()])
        .args(["--keel-on-nodes", "/nonexistent/keel", "--out"])
        .arg(&out);
    let failed = run(&mut cmd);
    assert_eq!(failed.code, Some(1), "{failed:?}");
    let results = read_results(&out);
    let error = results[0]["error"].as_str().unwrap();
    assert_eq!(results[0]["outcome"], "failed");
    assert!(
        error.contains("JOB_ENTRYPOINT_COMMAND_ERROR") && error.contains("/nonexistent/keel"),
        "{error}"
    );
    drop(cluster);
}

#[test]
fn an_unreachable_ray_address_fails_each_task_with_a_message() {
    let env = Env::new();
    let tpl = env.outside.join("template");
    std::fs::create_dir_all(&tpl).unwrap();
    let tasks = env.outside.join("tasks.jsonl");
    let lines: Vec<String> = ["a", "b"]
        .iter()
        .map(|id| json!({"id": id, "prompt": "x", "workspace": tpl}).to_string())
        .collect();
    std::fs::write(&tasks, lines.join("\n") + "\n").unwrap();
    // A port nothing listens on.
    let address = format!("http://127.0.0.1:{}", free_port());
    let out = env.outside.join("out");
    let mut cmd = env.keel("http://127.0.0.1:9");
    cmd.args(["--approval", "auto", "batch"])
        .arg(&tasks)
        .args([
            "--engine",
            "ray",
            "--address",
            &address,
            "--keel-on-nodes",
            "/usr/bin/keel",
        ])
        .arg("--out")
        .arg(&out);
    let done = run(&mut cmd);
    assert_eq!(done.code, Some(1), "{done:?}");
    let results = read_results(&out);
    assert_eq!(results.len(), 2);
    for r in &results {
        assert_eq!(r["outcome"], "failed", "{r}");
        let error = r["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("cannot reach the Ray cluster at {address}")),
            "{error}"
        );
    }
    // Not a URL: said before anything runs.
    let mut cmd = env.keel("http://127.0.0.1:9");
    cmd.args(["batch"])
        .arg(&tasks)
        .args(["--engine", "ray", "--address", "head:8265"]);
    let bad = run(&mut cmd);
    assert_ne!(bad.code, Some(0));
    assert!(bad.stderr.contains("--address head:8265"), "{}", bad.stderr);
    // No address at all.
    let mut cmd = env.keel("http://127.0.0.1:9");
    cmd.env_remove("RAY_API_SERVER_ADDRESS")
        .args(["batch"])
        .arg(&tasks)
        .args(["--engine", "ray"]);
    let bad = run(&mut cmd);
    assert_ne!(bad.code, Some(0));
    assert!(bad.stderr.contains("--engine ray needs"), "{}", bad.stderr);
}
