//! Tests of parsing, scanning and ranking.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::roots::{Root, Scope};
use pretty_assertions::assert_eq;

fn skill_text(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n")
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn root(dir: &Path, scope: Scope) -> Root {
    Root {
        dir: dir.to_path_buf(),
        scope,
        bundle: None,
    }
}

#[test]
fn fields_flags_and_defaults() {
    let (p, body) = parse(
        "---\nname: pdf\ndescription: Fill PDF forms\nwhenToUse: a PDF is named\ndisable-model-invocation: true\nuser-invocable: false\nargument-hint: FILE\n---\nsteps\n",
    )
    .unwrap();
    assert_eq!(p.name, "pdf");
    assert_eq!(p.description, "Fill PDF forms");
    assert_eq!(p.when_to_use.as_deref(), Some("a PDF is named"));
    assert_eq!(p.argument_hint.as_deref(), Some("FILE"));
    assert!(!p.model_invocable && !p.user_invocable);
    assert_eq!(body, "steps\n");
    let (p, _) = parse(&skill_text("x", "y")).unwrap();
    assert!(p.model_invocable && p.user_invocable && p.when_to_use.is_none());
}

#[test]
fn missing_or_bad_fields_are_errors() {
    let e = parse("---\ndescription: d\n---\n").unwrap_err();
    assert_eq!(e.to_string(), "the front matter has no `name`");
    let e = parse("---\nname: n\ndescription: \"\"\n---\n").unwrap_err();
    assert_eq!(e.to_string(), "the front matter has no `description`");
    let e = parse("---\nname: two words\ndescription: d\n---\n").unwrap_err();
    assert!(e.to_string().contains("not a usable name"), "{e}");
    let e = parse("---\nname: n\ndescription: d\nuser-invocable: maybe\n---\n").unwrap_err();
    assert_eq!(e.to_string(), "`user-invocable`: expected true or false");
    let e = parse("---\nname:\n  a: b\ndescription: d\n---\n").unwrap_err();
    assert!(e.to_string().contains("`name`"), "{e}");
}

#[test]
fn the_first_root_wins_and_the_rest_are_shadowed() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    write(&a.join("shared/SKILL.md"), &skill_text("shared", "from a"));
    write(&a.join("solo.md"), &skill_text("solo", "file form"));
    write(&b.join("shared/SKILL.md"), &skill_text("shared", "from b"));
    write(&b.join("other/SKILL.md"), &skill_text("other", "only b"));
    // A helper folder without SKILL.md and hidden entries are no skills.
    write(&b.join("helpers/run.sh"), "echo");
    write(&b.join(".hidden/SKILL.md"), &skill_text("hidden", "no"));
    let cat = SkillSet::scan(&[root(&a, Scope::Project), root(&b, Scope::Home)]);
    let names: Vec<&str> = cat.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["other", "shared", "solo"]);
    let shared = cat.get("shared").unwrap();
    assert_eq!(shared.description, "from a");
    assert_eq!(shared.scope, Scope::Project);
    assert_eq!(shared.folder.as_deref(), Some(a.join("shared").as_path()));
    assert_eq!(cat.get("solo").unwrap().folder, None);
    assert_eq!(
        cat.shadowed,
        [Shadowed {
            name: "shared".into(),
            file: b.join("shared/SKILL.md"),
            by: a.join("shared/SKILL.md"),
        }]
    );
    assert!(cat.warnings.is_empty(), "{:?}", cat.warnings);
}

#[test]
fn bad_files_are_warnings_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    write(&r.join("broken/SKILL.md"), "---\nname: [oops\n");
    write(&r.join("nodesc.md"), "---\nname: nodesc\n---\n");
    let big = format!("{}{}", skill_text("big", "d"), "x".repeat(300 * 1024));
    write(&r.join("big/SKILL.md"), &big);
    write(&r.join("binary.md"), "");
    std::fs::write(r.join("binary.md"), [0xff, 0xfe, 0x00]).unwrap();
    write(&r.join("good/SKILL.md"), &skill_text("good", "fine"));
    let cat = SkillSet::scan(&[root(r, Scope::Home)]);
    assert_eq!(cat.skills.len(), 1);
    let warned: Vec<String> = cat.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(warned.len(), 4, "{warned:?}");
    assert!(warned[0].contains("big/SKILL.md") && warned[0].contains("256 KiB"));
    assert!(warned[1].contains("binary.md") && warned[1].contains("UTF-8"));
    assert!(warned[2].contains("broken/SKILL.md") && warned[2].contains("not closed"));
    assert!(warned[3].contains("nodesc.md") && warned[3].contains("`description`"));
}

#[test]
fn the_prompt_is_bounded_and_says_how_many_are_left_out() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(
        SkillSet::scan(&[root(t.path(), Scope::Home)]).prompt(),
        None
    );
    for i in 0..100 {
        let name = format!("skill-{i:03}");
        write(
            &t.path().join(&name).join("SKILL.md"),
            &skill_text(&name, "does one particular thing well"),
        );
    }
    write(
        &t.path().join("secret.md"),
        "---\nname: aaa-secret\ndescription: hidden\ndisable-model-invocation: true\n---\n",
    );
    let cat = SkillSet::scan(&[root(t.path(), Scope::Home)]);
    let p = cat.prompt().unwrap();
    assert!(p.len() <= LIST_BYTES, "{}", p.len());
    assert!(!p.contains("aaa-secret"));
    let listed = p.matches("\n- ").count();
    assert!(listed > 10 && listed < 64, "{listed}");
    assert!(
        p.ends_with(&format!(
            "({} more skills not listed here; `skill` names close matches for a name you try.)",
            100 - listed
        )),
        "{p}"
    );
}

