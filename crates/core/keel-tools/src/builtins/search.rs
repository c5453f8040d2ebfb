//! `glob` and `grep`, built on ripgrep's crates: the `ignore` walker, `globset` and
//! `grep-searcher` (binary files skipped). `glob` lists every file (hidden and gitignored ones
//! too, `.git` skipped) newest first; `grep` searches gitignore-aware, in path order, and shows
//! matching lines under each file's name. Output is bounded.

use super::{blocking, parse};
use crate::error::ToolError;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::{Access, Workspace};
use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use keel_protocol::ToolSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Paths listed at most by `glob` (newest first; the rest are saved to a file).
pub const MAX_GLOB_PATHS: usize = 100;
/// Paths listed at most by `grep` in files/count mode.
pub const MAX_PATHS: usize = 200;
/// Matching lines output at most by `grep` in content mode.
pub const MAX_MATCHES: usize = 250;
/// Lines output at most by `grep` in content mode.
pub const MAX_CONTENT_LINES: usize = 400;
/// Bytes output at most by `grep` in content mode.
pub const MAX_CONTENT_BYTES: usize = 30_000;
/// Characters kept of one matching line.
const MAX_MATCH_LINE_CHARS: usize = 400;

fn walk(root: &Path) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build()
}

/// A glob matched against a file name (pattern without `/`) or the path under the base.
struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    fn new(pattern: &str) -> Result<Self, ToolError> {
        let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidArgs(format!("invalid glob '{pattern}': {e}")))?
            .compile_matcher();
        Ok(PathGlob {
            matcher,
            by_name: !pattern.contains('/'),
        })
    }

    fn matches(&self, base: &Path, path: &Path) -> bool {
        if self.by_name {
            path.file_name().is_some_and(|n| self.matcher.is_match(n))
        } else {
            path.strip_prefix(base)
                .is_ok_and(|rel| self.matcher.is_match(rel))
        }
    }
}

/// Files under `base` (or `base` itself when it is a file), in path order.
fn files(base: &Path) -> impl Iterator<Item = PathBuf> {
    walk(base)
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
}

fn resolve_base(ws: &Workspace, path: Option<&str>) -> Result<PathBuf, ToolError> {
    let base = ws.resolve(path.unwrap_or("."), Access::Read)?;
    if !base.exists() {
        return Err(ToolError::Failed(format!(
            "'{}' does not exist",
            path.unwrap_or(".")
        )));
    }
    Ok(base)
}

/// `glob {pattern, path?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Deserialize)]
struct GlobArgs {
    pattern: String,
    path: Option<String>,
}

/// Every file under `base` (or `base` itself when it is a file), hidden and gitignored ones
/// included (`glob` answers "which files are there", as dsh's does); `.git` is skipped.
fn all_files(base: &Path) -> impl Iterator<Item = PathBuf> {
    ignore::WalkBuilder::new(base)
        .standard_filters(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(ignore::DirEntry::into_path)
}

#[async_trait]
impl Tool for GlobTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "glob".into(),
            description: "Find files by glob, e.g. `**/*.rs` or `src/*/mod.ts`; a pattern \
                          without `/` matches file names at any depth. Hidden and gitignored \
                          files included; newest first, up to 100 paths."
                .into(),
            parameters: json!({"type":"object","properties":{
                "pattern":{"type":"string"},
                "path":{"type":"string","description":"Directory to search (default: working directory)."}
            },"required":["pattern"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: GlobArgs = parse(args)?;
        let glob = PathGlob::new(&a.pattern)?;
        let base = resolve_base(ctx.workspace, a.path.as_deref())?;
        let ws = ctx.workspace.clone();
        let spill = ctx.spill.clone();
        let (text, total) = blocking(move || {
            let mut found: Vec<(std::time::SystemTime, PathBuf)> = all_files(&base)
                .filter(|p| glob.matches(&base, p))
                .map(|p| {
                    let modified = std::fs::metadata(&p)
                        .and_then(|m| m.modified())
                        .unwrap_or(std::time::UNIX_EPOCH);
                    (modified, p)
                })
                .collect();
            let total = found.len();
            if total == 0 {
                let text = format!(
                    "No files match '{}' under {}.",
                    a.pattern,
                    ws.display(&base)
                );
                return Ok((text, 0));
            }
            // Newest first; ties (same mtime) by path, so the answer is stable.
            found.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| x.1.cmp(&y.1)));
            let lines: Vec<String> = found.iter().map(|(_, p)| ws.display(p)).collect();
            let mut text = lines[..total.min(MAX_GLOB_PATHS)].join("\n");
            if total > MAX_GLOB_PATHS {
                let rest = lines[MAX_GLOB_PATHS..].join("\n");
                let saved = spill
                    .save(&rest, "glob")
                    .map_err(|e| ToolError::io("saving the rest of the list in", &spill.dir, e))?;
                let _ = write!(
                    text,
                    "\n[{MAX_GLOB_PATHS} of {total} paths shown; the other {} are listed in {}]",
                    total - MAX_GLOB_PATHS,
                    saved.display()
                );
            }
            Ok((text, total))
        })
        .await?;
        Ok(ToolOutput::text(text).with_value(json!({"matches": total})))
    }
}

/// `grep {pattern, path?, include?, case_insensitive?, output_mode?, context?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    FilesWithMatches,
    Content,
    Count,
}

#[derive(Deserialize)]
struct GrepArgs {
    pattern: String,
    path: Option<String>,
    include: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    output_mode: Option<OutputMode>,
    context: Option<usize>,
}

