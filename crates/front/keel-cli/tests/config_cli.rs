//! Configuration through the real binary: profiles enabling and configuring plugins, and broken
//! configuration files giving clear errors that name the file.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

/// `keel` in `cwd`, trusted for the run (these tests are about the project's layer taking
/// effect; docs/trust.md).
fn keel(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_HOME", home)
        .env_remove("DEEPSEEK_BASE_URL")
        .arg("--cwd")
        .arg(cwd)
        .arg("--trust-project")
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const ONE_READ: &str = r#"
responses:
  - tool_calls:
      - {id: call_1, name: read, arguments: {path: "a.txt"}}
  - text: "read it"
"#;

#[test]
fn a_profile_enables_and_configures_a_plugin() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("profiles")).unwrap();
    std::fs::write(
        home.path().join("profiles/audit.toml"),
        "[[plugins]]\nid = \"provenance\"\nenabled = true\n\n[[plugins]]\nid = \"compaction\"\n[plugins.config]\nthreshold = 0.5\n",
    )
    .unwrap();
    std::fs::write(work.path().join("a.txt"), "hello\n").unwrap();
    std::fs::write(work.path().join("script.yaml"), ONE_READ).unwrap();

    let dump = keel(
        home.path(),
        work.path(),
        &["--profile", "audit", "config", "dump"],
    );
    assert!(dump.status.success(), "{}", stderr(&dump));
    let text = String::from_utf8_lossy(&dump.stdout);
    let line = |id: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("plugins[{id}]")))
            .unwrap()
            .to_owned()
    };
    assert!(
        line("provenance").contains("enabled = true")
            && line("provenance").contains("profiles/audit.toml"),
        "{text}"
    );
    assert!(
        line("compaction").contains("threshold = 0.5")
            && line("compaction").contains("profiles/audit.toml"),
        "{text}"
    );

    // Without the profile provenance is off: no journal.
    let script = work.path().join("script.yaml");
    let plain = keel(
        home.path(),
        work.path(),
        &["run", "--script", script.to_str().unwrap(), "read a.txt"],
    );
    assert!(plain.status.success(), "{}", stderr(&plain));
    assert!(!home.path().join("provenance").exists());
    // With it, the run records a journal that verifies.
    let audited = keel(
        home.path(),
        work.path(),
        &[
            "--profile",
            "audit",
            "run",
            "--script",
            script.to_str().unwrap(),
            "read a.txt",
        ],
    );
    assert!(audited.status.success(), "{}", stderr(&audited));
    let journals: Vec<_> = std::fs::read_dir(home.path().join("provenance"))
        .unwrap()
        .collect();
    assert_eq!(journals.len(), 1);
}

#[test]
fn broken_configuration_names_the_file_and_exits_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".keel")).unwrap();
    let project = work.path().join(".keel/config.toml");

    std::fs::write(&project, "model = \"x\"\n[agent\nmax_steps = 3\n").unwrap();
    let o = keel(home.path(), work.path(), &["config", "dump"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(".keel/config.toml"), "{}", stderr(&o));

    std::fs::write(&project, "[agent]\nmax_stepz = 3\n").unwrap();
    let o = keel(home.path(), work.path(), &["config", "dump"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains(".keel/config.toml") && e.contains("max_stepz"),
        "{e}"
    );

    std::fs::write(&project, "[[plugins]]\nid = \"nonesuch\"\n").unwrap();
    std::fs::write(work.path().join("s.yaml"), ONE_READ).unwrap();
    let o = keel(
        home.path(),
        work.path(),
        &[
            "run",
            "--script",
            work.path().join("s.yaml").to_str().unwrap(),
            "x",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("unknown plugin \"nonesuch\"") && e.contains(".keel/config.toml"),
        "{e}"
    );

    std::fs::write(
        &project,
        "[[plugins]]\nid = \"compaction\"\n[plugins.config]\nthreshhold = 0.5\n",
    )
    .unwrap();
    let o = keel(
        home.path(),
        work.path(),
        &[
            "run",
            "--script",
            work.path().join("s.yaml").to_str().unwrap(),
            "x",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.contains("threshhold") && e.contains(".keel/config.toml"),
        "{e}"
    );

    let o = keel(
        home.path(),
        work.path(),
        &["--profile", "missing", "config", "dump"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("profile \"missing\" not found"),
        "{}",
        stderr(&o)
    );
}
