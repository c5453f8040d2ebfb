//! read / write / edit / glob / grep on real temporary directories, and path confinement.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, call, run_one};
use keel_testkit::recording::{Log, RecordingHost};
use keel_tools::SandboxMode;
use pretty_assertions::assert_eq;
use serde_json::json;

/// The numbered lines of a `read` answer, without its `<path>`/`<content>` frame.
fn body(answer: &str) -> &str {
    let start = answer.find("<content>\n").expect("a framed read") + "<content>\n".len();
    let end = answer.rfind("\n</content>").expect("a framed read");
    &answer[start..end]
}

/// `read`'s answer for `body` (numbered lines) of `path`, read whole.
fn framed(path: &str, body: &str) -> String {
    format!("<path>{path}</path>\n<content>\n{body}\n</content>")
}

#[tokio::test]
async fn read_numbers_lines_and_pages() {
    let f = Fixture::new();
    let body: String = (1..=5).map(|i| format!("line {i}\n")).collect();
    f.write("a.txt", &body);
    let p = f.pipeline(SandboxMode::WorkspaceWrite);

    let all = run_one(&p, call("1", "read", json!({"file_path":"a.txt"}))).await;
    assert_eq!(
        all.text(),
        framed(
            "a.txt",
            "1: line 1\n2: line 2\n3: line 3\n4: line 4\n5: line 5"
        )
    );
    assert!(!all.is_error);

    let page = run_one(
        &p,
        call(
            "2",
            "read",
            json!({"file_path":"a.txt","offset":2,"limit":2}),
        ),
    )
    .await;
    assert_eq!(
        page.text(),
        format!(
            "{}\n(Showing lines 2-3 of 5. Use offset=4 to continue.)",
            framed("a.txt", "2: line 2\n3: line 3")
        )
    );

    let past = run_one(&p, call("3", "read", json!({"path":"a.txt","offset":9}))).await;
    assert!(past.is_error);
    assert_eq!(past.code(), Some("INVALID_ARGS"));
    assert!(past.text().contains("has 5 lines"), "{}", past.text());
}

#[tokio::test]
async fn read_handles_crlf_long_lines_empty_binary_dirs_and_missing_files() {
    let f = Fixture::new();
    f.write("crlf.txt", "a\r\nb\r\n");
    f.write("long.txt", "x".repeat(2100));
    f.write("empty.txt", "");
    f.write("bin.dat", [0x89u8, b'P', b'N', b'G', 0, 1, 2, 3]);
    std::fs::create_dir_all(f.ws.join("sub")).unwrap();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);

    assert_eq!(
        run_one(&p, call("1", "read", json!({"file_path":"crlf.txt"})))
            .await
            .text(),
        framed("crlf.txt", "1: a\n2: b")
    );
    let long = run_one(&p, call("2", "read", json!({"file_path":"long.txt"})))
        .await
        .text();
    assert!(
        long.ends_with("… [line cut: 100 more chars]\n</content>"),
        "{long}"
    );
    assert_eq!(
        run_one(&p, call("3", "read", json!({"file_path":"empty.txt"})))
            .await
            .text(),
        "<path>empty.txt</path>\n<content>\n</content>\n(The file is empty.)"
    );

    let bin = run_one(&p, call("4", "read", json!({"path":"bin.dat"}))).await;
    assert!(bin.is_error);
    assert_eq!(
        bin.text(),
        "TOOL_FAILED: 'bin.dat' is a binary file (8 bytes); read only shows text files"
    );

    let dir = run_one(&p, call("5", "read", json!({"path":"sub"}))).await;
    assert!(
        dir.is_error && dir.text().contains("is a directory"),
        "{}",
        dir.text()
    );

    let missing = run_one(&p, call("6", "read", json!({"path":"nope.txt"}))).await;
    assert!(missing.is_error);
    assert_eq!(missing.code(), Some("TOOL_FAILED"));
    assert!(missing.text().contains("nope.txt"), "{}", missing.text());
}

