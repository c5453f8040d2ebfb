//! Named subagent definitions: Claude Code's `agents/*.md` files. Front matter `name`,
//! `description`, `tools` (comma-separated or a list; optional) and `model` (optional); the
//! body is the subagent's instructions ([`super::front`] reads the front matter).
//!
//! Where they come from, in rank order (the first file holding a name wins; a later one is a
//! problem naming both):
//!
//! 1. the workspace's `.claude/agents/` then `.keel/agents/`, only when the user trusts the
//!    workspace, opened beneath it (nothing followed out of it);
//! 2. the user's `$KEEL_HOME/agents/` then `~/.claude/agents/` (links followed);
//! 3. each enabled plugin bundle's `agents/`, opened beneath the bundle's root and named
//!    `BUNDLE:NAME`.
//!
//! A file over [`MAX_FILE`] bytes, not UTF-8, with an unclosed front matter or without a usable
//! name (front matter `name`, else the file stem; [A-Za-z0-9_.:-]+) is skipped and kept as a
//! [`DefProblem`] naming it; a directory that cannot be listed likewise. Missing directories
//! are not problems. Definitions are read once, when the plugin is installed.

use super::ChildModel;
use super::front::{self, Value};
use crate::handle::AgentHandle;
use crate::plugin::{Bundle, InstallContext};
use crate::prompt::PromptSection;
use keel_protocol::SessionEvent;
use keel_protocol::present::{Item, Level, MakePresenter, data_of, field, stateless};
use keel_protocol::text::{cut, one_line};
use keel_tools::ToolError;
use keel_tools::beneath::{BeneathError, Reader};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest definition file read.
pub const MAX_FILE: u64 = 256 * 1024;

/// The ignorable event logged (in the parent's session, when the plugin binds) for each file
/// skipped: `{file, error}`.
pub const PROBLEM_EVENT: &str = "subagent/definition-skipped";

/// The project's definition folders, relative to the workspace, in rank order.
pub const PROJECT_DIRS: [&str; 2] = [".claude/agents", ".keel/agents"];

/// Claude Code's default subagent type: named without a definition of that name, it is the
/// plain child (no definition), so a Claude-trained call that names it still works.
pub const GENERAL_PURPOSE: &str = "general-purpose";

/// Longest line of a definition in the `agent` parameter's description.
const LISTED_CHARS: usize = 100;
/// Most definitions listed in the parameter's description (the rest are counted).
const LISTED_MAX: usize = 40;

/// One definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// Its name (`BUNDLE:NAME` for a bundle's).
    pub name: String,
    /// Its description (may be empty).
    pub description: String,
    /// The tools it may use (`None`: all the child would get otherwise).
    pub tools: Option<Vec<String>>,
    /// The model it asks for (`inherit` and absent: the parent's).
    pub model: Option<String>,
    /// Its instructions (the file's body).
    pub body: String,
    /// Its file.
    pub path: PathBuf,
    /// Where it is from, as a person reads it (`.claude/agents/x.md`, `plugin p: agents/x.md`).
    pub label: String,
}

impl AgentDef {
    /// Whether a tool named `tool` is among [`AgentDef::tools`] (all are, without a list).
    /// Names match ignoring case, `_` and `-` (`TodoWrite` is `todo_write`), and Claude
    /// Code's `Task` is `subagent`, its `MultiEdit` is `edit`.
    pub fn allows(&self, tool: &str) -> bool {
        let Some(list) = &self.tools else {
            return true;
        };
        let want = normal(tool);
        list.iter().any(|t| {
            let t = normal(t);
            let t = match t.as_str() {
                "task" => "subagent".to_owned(),
                "multiedit" => "edit".to_owned(),
                _ => t,
            };
            t == want
        })
    }

    /// The child's system prompt section: the body, introduced.
    pub fn prompt_section(&self) -> PromptSection {
        PromptSection::new(
            format!("agent:{}", self.name),
            format!(
                "You are running as the named subagent `{}` (defined in {}). Its instructions \
                 follow; where they differ from the guidance above, follow them.\n\n{}",
                self.name, self.label, self.body
            ),
        )
    }

    /// The model the child runs on when the definition names one keel's model catalogue
    /// knows and that is not the parent's (on the parent's provider); `None` otherwise:
    /// `inherit`, Claude Code's aliases (`sonnet`, `opus`, `haiku`) and unknown names run on
    /// the parent's model.
    pub fn child_model(&self, parent: &AgentHandle) -> Option<ChildModel> {
        let m = self.model.as_deref()?;
        let cfg = parent.config();
        let catalogue = keel_llm::ModelCatalogue::default();
        if m == cfg.model || !catalogue.knows(m) {
            return None;
        }
        Some(ChildModel {
            provider_name: cfg.provider_name.clone(),
            provider: parent.provider().clone(),
            model: m.to_owned(),
            info: catalogue.lookup(m),
        })
    }
}

