//! keel's own `git` (issue 44, hole 2): a repository whose `.git/` names programs — a
//! `post-checkout` hook, a `core.fsmonitor` script, a filter driver its `.gitattributes`
//! routes every script through — had them run, unconfined, by the `git` keel started for
//! itself: `delegate {mode: "write"}` (stash create, worktree add), `keel review` (diff) and
//! the terminal UI's `/diff`. Each program here leaves a marker in `outside/` (beside the
//! workspace, outside every writable place) when it runs; keel's git (`keel_tools::git`) runs
//! none of them, and each operation still does its job.

use crate::support::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A git workspace with a buggy `add.sh` committed (through the filter `evil` by its
/// `.gitattributes`), the delegate plugin on, and then the programs planted in `.git/`.
fn planted() -> Env {
    let env = Env::new();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 - $2 ))\n");
    env.write(".gitattributes", "*.sh filter=evil\n");
    env.write(
        ".keel/config.toml",
        "[[plugins]]\nid = \"delegate\"\nenabled = true\n",
    );
    git(&env.ws, &["init", "-q"]);
    git(&env.ws, &["add", "-A"]);
    git(&env.ws, &["commit", "-qm", "start"]);
    // Planted after the last git of the test's own: from here on only keel runs git.
    let bin = env.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let program = |name: &str| -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = bin.join(name);
        let marker = env.outside.join(name);
        std::fs::write(
            &path,
            // A filter passes its stdin through; a hook or fsmonitor reads none.
            format!(
                "#!/bin/sh\ntouch '{}'\n{}\n",
                marker.display(),
                if name.ends_with("clean") || name.ends_with("smudge") {
                    "cat"
                } else {
                    "exit 0"
                }
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    std::fs::copy(
        program("post-checkout"),
        env.ws.join(".git/hooks/post-checkout"),
    )
    .unwrap();
    let mut config = std::fs::read_to_string(env.ws.join(".git/config")).unwrap();
    config.push_str(&format!(
        "[core]\n\tfsmonitor = {}\n[filter \"evil\"]\n\tclean = {}\n\tsmudge = {}\n",
        program("fsmonitor").display(),
        program("clean").display(),
        program("smudge").display(),
    ));
    std::fs::write(env.ws.join(".git/config"), config).unwrap();
    env
}

/// The markers the planted programs left.
fn ran(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&env.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `keel` on the mock, approving on its own.
fn keel(env: &Env, mock: &Mock) -> Command {
    let mut cmd = env.keel(&mock.base_url());
    cmd.args(["--approval", "auto"]);
    cmd
}

#[test]
fn a_write_delegation_runs_none_of_the_repositorys_programs() {
    let env = planted();
    let mock = Mock::start(
        r#"
responses:
  - match: { last_message_contains: "SUPERVISE" }
    tool_calls:
      - { id: s1, name: delegate, arguments: { prompt: "DELEGATED: make add.sh add", mode: write, label: fix } }
  - match: { last_message_contains: "DELEGATE-ANSWER" }
    text: "SUPERVISOR-DONE"
  - match: { last_tool_result_contains: "Started delegation delegate-1" }
    text: "waiting for the delegate"
  - match: { last_message_contains: "DELEGATED" }
    tool_calls:
      - { id: d0, name: read, arguments: { file_path: add.sh } }
  - match: { last_tool_result_contains: "<path>add.sh</path>" }
    tool_calls:
      - { id: d1, name: edit, arguments: { path: add.sh, old_string: "$1 - $2", new_string: "$1 + $2" } }
  - match: { last_tool_result_contains: "Edited add.sh" }
    text: "DELEGATE-ANSWER: add.sh adds now"
"#,
    );
    let out = run(keel(&env, &mock).args(["run", "SUPERVISE the fix"]));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("SUPERVISOR-DONE"), "{out:?}");
    assert_eq!(ran(&env), Vec::<String>::new(), "planted programs ran");
    // The delegation still worked: its change came back as a patch.
    let sup = env.only_session_where(|h| h.get("parentSession").is_none());
    let patch = env
        .home
        .join("delegations")
        .join(session_id(&sup))
        .join("keel-1")
        .join("changes.patch");
    let diff = std::fs::read_to_string(&patch).unwrap();
    assert!(diff.contains("+echo $(( $1 + $2 ))"), "{diff}");
    assert_eq!(env.read("add.sh"), "#!/bin/sh\necho $(( $1 - $2 ))\n");
}

#[test]
fn keel_review_runs_none_of_the_repositorys_programs() {
    let env = planted();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 * $2 ))\n");
    let mock = Mock::start(
        r#"
responses:
  - match: { last_user_contains: "Review the change from HEAD" }
    text: "FINDING-1 high add.sh:2 multiplies instead of adding"
"#,
    );
    let out = run(keel(&env, &mock).arg("review"));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("FINDING-1"), "{out:?}");
    assert_eq!(ran(&env), Vec::<String>::new(), "planted programs ran");
    // The reviewer saw the change.
    let asked = mock.requests()[0].to_string();
    assert!(asked.contains("+echo $(( $1 * $2 ))"), "{asked}");
}

/// `keel` in a pane of a private tmux server; killed with it.
struct Pane {
    socket: String,
}

impl Pane {
    fn start(dir: &Path, cmd: &Command) -> Pane {
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut script = String::from("#!/bin/sh\n");
        for (k, v) in cmd.get_envs() {
            let k = k.to_str().unwrap();
            match v {
                Some(v) => script.push_str(&format!("export {k}={}\n", quote(v.to_str().unwrap()))),
                None => script.push_str(&format!("unset {k}\n")),
            }
        }
        script.push_str(&quote(cmd.get_program().to_str().unwrap()));
        for a in cmd.get_args() {
            script.push(' ');
            script.push_str(&quote(a.to_str().unwrap()));
        }
        script.push_str("\nsleep 600\n");
        let path = dir.join("run.sh");
        std::fs::write(&path, script).unwrap();
        let socket = format!("keel-sec-git-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "120", "-y", "40", "-c"])
            .arg(dir)
            .arg(format!("sh {}", path.display()))
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Pane { socket }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Wait until the screen shows one of `what`; the screen then.
    fn wait_for(&self, what: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.tmux(&["capture-pane", "-t", "0", "-p"]);
            if what.iter().any(|w| screen.contains(w)) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {what:?}; it shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

#[test]
fn the_uis_diff_runs_none_of_the_repositorys_programs() {
    let have_tmux = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_tmux {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is needed for the terminal UI tests (.ci/run installs it)"
        );
        eprintln!("skipping: tmux is not installed");
        return;
    }
    let env = planted();
    env.write("add.sh", "#!/bin/sh\necho $(( $1 * $2 ))\n");
    let mock = Mock::start("responses: []");
    let pane = Pane::start(env.root(), &env.keel(&mock.base_url()));
    pane.wait_for(&["approval ask"]);
    pane.tmux(&["send-keys", "-t", "0", "-l", "/diff"]);
    pane.tmux(&["send-keys", "-t", "0", "Enter"]);
    // (A planted fsmonitor that answers nonsense makes git see no change at all.)
    let screen = pane.wait_for(&["file(s) changed", "no changes"]);
    assert_eq!(ran(&env), Vec::<String>::new(), "planted programs ran");
    assert!(screen.contains("1 file(s) changed"), "{screen}");
    assert!(screen.contains("echo $(( $1 * $2 ))"), "{screen}");
    pane.tmux(&["send-keys", "-t", "0", "C-d"]);
}