#[tokio::test]
async fn write_creates_parents_and_overwrites() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let out = run_one(
        &p,
        call(
            "1",
            "write",
            json!({"path":"deep/dir/new.txt","content":"hello"}),
        ),
    )
    .await;
    assert_eq!(out.text(), "Created deep/dir/new.txt (5 bytes).");
    assert_eq!(f.read("deep/dir/new.txt"), "hello");
    let out = run_one(
        &p,
        call(
            "2",
            "write",
            json!({"path":"deep/dir/new.txt","content":"bye"}),
        ),
    )
    .await;
    assert_eq!(out.text(), "Overwrote deep/dir/new.txt (3 bytes).");
    assert_eq!(f.read("deep/dir/new.txt"), "bye");
    assert_eq!(out.meta, Some(json!({"bytes":3,"created":false})));
}

#[tokio::test]
async fn edit_requires_a_unique_exact_match_unless_replace_all() {
    let f = Fixture::new();
    f.write("e.rs", "let a = 1;\nlet b = 1;\nlet c = 2;\n");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    run_one(&p, call("0", "read", json!({"file_path":"e.rs"}))).await;

    let once = run_one(
        &p,
        call(
            "1",
            "edit",
            json!({"path":"e.rs","old_string":"c = 2","new_string":"c = 3"}),
        ),
    )
    .await;
    assert_eq!(once.text(), "Edited e.rs: replaced 1 occurrence.");
    assert_eq!(f.read("e.rs"), "let a = 1;\nlet b = 1;\nlet c = 3;\n");

    let twice = run_one(
        &p,
        call(
            "2",
            "edit",
            json!({"path":"e.rs","old_string":"= 1;","new_string":"= 9;"}),
        ),
    )
    .await;
    assert!(twice.is_error);
    assert_eq!(twice.code(), Some("INVALID_ARGS"));
    assert!(twice.text().contains("occurs 2 times"), "{}", twice.text());
    assert_eq!(f.read("e.rs"), "let a = 1;\nlet b = 1;\nlet c = 3;\n");

    let all = run_one(
        &p,
        call(
            "3",
            "edit",
            json!({"path":"e.rs","old_string":"= 1;","new_string":"= 9;","replace_all":true}),
        ),
    )
    .await;
    assert_eq!(all.text(), "Edited e.rs: replaced 2 occurrences.");
    assert_eq!(f.read("e.rs"), "let a = 9;\nlet b = 9;\nlet c = 3;\n");

    let missing = run_one(
        &p,
        call(
            "4",
            "edit",
            json!({"path":"e.rs","old_string":"zzz","new_string":"y"}),
        ),
    )
    .await;
    assert!(
        missing.is_error && missing.text().contains("not found"),
        "{}",
        missing.text()
    );
    let same = run_one(
        &p,
        call(
            "5",
            "edit",
            json!({"path":"e.rs","old_string":"a","new_string":"a"}),
        ),
    )
    .await;
    assert!(
        same.is_error && same.text().contains("identical"),
        "{}",
        same.text()
    );
}

#[tokio::test]
async fn glob_matches_names_and_paths_and_respects_gitignore() {
    let f = Fixture::new();
    f.write(".gitignore", "target/\n*.log\n");
    f.write("src/main.rs", "");
    f.write("src/util/mod.rs", "");
    f.write("README.md", "");
    f.write("target/debug/gen.rs", "");
    f.write("x.log", "");
    f.write(".hidden/h.rs", "");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);

    // Newest first: give each file its own modification time.
    for (age, rel) in [
        "src/util/mod.rs",
        "target/debug/gen.rs",
        ".hidden/h.rs",
        "src/main.rs",
    ]
    .into_iter()
    .enumerate()
    {
        f.age(rel, age as u64);
    }
    let by_name = run_one(&p, call("1", "glob", json!({"pattern":"*.rs"}))).await;
    assert_eq!(
        by_name.text(),
        "src/util/mod.rs\ntarget/debug/gen.rs\n.hidden/h.rs\nsrc/main.rs",
        "hidden and gitignored files are listed, newest first"
    );
    let logs = run_one(&p, call("1b", "glob", json!({"pattern":"*.log"}))).await;
    assert_eq!(logs.text(), "x.log");
    let by_path = run_one(&p, call("2", "glob", json!({"pattern":"src/*.rs"}))).await;
    assert_eq!(by_path.text(), "src/main.rs");
    let under = run_one(
        &p,
        call("3", "glob", json!({"pattern":"**/*.rs","path":"src"})),
    )
    .await;
    assert_eq!(under.text(), "src/util/mod.rs\nsrc/main.rs");
    let none = run_one(&p, call("4", "glob", json!({"pattern":"*.py"}))).await;
    assert_eq!(none.text(), "No files match '*.py' under ..");
    let bad = run_one(&p, call("5", "glob", json!({"pattern":"a[" }))).await;
    assert_eq!(bad.code(), Some("INVALID_ARGS"));
}