fn normal(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A file or folder that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefProblem {
    /// The file (or folder).
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for DefProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "subagent definition {} skipped: {}",
            self.path.display(),
            self.reason
        )
    }
}

/// Where definitions are read from ([`AgentDefs::load`]).
#[derive(Debug, Clone, Copy)]
pub struct DefSources<'a> {
    /// The workspace, when the user trusts it (`None`: its folders are not read).
    pub project: Option<&'a Path>,
    /// `$KEEL_HOME`.
    pub keel_home: &'a Path,
    /// `$HOME`, when set.
    pub home: Option<&'a Path>,
    /// The enabled plugin bundles.
    pub bundles: &'a [Bundle],
}

/// The definitions found, and the files skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentDefs {
    defs: Vec<Arc<AgentDef>>,
    problems: Vec<DefProblem>,
}

/// One folder to read.
struct Root {
    dir: PathBuf,
    /// Opened beneath this (the workspace, a bundle's root); `None`: the user's own.
    beneath: Option<PathBuf>,
    /// `BUNDLE` for a bundle's.
    namespace: Option<String>,
    /// How its files are named to a person: this, then the file name.
    label: String,
}

impl AgentDefs {
    /// No definitions.
    pub fn none() -> Arc<AgentDefs> {
        Arc::new(AgentDefs::default())
    }

    /// The definitions an agent installed with `ctx` may name: the project's when
    /// `ctx.project_trust` is trusted, the user's (`$HOME` from the environment), the
    /// bundles'.
    pub fn for_install(ctx: &InstallContext) -> AgentDefs {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        AgentDefs::load(&DefSources {
            project: ctx.project_trust.is_trusted().then_some(ctx.cwd.as_path()),
            keel_home: &ctx.keel_home,
            home: home.as_deref(),
            bundles: &ctx.bundles,
        })
    }

    /// Read the definitions of `src` (see the [module docs](self)). Never fails.
    pub fn load(src: &DefSources<'_>) -> AgentDefs {
        let mut roots = Vec::new();
        if let Some(project) = src.project {
            for rel in PROJECT_DIRS {
                roots.push(Root {
                    dir: project.join(rel),
                    beneath: Some(project.to_path_buf()),
                    namespace: None,
                    label: format!("{rel}/"),
                });
            }
        }
        roots.push(Root {
            dir: src.keel_home.join("agents"),
            beneath: None,
            namespace: None,
            label: "$KEEL_HOME/agents/".into(),
        });
        if let Some(home) = src.home {
            roots.push(Root {
                dir: home.join(".claude/agents"),
                beneath: None,
                namespace: None,
                label: "~/.claude/agents/".into(),
            });
        }
        for b in src.bundles {
            roots.push(Root {
                dir: b.root.join("agents"),
                beneath: Some(b.root.clone()),
                namespace: Some(b.name.clone()),
                label: format!("plugin {}: agents/", b.name),
            });
        }
        let mut out = AgentDefs::default();
        let mut seen_dirs: HashSet<PathBuf> = HashSet::new();
        for root in roots {
            // A folder reached twice (the workspace is the home directory) is read once; one
            // that could not be listed (linked out of the workspace) does not count as read.
            let canonical = root.dir.canonicalize().ok();
            if canonical.as_ref().is_some_and(|c| seen_dirs.contains(c)) {
                continue;
            }
            if out.scan(&root)
                && let Some(c) = canonical
            {
                seen_dirs.insert(c);
            }
        }
        out
    }

    fn problem(&mut self, path: PathBuf, reason: impl Into<String>) {
        self.problems.push(DefProblem {
            path,
            reason: reason.into(),
        });
    }

    /// Read one folder; false when it could not be listed.
    fn scan(&mut self, root: &Root) -> bool {
        let reader = match &root.beneath {
            Some(base) => Reader::beneath(base),
            None => Ok(Reader::User),
        };
        let listed = reader.and_then(|r| r.list(&root.dir).map(|names| (r, names)));
        let (reader, names) = match listed {
            Ok(x) => x,
            Err(e) if e.is_not_found() => return false,
            Err(e) => {
                self.problem(root.dir.clone(), e.reason());
                return false;
            }
        };
        for name in names {
            let Some(name) = name.to_str() else {
                self.problem(root.dir.join(&name), "its name is not UTF-8");
                continue;
            };
            if name.starts_with('.') || !name.ends_with(".md") {
                continue;
            }
            let path = root.dir.join(name);
            let label = format!("{}{name}", root.label);
            match self.read(&reader, &path, name, root.namespace.as_deref(), label) {
                Ok(def) => self.add(def),
                Err(reason) => self.problem(path, reason),
            }
        }
        true
    }

