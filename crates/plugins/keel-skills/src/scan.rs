//! A scan of the roots: the skills found (the first of a name wins), those shadowed, and a
//! warning for each file that could not be used; the bounded skill list the system prompt shows;
//! the fingerprint that says, cheaply, whether a new scan is due.
//!
//! In a root, each folder holding `SKILL.md` and each `*.md` file is a skill candidate, in
//! name order; hidden entries are skipped, as are folders without `SKILL.md` (helpers).

use crate::front::{self, Value};
use crate::roots::{self, Root, Scope};
use keel_protocol::text::one_line;
use keel_tools::beneath::{BeneathError, Reader};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Largest skill file read (256 KiB: tighter than the 1 MiB of other project files); a larger
/// one, like one linked out of the workspace or a FIFO, is skipped with a warning naming it.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most bytes of the skill list in the system prompt.
pub const LIST_BYTES: usize = 2048;
/// Room kept at the end of the skill list for the line saying how many were left out.
const NOTE_BYTES: usize = 100;
/// Most skills the skill list holds.
pub const LIST_ENTRIES: usize = 64;
/// Most characters of one description in the skill list.
const DESCRIPTION_CHARS: usize = 240;
/// Longest skill name.
pub const MAX_NAME_CHARS: usize = 64;

/// One skill (its metadata; the body is read when the skill is loaded, so an edit to it takes
/// effect at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `whenToUse`.
    pub when_to_use: Option<String>,
    /// `argument-hint`, shown after `/name`.
    pub argument_hint: Option<String>,
    /// Not `disable-model-invocation: true`: listed for the model and loadable by `skill`.
    pub model_invocable: bool,
    /// `user-invocable` (default true): offered as `/name`.
    pub user_invocable: bool,
    /// The file (`…/name/SKILL.md` or `…/name.md`).
    pub file: PathBuf,
    /// The skill's folder, for the `SKILL.md` form.
    pub folder: Option<PathBuf>,
    /// The kind of root it came from.
    pub scope: Scope,
    /// The directory its files are opened beneath (a project skill's project directory,
    /// [`Root::beneath`]); `None` for the user's.
    pub beneath: Option<PathBuf>,
}

/// A skill hidden by one of the same name in an earlier root (or earlier in its root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The name.
    pub name: String,
    /// The hidden skill's file.
    pub file: PathBuf,
    /// The file of the skill that wins.
    pub by: PathBuf,
}

/// A file skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("skill file {} skipped: {why}", file.display())]
pub struct Warning {
    /// The file.
    pub file: PathBuf,
    /// Why.
    pub why: String,
}