#[tokio::test]
async fn glob_output_is_capped() {
    let f = Fixture::new();
    for i in 0..205 {
        f.write(&format!("many/f{i:03}.txt"), "");
    }
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let out = run_one(&p, call("1", "glob", json!({"pattern":"*.txt"})))
        .await
        .text();
    assert_eq!(out.lines().count(), 101);
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with("[100 of 205 paths shown; the other 105 are listed in "),
        "{out}"
    );
    let file = last
        .trim_end_matches(']')
        .rsplit(" listed in ")
        .next()
        .unwrap();
    let rest = std::fs::read_to_string(file).unwrap();
    assert_eq!(rest.lines().count(), 105);
    let mut all: Vec<&str> = out.lines().take(100).chain(rest.lines()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 205, "every path is listed once");
}

#[tokio::test]
async fn grep_modes_context_filters_and_ignores() {
    let f = Fixture::new();
    f.write(".gitignore", "ignored/\n");
    f.write("a.rs", "fn alpha() {}\nlet x = 1;\nfn beta() {}\n");
    f.write("b.txt", "Alpha here\nnothing\n");
    f.write("ignored/c.rs", "fn alpha_ignored() {}\n");
    f.write("bin.dat", b"alpha\0binary");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);

    let lines = run_one(&p, call("1", "grep", json!({"pattern":"alpha"}))).await;
    assert_eq!(lines.text(), "a.rs\n1:fn alpha() {}");
    let ci = run_one(
        &p,
        call(
            "2",
            "grep",
            json!({"pattern":"alpha","case_insensitive":true,"output_mode":"files_with_matches"}),
        ),
    )
    .await;
    assert_eq!(ci.text(), "a.rs\nb.txt");
    let content = run_one(
        &p,
        call(
            "3",
            "grep",
            json!({"pattern":"^fn|here","output_mode":"content"}),
        ),
    )
    .await;
    assert_eq!(
        content.text(),
        "a.rs\n1:fn alpha() {}\n3:fn beta() {}\n\nb.txt\n1:Alpha here"
    );
    let ctx = run_one(
        &p,
        call(
            "4",
            "grep",
            json!({"pattern":"beta","output_mode":"content","context":1}),
        ),
    )
    .await;
    assert_eq!(ctx.text(), "a.rs\n2-let x = 1;\n3:fn beta() {}");
    let count = run_one(
        &p,
        call("5", "grep", json!({"pattern":"fn","output_mode":"count"})),
    )
    .await;
    assert_eq!(count.text(), "a.rs:2");
    let filtered = run_one(
        &p,
        call(
            "6",
            "grep",
            json!({"pattern":"(?i)alpha","include":"*.txt"}),
        ),
    )
    .await;
    assert_eq!(filtered.text(), "b.txt\n1:Alpha here");
    // keel's earlier name of `include` still filters.
    let old_name = run_one(
        &p,
        call("6b", "grep", json!({"pattern":"(?i)alpha","glob":"*.rs"})),
    )
    .await;
    assert_eq!(old_name.text(), "a.rs\n1:fn alpha() {}");
    let one_file = run_one(
        &p,
        call(
            "7",
            "grep",
            json!({"pattern":"x","path":"a.rs","output_mode":"content"}),
        ),
    )
    .await;
    assert_eq!(one_file.text(), "a.rs\n2:let x = 1;");
    let none = run_one(&p, call("8", "grep", json!({"pattern":"zzz"}))).await;
    assert_eq!(none.text(), "No matches for 'zzz'.");
    let bad = run_one(&p, call("9", "grep", json!({"pattern":"("}))).await;
    assert_eq!(bad.code(), Some("INVALID_ARGS"));
}