#[async_trait]
impl Tool for GrepTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "grep".into(),
            description: "Search file contents with a regex (Rust syntax), skipping gitignored \
                          and binary files. Matching lines with numbers under each file, at \
                          most 250."
                .into(),
            parameters: json!({"type":"object","properties":{
                "pattern":{"type":"string"},
                "path":{"type":"string","description":"File or directory (default: working directory)."},
                "include":{"type":"string","description":"Only files matching this glob, e.g. `*.rs`."},
                "case_insensitive":{"type":"boolean"},
                "output_mode":{"type":"string","enum":["content","files_with_matches","count"]},
                "context":{"type":"integer","minimum":0,"maximum":10,"description":"Lines around each match."}
            },"required":["pattern"]}),
        }
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        &[("glob", "include")]
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: GrepArgs = parse(args)?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(a.case_insensitive)
            .line_terminator(Some(b'\n'))
            .build(&a.pattern)
            .map_err(|e| ToolError::InvalidArgs(format!("invalid regex: {e}")))?;
        let filter = a.include.as_deref().map(PathGlob::new).transpose()?;
        let base = resolve_base(ctx.workspace, a.path.as_deref())?;
        let mode = a.output_mode.unwrap_or(OutputMode::Content);
        let context = if mode == OutputMode::Content {
            a.context.unwrap_or(0)
        } else {
            0
        };
        let ws = ctx.workspace.clone();
        let cancel = ctx.cancel.clone();
        let (text, files_matched) = blocking(move || {
            let mut searcher = SearcherBuilder::new()
                .line_number(true)
                .binary_detection(BinaryDetection::quit(0))
                .before_context(context)
                .after_context(context)
                .build();
            let gaps = if context > 0 {
                Gaps::Separated
            } else {
                Gaps::Joined
            };
            let mut out = Collector::new(mode, gaps);
            for path in files(&base) {
                if cancel.is_cancelled() {
                    return Err(ToolError::Aborted("grep was cancelled".into()));
                }
                if filter.as_ref().is_some_and(|g| !g.matches(&base, &path)) {
                    continue;
                }
                out.start_file(ws.display(&path));
                // Unreadable files are skipped, as ripgrep does.
                let _ = searcher.search_path(&matcher, &path, &mut out);
                out.end_file();
                if out.full {
                    break;
                }
            }
            let files_matched = out.files_matched;
            Ok((out.render(&a.pattern), files_matched))
        })
        .await?;
        Ok(ToolOutput::text(text).with_value(json!({"files": files_matched})))
    }
}

/// Collects grep output for every mode, enforcing the caps.
struct Collector {
    mode: OutputMode,
    gaps: Gaps,
    out: String,
    lines: usize,
    matches: usize,
    files_matched: usize,
    file: String,
    file_count: u64,
    last_line: Option<u64>,
    new_file: bool,
    full: bool,
}

/// Whether non-adjacent context groups are separated by `--` (ripgrep's habit with context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gaps {
    /// Groups follow each other (no context lines were asked for).
    Joined,
    /// A `--` line between groups that are not adjacent.
    Separated,
}

impl Collector {
    fn new(mode: OutputMode, gaps: Gaps) -> Self {
        Collector {
            mode,
            gaps,
            out: String::new(),
            lines: 0,
            matches: 0,
            files_matched: 0,
            file: String::new(),
            file_count: 0,
            last_line: None,
            new_file: false,
            full: false,
        }
    }

    fn start_file(&mut self, shown: String) {
        self.file = shown;
        self.file_count = 0;
        self.new_file = true;
    }

    fn end_file(&mut self) {
        if self.file_count == 0 {
            return;
        }
        self.files_matched += 1;
        match self.mode {
            OutputMode::FilesWithMatches => self.push_line(&self.file.clone()),
            OutputMode::Count => self.push_line(&format!("{}:{}", self.file, self.file_count)),
            OutputMode::Content => {}
        }
        if self.mode != OutputMode::Content && self.files_matched >= MAX_PATHS {
            self.full = true;
        }
    }

    fn push_line(&mut self, line: &str) {
        if self.out.len() + line.len() + 1 > MAX_CONTENT_BYTES || self.lines >= MAX_CONTENT_LINES {
            self.full = true;
            return;
        }
        self.out.push_str(line);
        self.out.push('\n');
        self.lines += 1;
    }

    /// One line of a file's matches, under the file's name (ripgrep's `--heading` layout: the
    /// path on a line of its own, a blank line between files).
    fn content_line(&mut self, number: Option<u64>, bytes: &[u8], sep: char) {
        let n = number.unwrap_or(0);
        if self.new_file {
            if !self.out.is_empty() {
                self.push_line("");
            }
            let file = std::mem::take(&mut self.file);
            self.push_line(&file);
            self.file = file;
        } else if self.gaps == Gaps::Separated && self.last_line.is_some_and(|l| n > l + 1) {
            self.push_line("--");
        }
        self.last_line = Some(n);
        self.new_file = false;
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = match text.char_indices().nth(MAX_MATCH_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        };
        self.push_line(&format!("{n}{sep}{text}"));
    }

    fn render(mut self, pattern: &str) -> String {
        if self.files_matched == 0 {
            return format!("No matches for '{pattern}'.");
        }
        if self.out.ends_with('\n') {
            self.out.pop();
        }
        if self.full {
            self.out
                .push_str("\n[output capped; narrow the pattern, path or include]");
        }
        self.out
    }
}

impl Sink for Collector {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.file_count += 1;
        match self.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                self.content_line(m.line_number(), m.bytes(), ':');
                self.matches += 1;
                if self.matches >= MAX_MATCHES {
                    self.full = true;
                }
                Ok(!self.full)
            }
        }
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.mode == OutputMode::Content {
            self.content_line(c.line_number(), c.bytes(), '-');
        }
        Ok(!self.full)
    }
}