    fn read(
        &self,
        reader: &Reader,
        path: &Path,
        file_name: &str,
        namespace: Option<&str>,
        label: String,
    ) -> Result<AgentDef, String> {
        let bytes = reader
            .read_regular(path, MAX_FILE)
            .map_err(|e: BeneathError| e.reason())?;
        let text = String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
        let parsed = front::parse(&text)?;
        let get = |key: &str| parsed.fields.get(key).map(Value::text);
        let stem = file_name.strip_suffix(".md").unwrap_or(file_name);
        let own = get("name")
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| stem.to_owned());
        let name = match namespace {
            Some(ns) => format!("{ns}:{own}"),
            None => own,
        };
        if !valid_name(&name) {
            return Err(format!(
                "no usable name: {name:?} (a name is letters, digits and _ . : -)"
            ));
        }
        let tools = parsed
            .fields
            .get("tools")
            .map(Value::items)
            .filter(|t| !t.iter().any(|t| t == "*"));
        let model = get("model")
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty() && m != "inherit");
        Ok(AgentDef {
            name,
            description: get("description").unwrap_or_default().trim().to_owned(),
            tools,
            model,
            body: parsed.body,
            path: path.to_path_buf(),
            label,
        })
    }

    fn add(&mut self, def: AgentDef) {
        if let Some(first) = self.get(&def.name) {
            let reason = format!(
                "the name {} is already defined by {}",
                def.name,
                first.path.display()
            );
            return self.problem(def.path, reason);
        }
        self.defs.push(Arc::new(def));
    }

    /// The definitions, in rank order.
    pub fn defs(&self) -> &[Arc<AgentDef>] {
        &self.defs
    }

    /// The files and folders skipped.
    pub fn problems(&self) -> &[DefProblem] {
        &self.problems
    }

    /// True when there is no definition.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    /// The definition named `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<AgentDef>> {
        self.defs.iter().find(|d| d.name == name)
    }

    /// The definition a call names: `None` for no name, an empty one or
    /// [`GENERAL_PURPOSE`] without a definition of that name; an unknown name is an
    /// `InvalidArgs` error naming it and listing the known ones.
    pub fn resolve(&self, name: Option<&str>) -> Result<Option<Arc<AgentDef>>, ToolError> {
        let Some(name) = name.map(str::trim).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        if let Some(def) = self.get(name) {
            return Ok(Some(def.clone()));
        }
        if name == GENERAL_PURPOSE {
            return Ok(None);
        }
        let known = if self.defs.is_empty() {
            "none are defined; call subagent without agent".to_owned()
        } else {
            let names: Vec<&str> = self.defs.iter().map(|d| d.name.as_str()).collect();
            format!("the known ones are: {}", names.join(", "))
        };
        Err(ToolError::InvalidArgs(format!(
            "agent: no subagent definition is named {name:?}; {known}"
        )))
    }

    /// The `agent` parameter's description: what it does, then `name — description` lines,
    /// each cut at about 100 characters.
    pub fn parameter_description(&self) -> String {
        let mut text = "A named subagent: its instructions join the child's system prompt and \
                        its tool list limits the child's. One of:"
            .to_owned();
        for d in self.defs.iter().take(LISTED_MAX) {
            let line = match d.description.is_empty() {
                true => d.name.clone(),
                false => format!("{} — {}", d.name, d.description),
            };
            let flat: Vec<&str> = line.split_whitespace().collect();
            text.push('\n');
            text.push_str(&cut(&flat.join(" "), LISTED_CHARS));
        }
        if self.defs.len() > LISTED_MAX {
            text.push_str(&format!("\n… and {} more", self.defs.len() - LISTED_MAX));
        }
        text
    }
}

/// A usable definition name: [A-Za-z0-9_.:-]+.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// The presenter of [`PROBLEM_EVENT`]: an error notice naming the file and why.
pub fn presenter() -> MakePresenter {
    stateless(present)
}

fn present(event: &SessionEvent, out: &mut Vec<Item>) {
    if let Some(data) = data_of(event, PROBLEM_EVENT) {
        out.push(Item::notice(
            Level::Error,
            format!(
                "Subagent definition {} skipped: {}",
                field(data, "file"),
                one_line(field(data, "error"), 300)
            ),
        ));
    }
}

#[cfg(test)]
#[path = "defs_tests.rs"]
mod tests;