#[test]
fn close_names() {
    let t = tempfile::tempdir().unwrap();
    for n in ["pdf-forms", "pdf", "excel", "deploy"] {
        write(&t.path().join(format!("{n}.md")), &skill_text(n, "d"));
    }
    let cat = SkillSet::scan(&[root(t.path(), Scope::Home)]);
    assert_eq!(cat.close_names("pdf-form", true), ["pdf-forms", "pdf"]);
    assert_eq!(cat.close_names("exel", true), ["excel"]);
    assert!(cat.close_names("zzzzzzzz", true).is_empty());
}

#[test]
fn the_fingerprint_moves_when_a_root_or_a_skill_file_changes() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("skills");
    let cat = SkillSet::scan(&[root(&r, Scope::Home)]);
    let before = cat.fingerprint();
    assert_eq!(before, vec![None]);
    write(&r.join("a.md"), &skill_text("a", "d"));
    assert_ne!(cat.fingerprint(), before);
    let cat = SkillSet::scan(&[root(&r, Scope::Home)]);
    let fp = cat.fingerprint();
    assert_eq!(cat.fingerprint(), fp);
    // An edit in place (same directory listing) is seen through the file's own stat.
    std::fs::write(r.join("a.md"), skill_text("a", "a longer description")).unwrap();
    assert_ne!(cat.fingerprint(), fp);
}

#[test]
fn project_skills_linked_out_of_the_workspace_or_fifos_are_never_read() {
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let skills = ws.join(".claude/skills");
    let outside = t.path().join("outside");
    write(
        &outside.join("SKILL.md"),
        &skill_text("leak", "MARKER outside"),
    );
    write(
        &outside.join("deep/SKILL.md"),
        &skill_text("deep", "MARKER deep"),
    );
    write(&skills.join("good/SKILL.md"), &skill_text("good", "inside"));
    // A link within the workspace is followed.
    symlink("good", skills.join("alias")).unwrap();
    std::fs::create_dir_all(skills.join("leak")).unwrap();
    symlink(outside.join("SKILL.md"), skills.join("leak/SKILL.md")).unwrap();
    symlink("../../../outside/SKILL.md", skills.join("rel.md")).unwrap();
    symlink(outside.join("deep"), skills.join("deep")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(skills.join("fifo.md"))
        .status()
        .unwrap();
    assert!(made.success());
    let cat = SkillSet::scan(&crate::roots::roots(
        Some(&ws),
        &[],
        None,
        &t.path().join("k"),
    ));
    let names: Vec<&str> = cat.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    assert_eq!(cat.shadowed.len(), 1, "the alias is the same skill");
    let said: Vec<String> = cat.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 4, "{said:?}");
    for (file, why) in [
        ("deep/SKILL.md", "outside the workspace"),
        ("fifo.md", "a FIFO"),
        ("leak/SKILL.md", "outside the workspace"),
        ("rel.md", "outside the workspace"),
    ] {
        let path = skills.join(file).display().to_string();
        assert!(
            said.iter().any(|w| w.contains(&path) && w.contains(why)),
            "{file}: {said:?}"
        );
    }
    assert!(!said.iter().any(|w| w.contains("MARKER")));
    assert!(!cat.prompt().unwrap_or_default().contains("MARKER"));

    // The same links in the user's own root are theirs (dotfiles): followed.
    let home = t.path().join("home-skills");
    std::fs::create_dir_all(&home).unwrap();
    symlink(outside.join("SKILL.md"), home.join("mine.md")).unwrap();
    let cat = SkillSet::scan(&[root(&home, Scope::Home)]);
    assert_eq!(cat.skills.len(), 1);
    assert_eq!(cat.skills[0].name, "leak");
}

#[test]
fn bundle_skills_rank_after_configured_roots_and_links_out_of_the_bundle_are_not_read() {
    use keel_agent::plugin::Bundle;
    use std::os::unix::fs::symlink;
    let t = tempfile::tempdir().unwrap();
    let configured = t.path().join("configured");
    let home = t.path().join("k");
    let bundle = Bundle {
        name: "tools".into(),
        root: t.path().join("bundle"),
    };
    let skills = bundle.root.join("skills");
    write(
        &configured.join("shared.md"),
        &skill_text("shared", "configured"),
    );
    write(&skills.join("shared.md"), &skill_text("shared", "bundle"));
    write(
        &skills.join("fmt/SKILL.md"),
        &skill_text("fmt", "from the bundle"),
    );
    write(&home.join("skills/fmt.md"), &skill_text("fmt", "home"));
    write(
        &t.path().join("outside/SKILL.md"),
        &skill_text("leak", "MARKER outside"),
    );
    std::fs::create_dir_all(skills.join("leak")).unwrap();
    symlink("../../../outside/SKILL.md", skills.join("leak/SKILL.md")).unwrap();
    let roots = crate::roots::roots_with_bundles(
        None,
        std::slice::from_ref(&configured),
        std::slice::from_ref(&bundle),
        None,
        &home,
    );
    assert_eq!(roots[1].dir, skills);
    assert_eq!(roots[1].beneath(), Some(bundle.root.clone()));
    let cat = SkillSet::scan(&roots);
    let found: Vec<(&str, &str)> = cat
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        found,
        [("fmt", "from the bundle"), ("shared", "configured")],
        "the first root holding a name wins"
    );
    assert_eq!(cat.shadowed.len(), 2);
    let said: Vec<String> = cat.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("leak/SKILL.md"), "{said:?}");
    assert!(!said[0].contains("MARKER"), "{said:?}");
}