#[tokio::test]
async fn grep_content_output_is_capped() {
    let f = Fixture::new();
    f.write("big.txt", "match me\n".repeat(1000));
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let out = run_one(
        &p,
        call(
            "1",
            "grep",
            json!({"pattern":"match","output_mode":"content"}),
        ),
    )
    .await
    .text();
    // The file's name, 250 matches, the cap's note.
    assert_eq!(out.lines().count(), 252);
    assert!(out.ends_with("[output capped; narrow the pattern, path or include]"));
}

#[tokio::test]
async fn escapes_are_refused_in_workspace_write() {
    let f = Fixture::new();
    std::fs::write(f.outside.join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(&f.outside, f.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(f.outside.join("new.txt"), f.ws.join("dangling")).unwrap();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let secret = f.outside.join("secret.txt").display().to_string();

    let cases = [
        call("1", "read", json!({"path":"../outside/secret.txt"})),
        call("2", "read", json!({"path": secret})),
        call("3", "read", json!({"path":"link/secret.txt"})),
        call(
            "4",
            "write",
            json!({"path":"../outside/x.txt","content":"x"}),
        ),
        call("5", "write", json!({"path":"link/y.txt","content":"x"})),
        call("6", "write", json!({"path":"dangling","content":"x"})),
        call(
            "7",
            "edit",
            json!({"path":"link/secret.txt","old_string":"top","new_string":"no"}),
        ),
        call("8", "glob", json!({"pattern":"*","path":"link"})),
        call("9", "grep", json!({"pattern":"secret","path":"../outside"})),
        call(
            "10",
            "bash",
            json!({"command":"true","workdir":"../outside"}),
        ),
    ];
    for c in cases {
        let out = run_one(&p, c.clone()).await;
        assert!(out.is_error, "{c:?} → {}", out.text());
        assert_eq!(out.code(), Some("DENIED"), "{c:?} → {}", out.text());
        assert!(
            out.text().contains("outside the workspace"),
            "{}",
            out.text()
        );
    }
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "top secret"
    );
    assert!(!f.outside.join("new.txt").exists());
    assert!(!f.outside.join("x.txt").exists());
    // `..` that stays inside is fine.
    f.write("in.txt", "inside");
    let ok = run_one(&p, call("11", "read", json!({"path":"sub/../in.txt"}))).await;
    assert_eq!(body(&ok.text()), "1: inside");
}

#[tokio::test]
async fn full_access_reaches_outside() {
    let f = Fixture::new();
    std::fs::write(f.outside.join("secret.txt"), "top secret").unwrap();
    let p = f.pipeline(SandboxMode::FullAccess);
    let out = run_one(
        &p,
        call("1", "read", json!({"path":"../outside/secret.txt"})),
    )
    .await;
    assert_eq!(body(&out.text()), "1: top secret");
    let w = run_one(
        &p,
        call(
            "2",
            "write",
            json!({"path":"../outside/w.txt","content":"w"}),
        ),
    )
    .await;
    assert!(!w.is_error, "{}", w.text());
    assert_eq!(
        std::fs::read_to_string(f.outside.join("w.txt")).unwrap(),
        "w"
    );
}

#[tokio::test]
async fn read_only_sandbox_refuses_changes_and_asks_before_bash() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let p = f.pipeline(SandboxMode::ReadOnly);
    let w = run_one(
        &p,
        call("1", "write", json!({"path":"a.txt","content":"b"})),
    )
    .await;
    assert_eq!(w.code(), Some("DENIED"));
    assert!(w.text().contains("read-only"), "{}", w.text());
    let e = run_one(
        &p,
        call(
            "2",
            "edit",
            json!({"path":"a.txt","old_string":"a","new_string":"b"}),
        ),
    )
    .await;
    assert_eq!(e.code(), Some("DENIED"));
    assert_eq!(f.read("a.txt"), "a");
    assert_eq!(
        body(
            &run_one(&p, call("3", "read", json!({"path":"a.txt"})))
                .await
                .text()
        ),
        "1: a"
    );

    // bash is an `ask`: denied by a host that refuses, run when approved.
    let log = Log::default();
    let refuse = RecordingHost::new(log.clone(), false);
    let out = p
        .run_batch(
            &[call("4", "bash", json!({"command":"echo hi"}))],
            &refuse,
            Default::default(),
        )
        .await;
    assert_eq!(out[0].code(), Some("DENIED"));
    assert!(
        out[0].text().contains("did not approve"),
        "{}",
        out[0].text()
    );
    assert!(log.snapshot().contains(&"host:ask:4".to_owned()));
    let approve = RecordingHost::new(log.clone(), true);
    let out = p
        .run_batch(
            &[call("5", "bash", json!({"command":"echo hi"}))],
            &approve,
            Default::default(),
        )
        .await;
    assert_eq!(out[0].text(), "hi\n");
}

