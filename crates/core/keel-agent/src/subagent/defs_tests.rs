#![allow(clippy::unwrap_used)]
use super::*;
use pretty_assertions::assert_eq;
use std::os::unix::fs::symlink;

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Dirs {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    keel_home: PathBuf,
    home: PathBuf,
    bundle: Bundle,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let mk = |n: &str| {
        let d = root.join(n);
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    Dirs {
        project: mk("ws"),
        keel_home: mk("keel"),
        home: mk("home"),
        bundle: Bundle {
            name: "kit".into(),
            root: mk("bundle"),
        },
        _tmp: tmp,
    }
}

fn load(d: &Dirs, trusted: bool) -> AgentDefs {
    AgentDefs::load(&DefSources {
        project: trusted.then_some(d.project.as_path()),
        keel_home: &d.keel_home,
        home: Some(&d.home),
        bundles: std::slice::from_ref(&d.bundle),
    })
}

fn names(defs: &AgentDefs) -> Vec<&str> {
    defs.defs().iter().map(|d| d.name.as_str()).collect()
}

#[test]
fn definitions_are_read_in_rank_order_and_the_first_name_wins() {
    let d = dirs();
    write(
        &d.project,
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews diffs\ntools: Read, Grep\n---\nReview it.\n",
    );
    write(
        &d.project,
        ".keel/agents/reviewer.md",
        "---\nname: reviewer\n---\nSecond.",
    );
    write(&d.project, ".keel/agents/notes.txt", "not a definition");
    write(
        &d.keel_home,
        "agents/stemmed.md",
        "No front matter: the stem names it.",
    );
    write(
        &d.home,
        ".claude/agents/helper.md",
        "---\ndescription: Helps\nmodel: sonnet\n---\nHelp.",
    );
    write(
        &d.bundle.root,
        "agents/tester.md",
        "---\nname: tester\ndescription: Runs tests\ntools: \"*\"\n---\nTest.",
    );
    let defs = load(&d, true);
    assert_eq!(
        names(&defs),
        ["reviewer", "stemmed", "helper", "kit:tester"]
    );
    let r = defs.get("reviewer").unwrap();
    assert_eq!(r.body, "Review it.");
    assert_eq!(r.tools, Some(vec!["Read".to_owned(), "Grep".to_owned()]));
    assert_eq!(r.label, ".claude/agents/reviewer.md");
    assert!(r.allows("read") && r.allows("grep") && !r.allows("bash"));
    assert_eq!(defs.get("helper").unwrap().model.as_deref(), Some("sonnet"));
    assert_eq!(defs.get("kit:tester").unwrap().tools, None);
    assert_eq!(defs.problems().len(), 1, "{:?}", defs.problems());
    let p = &defs.problems()[0];
    assert!(p.path.ends_with(".keel/agents/reviewer.md"), "{p}");
    assert!(p.reason.contains("already defined by"), "{p}");
    // An untrusted workspace's folders are not read.
    assert_eq!(names(&load(&d, false)), ["stemmed", "helper", "kit:tester"]);
}

#[test]
fn broken_files_are_problems_naming_them() {
    let d = dirs();
    let agents = d.project.join(".claude/agents");
    write(&agents, "ok.md", "---\nname: ok\n---\nFine.");
    write(
        &agents,
        "bad name.md",
        "no front matter, and the stem has a space",
    );
    write(&agents, "unclosed.md", "---\nname: unclosed\n");
    std::fs::write(agents.join("latin1.md"), b"caf\xe9").unwrap();
    std::fs::write(agents.join("big.md"), vec![b'x'; MAX_FILE as usize + 1]).unwrap();
    let outside = d.home.join("secret.md");
    std::fs::write(&outside, "---\nname: secret\n---\nOut.").unwrap();
    symlink(&outside, agents.join("linked.md")).unwrap();
    // A bundle's folder linked out of the bundle is not listed; a project folder linked to
    // the user's own is a problem there, and the user's folder is still read.
    symlink(&d.keel_home, d.bundle.root.join("agents")).unwrap();
    write(&d.home, ".claude/agents/mine.md", "Mine.");
    std::fs::create_dir_all(d.project.join(".keel")).unwrap();
    symlink(
        d.home.join(".claude/agents"),
        d.project.join(".keel/agents"),
    )
    .unwrap();
    let defs = load(&d, true);
    assert_eq!(names(&defs), ["ok", "mine"]);
    let mut got: Vec<String> = defs
        .problems()
        .iter()
        .map(|p| {
            let f = p.path.file_name().unwrap().to_string_lossy().into_owned();
            let why: String = p.reason.chars().take(22).collect();
            format!("{f}: {why}")
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            "agents: it leads outside the w",
            "agents: it leads outside the w",
            "bad name.md: no usable name: \"bad n",
            "big.md: it is 262145 bytes, ov",
            "latin1.md: it is not UTF-8 text",
            "linked.md: it leads outside the w",
            "unclosed.md: its front matter is no",
        ]
    );
}

#[test]
fn resolve_and_the_parameter_description() {
    let d = dirs();
    let long = "word ".repeat(40);
    write(
        &d.keel_home,
        "agents/a.md",
        &format!("---\nname: a\ndescription: |\n  First line\n  {long}\n---\nA."),
    );
    write(&d.keel_home, "agents/b.md", "B.");
    let defs = load(&d, false);
    let text = defs.parameter_description();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[1].starts_with("a — First line word word"));
    assert!(lines[1].ends_with('…') && lines[1].chars().count() == 101);
    assert_eq!(lines[2], "b");
    assert_eq!(defs.resolve(Some("b")).unwrap().unwrap().body, "B.");
    assert_eq!(defs.resolve(None).unwrap(), None);
    assert_eq!(defs.resolve(Some(" ")).unwrap(), None);
    assert_eq!(defs.resolve(Some(GENERAL_PURPOSE)).unwrap(), None);
    let e = defs.resolve(Some("nope")).unwrap_err().to_string();
    assert!(e.contains("\"nope\"") && e.contains("a, b"), "{e}");
    let e = AgentDefs::default()
        .resolve(Some("nope"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("none are defined"), "{e}");
}

#[test]
fn tool_names_match_claude_codes_spelling() {
    let def = AgentDef {
        name: "x".into(),
        description: String::new(),
        tools: Some(vec!["TodoWrite".into(), "Task".into(), "MultiEdit".into()]),
        model: None,
        body: String::new(),
        path: PathBuf::new(),
        label: String::new(),
    };
    assert!(def.allows("todo_write") && def.allows("subagent") && def.allows("edit"));
    assert!(!def.allows("read"));
    let section = def.prompt_section();
    assert_eq!(section.name, "agent:x");
    assert!(
        section
            .text
            .starts_with("You are running as the named subagent `x`")
    );
}

#[test]
fn a_skipped_file_shows_as_an_error_notice() {
    use keel_protocol::{EventBody, OtherEvent, Seq};
    let o = OtherEvent {
        type_name: PROBLEM_EVENT.into(),
        data: serde_json::json!({"file": ".claude/agents/x.md", "error": "it is not UTF-8 text"}),
    };
    let mut out = Vec::new();
    presenter()().present(
        &SessionEvent::new(Seq(1), 0, EventBody::Other(Box::new(o))),
        &mut out,
    );
    assert_eq!(
        out,
        vec![Item::notice(
            Level::Error,
            "Subagent definition .claude/agents/x.md skipped: it is not UTF-8 text"
        )]
    );
}
