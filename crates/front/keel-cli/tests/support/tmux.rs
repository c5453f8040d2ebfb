//! A tmux server of its own (a private socket) with one 120×40 pane running one command: how
//! the terminal UI tests (`tests/tui.rs`) and the `keel attach` tests (`tests/serve/attach.rs`)
//! drive the real binary in a real terminal.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One tmux server with one pane.
pub struct Tmux {
    socket: String,
    dir: PathBuf,
}

/// Whether tmux is here; without it a test is skipped, except under CI (`.ci/run` installs it).
#[allow(clippy::print_stderr)]
pub fn have_tmux() -> bool {
    let found = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is needed for the terminal tests (.ci/run installs it)"
        );
        eprintln!("skipping: tmux is not installed");
    }
    found
}

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `s`'s words, one space between each.
pub fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Tmux {
    /// Start `cmd` (its program, arguments and environment) in a new pane in `dir`, wrapped so
    /// that `stty -a` is recorded before and after it and its exit code is written to a file.
    pub fn start(dir: &Path, cmd: &Command) -> Tmux {
        Tmux::launch(dir, cmd, false)
    }

    /// [`Tmux::start`] in `dir/name` (made here), with the command's stderr kept in a file
    /// ([`Tmux::stderr`]) instead of the pane.
    pub fn start_logged(dir: &Path, name: &str, cmd: &Command) -> Tmux {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Tmux::launch(&dir, cmd, true)
    }

    fn launch(dir: &Path, cmd: &Command, stderr_file: bool) -> Tmux {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let socket = format!("keel-test-{}-{nanos}", std::process::id());
        let mut script = String::from("#!/bin/sh\n");
        for (k, v) in cmd.get_envs() {
            let k = k.to_str().unwrap();
            match v {
                Some(v) => script.push_str(&format!("export {k}={}\n", quote(v.to_str().unwrap()))),
                None => script.push_str(&format!("unset {k}\n")),
            }
        }
        script.push_str("stty -a > stty-before.txt\n");
        script.push_str(&quote(cmd.get_program().to_str().unwrap()));
        for a in cmd.get_args() {
            script.push(' ');
            script.push_str(&quote(a.to_str().unwrap()));
        }
        if stderr_file {
            script.push_str(" 2> stderr.txt");
        }
        script.push_str("\necho \"EXIT=$?\" > exit.txt\nstty -a > stty-after.txt\nsleep 600\n");
        let path = dir.join("run.sh");
        std::fs::write(&path, script).unwrap();
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "120", "-y", "40", "-c"])
            .arg(dir)
            .arg(format!("sh {}", path.display()))
            .env_remove("TMUX")
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        Tmux {
            socket,
            dir: dir.to_path_buf(),
        }
    }

    /// Run a tmux command on this server; its stdout.
    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Send keys (tmux key names).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Esc twice, as a person presses it. crossterm reads two ESC bytes that arrive in one
    /// read as a single Esc (an ESC-prefixed sequence), so under load two back-to-back
    /// `send-keys Escape` were sometimes one key; a person's presses are ~100 ms apart.
    pub fn esc_esc(&self) {
        self.keys(&["Escape"]);
        std::thread::sleep(std::time::Duration::from_millis(150));
        self.keys(&["Escape"]);
    }

    /// Esc Esc once the turn has ended, until the screen shows `what`: the answer's text can
    /// show before its turn ends, and Esc Esc during a turn is refused ("wait for the turn to
    /// end"); the screen then.
    pub fn esc_esc_when_idle(&self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            self.esc_esc();
            let refused = Instant::now() + Duration::from_secs(5);
            loop {
                let now = self.screen();
                if now.contains(what) {
                    return now;
                }
                if now.contains("wait for the turn to end") || Instant::now() > refused {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(
                Instant::now() < deadline,
                "Esc Esc never showed {what:?}; the screen shows:\n{}",
                self.screen()
            );
            // The refusal's hint goes after a while; a new one then says the next refusal.
            while self.screen().contains("wait for the turn to end") && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Type `text` and press Enter.
    pub fn submit(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// Type `text` literally.
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", text]);
    }

    /// The screen.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-t", "0", "-p"])
    }

    /// The pane's scrollback and screen together.
    pub fn history(&self) -> String {
        self.tmux(&["capture-pane", "-t", "0", "-p", "-S", "-"])
    }

    /// The command's stderr ([`Tmux::start_logged`]).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.txt")).unwrap_or_default()
    }

    /// Wait until `shown()` holds `what`; what it showed then.
    fn wait_until(&self, what: &str, shown: impl Fn() -> String) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = shown();
            if now.contains(what) {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "the terminal never showed {what:?}; it shows:\n{}\nstderr: {}",
                self.screen(),
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the screen shows `what`; the screen then.
    pub fn wait_for(&self, what: &str) -> String {
        self.wait_until(what, || self.screen())
    }

    /// [`Tmux::wait_for`] on the screen's words (runs of whitespace, line ends included, as one
    /// space: a line the UI wrapped still matches); the screen's words then.
    pub fn wait_for_words(&self, what: &str) -> String {
        self.wait_until(&words(what), || words(&self.screen()))
    }

    /// [`Tmux::wait_for_words`] on the scrollback and the screen together.
    pub fn wait_for_in_history(&self, what: &str) -> String {
        self.wait_until(&words(what), || words(&self.history()))
    }

    /// Wait for the command to exit; its exit code line.
    pub fn wait_exit(&self) -> String {
        let file = self.dir.join("exit.txt");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(text) = std::fs::read_to_string(&file)
                && text.ends_with('\n')
            {
                // stty -a after it runs next: give it a moment.
                std::thread::sleep(Duration::from_millis(300));
                return text.trim().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the command did not exit; the screen shows:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The terminal settings before the command started and after it exited.
    pub fn stty(&self) -> (String, String) {
        let read = |n: &str| std::fs::read_to_string(self.dir.join(n)).unwrap_or_default();
        (read("stty-before.txt"), read("stty-after.txt"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}