#[tokio::test]
async fn spill_files_are_readable_in_workspace_write() {
    let f = Fixture::new();
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let big = "y".repeat(60_000);
    let out = run_one(
        &p,
        call(
            "1",
            "bash",
            json!({"command": format!("printf '%s' {big}")}),
        ),
    )
    .await;
    let path = out.meta.as_ref().unwrap()["outputFile"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = run_one(&p, call("2", "read", json!({"path": path}))).await;
    assert!(!read.is_error, "{}", read.text());
    assert_eq!(
        body(&read.text()).len(),
        "1: ".len() + 2000 + "… [line cut: 58000 more chars]".len()
    );
}

/// An editor with one unsaved buffer: reads of it see the buffer, writes land in the buffers
/// (never on disk), anything else is left to the disk.
#[derive(Default)]
struct Editor {
    buffers: std::sync::Mutex<std::collections::BTreeMap<std::path::PathBuf, String>>,
    fail: bool,
}

#[async_trait::async_trait]
impl keel_tools::TextFiles for Editor {
    async fn read(
        &self,
        path: &std::path::Path,
    ) -> Result<Option<String>, keel_tools::TextFilesError> {
        if self.fail {
            return Err(keel_tools::TextFilesError::Unavailable(
                "the editor went away".into(),
            ));
        }
        Ok(self.buffers.lock().unwrap().get(path).cloned())
    }
    async fn write(
        &self,
        path: &std::path::Path,
        text: &str,
    ) -> Result<bool, keel_tools::TextFilesError> {
        if self.fail {
            return Err(keel_tools::TextFilesError::Unavailable(
                "the editor went away".into(),
            ));
        }
        self.buffers
            .lock()
            .unwrap()
            .insert(path.to_path_buf(), text.to_owned());
        Ok(true)
    }
}

#[tokio::test]
async fn an_editors_unsaved_buffers_win_over_the_disk_and_take_the_writes() {
    let f = Fixture::new();
    let open = f.write("open.rs", "fn saved() {}\n");
    f.write("closed.rs", "fn closed() {}\n");
    let editor = std::sync::Arc::new(Editor::default());
    editor
        .buffers
        .lock()
        .unwrap()
        .insert(open.canonicalize().unwrap(), "fn unsaved() {}\n".into());
    let mut ws = keel_tools::Workspace::new(&f.ws, SandboxMode::WorkspaceWrite).unwrap();
    ws.set_text_files(editor.clone());
    let p = f.pipeline_for(ws, f.registry(vec![]), keel_tools::ToolHooks::new());

    let read = run_one(&p, call("1", "read", json!({"path":"open.rs"}))).await;
    assert_eq!(body(&read.text()), "1: fn unsaved() {}");
    let closed = run_one(&p, call("2", "read", json!({"path":"closed.rs"}))).await;
    assert_eq!(body(&closed.text()), "1: fn closed() {}");

    let edit = run_one(
        &p,
        call(
            "3",
            "edit",
            json!({"path":"open.rs","old_string":"unsaved","new_string":"edited"}),
        ),
    )
    .await;
    assert!(!edit.is_error, "{}", edit.text());
    let buffers = editor.buffers.lock().unwrap().clone();
    assert_eq!(
        buffers[&open.canonicalize().unwrap()],
        "fn edited() {}\n",
        "the edit applies to the buffer"
    );
    assert_eq!(
        f.read("open.rs"),
        "fn saved() {}\n",
        "the disk is the editor's business"
    );

    let write = run_one(
        &p,
        call(
            "4",
            "write",
            json!({"path":"new/made.rs","content":"fn made() {}\n"}),
        ),
    )
    .await;
    assert!(!write.is_error, "{}", write.text());
    assert!(write.text().starts_with("Created"), "{}", write.text());
    assert!(f.ws.join("new").is_dir(), "parent directories are made");
    assert_eq!(
        editor.buffers.lock().unwrap()[&f.ws.canonicalize().unwrap().join("new/made.rs")],
        "fn made() {}\n"
    );
}

#[tokio::test]
async fn an_editor_that_fails_is_named_in_the_error() {
    let f = Fixture::new();
    f.write("a.rs", "x\n");
    let editor = std::sync::Arc::new(Editor {
        fail: true,
        ..Editor::default()
    });
    let mut ws = keel_tools::Workspace::new(&f.ws, SandboxMode::WorkspaceWrite).unwrap();
    ws.set_text_files(editor);
    let p = f.pipeline_for(ws, f.registry(vec![]), keel_tools::ToolHooks::new());
    let read = run_one(&p, call("1", "read", json!({"path":"a.rs"}))).await;
    assert!(read.is_error);
    assert!(
        read.text()
            .contains("reading 'a.rs' through the editor: the editor went away"),
        "{}",
        read.text()
    );
    let write = run_one(&p, call("2", "write", json!({"path":"a.rs","content":"y"}))).await;
    assert!(write.is_error);
    assert!(
        write.text().contains("through the editor"),
        "{}",
        write.text()
    );
    assert_eq!(
        f.read("a.rs"),
        "x\n",
        "nothing is written when the editor fails"
    );
}

#[tokio::test]
async fn a_file_is_changed_only_after_it_was_read_and_while_it_is_unchanged() {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    let p = f.pipeline(SandboxMode::WorkspaceWrite);
    let edit = |id: &str, old: &str, new: &str| {
        call(
            id,
            "edit",
            json!({"file_path":"a.txt","old_string":old,"new_string":new}),
        )
    };

    let unread = run_one(&p, edit("1", "one", "two")).await;
    assert!(unread.is_error);
    assert_eq!(
        unread.text(),
        "FILE_NOT_READ: 'a.txt' exists and has not been read in this session; read it first, then change it"
    );
    let overwrite = run_one(
        &p,
        call("2", "write", json!({"file_path":"a.txt","content":"x"})),
    )
    .await;
    assert!(
        overwrite.text().starts_with("FILE_NOT_READ:"),
        "{}",
        overwrite.text()
    );
    assert_eq!(f.read("a.txt"), "one\n", "nothing was changed");

    // A new file may be written, and then edited: the tool's own write counts as seen.
    let created = run_one(
        &p,
        call(
            "3",
            "write",
            json!({"file_path":"new.txt","content":"fresh\n"}),
        ),
    )
    .await;
    assert!(!created.is_error, "{}", created.text());
    let again = run_one(
        &p,
        call(
            "4",
            "edit",
            json!({"file_path":"new.txt","old_string":"fresh","new_string":"edited"}),
        ),
    )
    .await;
    assert!(!again.is_error, "{}", again.text());

    // Read (even a window of it), then edit; then the file changes under the model.
    run_one(
        &p,
        call("5", "read", json!({"file_path":"a.txt","limit":1})),
    )
    .await;
    let ok = run_one(&p, edit("6", "one", "two")).await;
    assert!(!ok.is_error, "{}", ok.text());
    f.write("a.txt", "changed by a person\n");
    let stale = run_one(&p, edit("7", "changed", "x")).await;
    assert_eq!(
        stale.text(),
        "FILE_CHANGED_SINCE_READ: 'a.txt' changed on disk since you read it; read it again, then change it"
    );
    assert_eq!(
        stale.meta.as_ref().unwrap()["error"],
        "FILE_CHANGED_SINCE_READ"
    );
    run_one(&p, call("8", "read", json!({"file_path":"a.txt"}))).await;
    let fresh = run_one(&p, edit("9", "changed", "x")).await;
    assert!(!fresh.is_error, "{}", fresh.text());
    assert_eq!(f.read("a.txt"), "x by a person\n");

    // The rule can be turned off.
    let mut ws = keel_tools::Workspace::new(&f.ws, SandboxMode::WorkspaceWrite).unwrap();
    ws.set_read_before_write(false);
    let off = f.pipeline_for(ws, f.registry(vec![]), keel_tools::ToolHooks::new());
    f.write("b.txt", "b\n");
    let blind = run_one(
        &off,
        call(
            "10",
            "edit",
            json!({"file_path":"b.txt","old_string":"b","new_string":"c"}),
        ),
    )
    .await;
    assert!(!blind.is_error, "{}", blind.text());
}
