//! `glob` and `grep`, built on ripgrep's crates: the `ignore` walker (gitignore-aware, hidden
//! files included, `.git` skipped, sorted by path for stable output), `globset` and
//! `grep-searcher` (binary files skipped). Output is bounded.

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

/// Paths listed at most by `glob` and by `grep` in files/count mode.
pub const MAX_PATHS: usize = 200;
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

#[async_trait]
impl Tool for GlobTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "glob".into(),
            description: "Find files by glob, e.g. `**/*.rs` or `src/*/mod.ts`; a pattern \
                          without `/` matches file names at any depth. Skips gitignored files. \
                          Returns up to 200 paths in path order."
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
        let (text, total) = blocking(move || {
            let mut shown = Vec::new();
            let mut total = 0usize;
            for path in files(&base).filter(|p| glob.matches(&base, p)) {
                total += 1;
                if shown.len() < MAX_PATHS {
                    shown.push(ws.display(&path));
                }
            }
            let mut text = shown.join("\n");
            if total == 0 {
                text = format!(
                    "No files match '{}' under {}.",
                    a.pattern,
                    ws.display(&base)
                );
            } else if total > shown.len() {
                let _ = write!(
                    text,
                    "\n[{} of {total} matches shown; narrow the pattern or path]",
                    shown.len()
                );
            }
            Ok((text, total))
        })
        .await?;
        Ok(ToolOutput::text(text).with_value(json!({"matches": total})))
    }
}

/// `grep {pattern, path?, glob?, case_insensitive?, output_mode?, context?}`.
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
    glob: Option<String>,
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
                          and binary files. Output is capped."
                .into(),
            parameters: json!({"type":"object","properties":{
                "pattern":{"type":"string"},
                "path":{"type":"string","description":"File or directory (default: working directory)."},
                "glob":{"type":"string","description":"Only files matching this glob, e.g. `*.rs`."},
                "case_insensitive":{"type":"boolean"},
                "output_mode":{"type":"string","enum":["files_with_matches","content","count"],
                    "description":"files_with_matches (default): paths; content: `path:line:text`; count: matches per file."},
                "context":{"type":"integer","minimum":0,"maximum":10,"description":"Lines around each match (content mode)."}
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
        let a: GrepArgs = parse(args)?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(a.case_insensitive)
            .line_terminator(Some(b'\n'))
            .build(&a.pattern)
            .map_err(|e| ToolError::InvalidArgs(format!("invalid regex: {e}")))?;
        let filter = a.glob.as_deref().map(PathGlob::new).transpose()?;
        let base = resolve_base(ctx.workspace, a.path.as_deref())?;
        let mode = a.output_mode.unwrap_or(OutputMode::FilesWithMatches);
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

    fn content_line(&mut self, number: Option<u64>, bytes: &[u8], sep: char) {
        let n = number.unwrap_or(0);
        let gap = self.new_file || self.last_line.is_some_and(|l| n > l + 1);
        if self.gaps == Gaps::Separated && gap && !self.out.is_empty() {
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
        self.push_line(&format!("{}{sep}{n}{sep}{text}", self.file));
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
                .push_str("\n[output capped; narrow the pattern, path or glob]");
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