/// Why a skill file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// Not readable, or not UTF-8.
    #[error("cannot read it: {0}")]
    Read(String),
    /// Over [`MAX_FILE_BYTES`].
    #[error("it is {0} bytes, over the limit of 256 KiB")]
    TooLarge(u64),
    /// The front matter cannot be parsed.
    #[error(transparent)]
    Front(#[from] front::FrontError),
    /// A required field is missing or empty.
    #[error("the front matter has no `{0}`")]
    MissingField(&'static str),
    /// A field has the wrong shape.
    #[error("`{field}`: {why}")]
    Field {
        /// The key.
        field: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// What a scan found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillSet {
    /// The skills that win, by name.
    pub skills: Vec<Skill>,
    /// Skills hidden by an earlier one of the same name, in scan order.
    pub shadowed: Vec<Shadowed>,
    /// Files skipped.
    pub warnings: Vec<Warning>,
    /// What the fingerprint stats: the roots, then every candidate file.
    watched: Vec<PathBuf>,
}

/// The modification time and size of each watched path (`None`: absent).
pub type Fingerprint = Vec<Option<(SystemTime, u64)>>;

fn stat(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// The metadata of a skill file's text.
pub fn parse(text: &str) -> Result<(ParsedFront, &str), SkillError> {
    let doc = front::split(text)?;
    let field = |key: &str| match doc.fields.get(key) {
        Some(Value::Text(t)) if !t.trim().is_empty() => Some(t.trim().to_owned()),
        _ => None,
    };
    let any = |keys: &[&str]| keys.iter().find_map(|k| field(k));
    let flag = |keys: &[&'static str], default: bool| -> Result<bool, SkillError> {
        for k in keys {
            if let Some(v) = doc.fields.get(*k) {
                return front::boolean(v).ok_or(SkillError::Field {
                    field: k,
                    why: "expected true or false".into(),
                });
            }
        }
        Ok(default)
    };
    if matches!(doc.fields.get("name"), Some(Value::Nested)) {
        return Err(SkillError::Field {
            field: "name",
            why: "expected a string".into(),
        });
    }
    let name = field("name").ok_or(SkillError::MissingField("name"))?;
    check_name(&name)?;
    let description = field("description").ok_or(SkillError::MissingField("description"))?;
    let parsed = ParsedFront {
        name,
        description,
        when_to_use: any(&["whenToUse", "when_to_use", "when-to-use"]),
        argument_hint: any(&["argument-hint", "argumentHint"]),
        model_invocable: !flag(
            &["disable-model-invocation", "disableModelInvocation"],
            false,
        )?,
        user_invocable: flag(&["user-invocable", "userInvocable"], true)?,
    };
    Ok((parsed, doc.body))
}

/// The fields of a skill's front matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFront {
    /// `name`.
    pub name: String,
    /// `description`.
    pub description: String,
    /// `whenToUse`.
    pub when_to_use: Option<String>,
    /// `argument-hint`.
    pub argument_hint: Option<String>,
    /// Not `disable-model-invocation`.
    pub model_invocable: bool,
    /// `user-invocable`.
    pub user_invocable: bool,
}

/// A name is 1 to 64 letters, digits, `-`, `_`, `.` or `:`, starting with a letter or digit
/// (it is typed as `/name` and passed to the `skill` tool).
fn check_name(name: &str) -> Result<(), SkillError> {
    let ok = name.chars().count() <= MAX_NAME_CHARS
        && name.starts_with(|c: char| c.is_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if ok {
        Ok(())
    } else {
        Err(SkillError::Field {
            field: "name",
            why: format!(
                "{name:?} is not a usable name (1 to {MAX_NAME_CHARS} letters, digits, `-`, `_`, `.`, `:`)"
            ),
        })
    }
}

/// Read a skill file whole: a regular file within [`MAX_FILE_BYTES`], opened beneath
/// `beneath` when given (a project skill: never through a link out of the workspace), else as
/// the user's own (links followed). Anything else is an error, and nothing of it is read.
pub fn read(file: &Path, beneath: Option<&Path>) -> Result<String, SkillError> {
    let bytes = roots::reader(beneath)
        .and_then(|r| r.read_regular(file, MAX_FILE_BYTES))
        .map_err(|e| match e {
            BeneathError::TooLarge { size, .. } => SkillError::TooLarge(size),
            e => SkillError::Read(e.reason()),
        })?;
    String::from_utf8(bytes).map_err(|_| SkillError::Read("it is not UTF-8 text".into()))
}

/// The candidate files of one root, in name order: `(file, folder)`. An entry that cannot be
/// looked at (a link out of the workspace) is still a candidate, so that reading it gives a
/// warning naming it.
fn candidates(
    reader: &Reader,
    root: &Path,
) -> Result<Vec<(PathBuf, Option<PathBuf>)>, BeneathError> {
    let names: Vec<_> = reader
        .list(root)?
        .into_iter()
        .filter(|n| !n.to_string_lossy().starts_with('.'))
        .collect();
    let mut out = Vec::new();
    for name in names {
        let path = root.join(&name);
        let is_md = path.extension().is_some_and(|e| e == "md");
        match reader.metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                let file = path.join("SKILL.md");
                match reader.metadata(&file) {
                    Err(e) if e.is_not_found() => {}
                    _ => out.push((file, Some(path))),
                }
            }
            Err(e) if e.is_not_found() => {}
            _ if is_md => out.push((path, None)),
            Ok(_) => {}
            // Not looked at (linked out, a loop): its SKILL.md, which the read refuses.
            Err(_) => out.push((path.join("SKILL.md"), Some(path))),
        }
    }
    Ok(out)
}

impl SkillSet {
    /// Scan `roots` in rank order.
    pub fn scan(roots: &[Root]) -> SkillSet {
        let mut cat = SkillSet {
            watched: roots.iter().map(|r| r.dir.clone()).collect(),
            ..SkillSet::default()
        };
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for root in roots {
            let beneath = root.beneath();
            let found = roots::reader(beneath.as_deref()).and_then(|r| candidates(&r, &root.dir));
            let found = match found {
                Ok(found) => found,
                Err(e) if e.is_not_found() => Vec::new(),
                Err(e) => {
                    cat.warnings.push(Warning {
                        file: root.dir.clone(),
                        why: format!("the folder is not read: {}", e.reason()),
                    });
                    Vec::new()
                }
            };
            for (file, folder) in found {
                cat.watched.push(file.clone());
                let parsed =
                    read(&file, beneath.as_deref()).and_then(|text| parse(&text).map(|(p, _)| p));
                let p = match parsed {
                    Ok(p) => p,
                    Err(e) => {
                        cat.warnings.push(Warning {
                            file,
                            why: e.to_string(),
                        });
                        continue;
                    }
                };
                if let Some(&at) = by_name.get(&p.name) {
                    cat.shadowed.push(Shadowed {
                        name: p.name,
                        file,
                        by: cat.skills[at].file.clone(),
                    });
                    continue;
                }
                by_name.insert(p.name.clone(), cat.skills.len());
                cat.skills.push(Skill {
                    name: p.name,
                    description: p.description,
                    when_to_use: p.when_to_use,
                    argument_hint: p.argument_hint,
                    model_invocable: p.model_invocable,
                    user_invocable: p.user_invocable,
                    file,
                    folder,
                    scope: root.scope,
                    beneath: beneath.clone(),
                });
            }
        }
        cat.skills.sort_by(|a, b| a.name.cmp(&b.name));
        cat
    }

    /// The stat of every watched path: the roots and the candidate files (never the other
    /// files of a skill's folder).
    pub fn fingerprint(&self) -> Fingerprint {
        self.watched.iter().map(|p| stat(p)).collect()
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// The skills the model may load.
    pub fn model_skills(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter().filter(|s| s.model_invocable)
    }

    /// The system-prompt section listing the model's skills, bounded by [`LIST_BYTES`] and
    /// [`LIST_ENTRIES`]; `None` when there is none.
    pub fn prompt(&self) -> Option<String> {
        let skills: Vec<&Skill> = self.model_skills().collect();
        if skills.is_empty() {
            return None;
        }
        let mut text = String::from(
            "Skills: instructions for particular tasks, kept in files. When a task matches a \
skill's description, load it with the `skill` tool (by name) before you start, and follow it.",
        );
        let mut listed = 0;
        for s in &skills {
            let mut line = format!(
                "\n- {}: {}",
                s.name,
                one_line(&s.description, DESCRIPTION_CHARS)
            );
            if let Some(when) = &s.when_to_use {
                line.push_str(&format!(
                    " (use when: {})",
                    one_line(when, DESCRIPTION_CHARS)
                ));
            }
            if listed == LIST_ENTRIES || text.len() + line.len() > LIST_BYTES - NOTE_BYTES {
                break;
            }
            text.push_str(&line);
            listed += 1;
        }
        let left = skills.len() - listed;
        if left > 0 {
            text.push_str(&format!(
                "\n({left} more skill{} not listed here; `skill` names close matches for a name you try.)",
                if left == 1 { "" } else { "s" }
            ));
        }
        Some(text)
    }

    /// Names of the model's skills close to `name` (edit distance, or one containing the
    /// other), nearest first, at most five.
    pub fn close_names(&self, name: &str, model: bool) -> Vec<String> {
        let lower = name.to_lowercase();
        let mut scored: Vec<(usize, &str)> = self
            .skills
            .iter()
            .filter(|s| !model || s.model_invocable)
            .filter_map(|s| {
                let other = s.name.to_lowercase();
                let d = distance(&lower, &other);
                let near = d <= (lower.chars().count() / 3).max(2)
                    || other.contains(&lower)
                    || lower.contains(&other);
                near.then_some((d, s.name.as_str()))
            })
            .collect();
        scored.sort();
        scored
            .into_iter()
            .take(5)
            .map(|(_, n)| n.to_owned())
            .collect()
    }
}

/// Levenshtein distance in characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            row.push((prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
