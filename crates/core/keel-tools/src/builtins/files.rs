//! `read`, `write` and `edit`: text file access confined by the workspace's sandbox mode.
//!
//! `read` streams a file line by line (1-based `N: text`, framed as dsh frames it: `<path>`,
//! `<content>` and a `(Showing lines a-b of N. Use offset=…)` hint when cut), refusing binary
//! files (a NUL byte in the first 8 KiB). `write` replaces a whole file. `edit` replaces an exact string that must
//! occur once unless `replace_all` is set.

use super::{blocking, parse};
use crate::error::ToolError;
use crate::escalation::with_escalation;
use crate::observed::Stamp;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::{Access, Placed};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Lines returned by `read` when no limit is given.
pub const DEFAULT_READ_LIMIT: u64 = 2000;
/// Characters kept of one line by `read`.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes inspected for a NUL byte to detect binary files.
const BINARY_SNIFF: usize = 8192;

fn schema(name: &str, description: &str, parameters: Value) -> ToolSchema {
    ToolSchema {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

/// `read {file_path, offset?, limit?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

/// The file tools' earlier parameter name (`path`, before they took dsh's `file_path`).
pub(crate) const FILE_PATH_ALIAS: &[(&str, &str)] = &[("path", "file_path")];

#[derive(Deserialize)]
struct ReadArgs {
    file_path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[async_trait]
impl Tool for ReadTool {
    fn schema(&self) -> ToolSchema {
        schema(
            "read",
            "Read a text file. Lines come as `N: text` (N, the 1-based line number, is not part \
             of the file); over 2000 chars they are cut; binary files are refused.",
            json!({"type":"object","properties":{
                "file_path":{"type":"string","description":"Relative to the working directory, or absolute."},
                "offset":{"type":"integer","minimum":1,"description":"First line (default 1)."},
                "limit":{"type":"integer","minimum":1,"description":"Max lines (default 2000)."}
            },"required":["file_path"]}),
        )
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        FILE_PATH_ALIAS
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Parallel
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: ReadArgs = parse(args)?;
        let path = ctx.workspace.resolve(&a.file_path, Access::Read)?;
        let shown = ctx.workspace.display(&path);
        let offset = a.offset.unwrap_or(1).max(1);
        let limit = a.limit.unwrap_or(DEFAULT_READ_LIMIT).max(1);
        if let Some(text) = editor_text(ctx, &path, &shown).await? {
            let size = text.len() as u64;
            let reader = std::io::Cursor::new(text.into_bytes());
            return Ok(ToolOutput::text(number_lines(
                reader, &path, &shown, size, offset, limit,
            )?));
        }
        let observed = ctx.workspace.observed().clone();
        let placed = ctx.workspace.place(&path, Access::Read);
        let text = blocking(move || {
            let (text, stamp) = read_lines(&placed, &path, &shown, offset, limit)?;
            observed.record(&path, stamp);
            Ok(text)
        })
        .await?;
        Ok(ToolOutput::text(text))
    }
}

/// The text of `path` as the editor has it, when the workspace reads through one and `path`
/// is not a directory (`None`: read the disk).
pub(super) async fn editor_text(
    ctx: &ToolContext<'_>,
    path: &Path,
    shown: &str,
) -> Result<Option<String>, ToolError> {
    let Some(files) = ctx.workspace.text_files() else {
        return Ok(None);
    };
    if path.is_dir() {
        return Ok(None);
    }
    files
        .read(path)
        .await
        .map_err(|e| ToolError::Failed(format!("reading '{shown}' through the editor: {e}")))
}

/// Write `text` to `path`: through the editor when the workspace has one that takes it, else
/// to the disk.
pub(super) async fn store(
    ctx: &ToolContext<'_>,
    path: PathBuf,
    shown: &str,
    text: String,
) -> Result<(), ToolError> {
    if let Some(files) = ctx.workspace.text_files() {
        let taken = files
            .write(&path, &text)
            .await
            .map_err(|e| ToolError::Failed(format!("writing '{shown}' through the editor: {e}")))?;
        if taken {
            return Ok(());
        }
    }
    // Beneath the workspace directory that holds it, created and renamed within its parent's
    // descriptor: a link swapped in after the path was checked is replaced, never followed.
    let placed = ctx.workspace.place(&path, Access::Write);
    blocking(move || placed.write(text.as_bytes())).await
}

/// The numbered lines of `path`, and its stamp as it was read.
fn read_lines(
    placed: &Placed,
    path: &Path,
    shown: &str,
    offset: u64,
    limit: u64,
) -> Result<(String, Stamp), ToolError> {
    let file = placed.open_read()?;
    let md = file
        .metadata()
        .map_err(|e| ToolError::io("reading", path, e))?;
    if md.is_dir() {
        return Err(ToolError::Failed(format!(
            "'{shown}' is a directory; use glob to list its files"
        )));
    }
    let reader = BufReader::with_capacity(64 * 1024, file);
    let text = number_lines(reader, path, shown, md.len(), offset, limit)?;
    Ok((text, Stamp::of(&md)))
}

/// `N: text` lines `offset..offset+limit` of `reader` (the text of `path`, `size` bytes).
fn number_lines(
    mut reader: impl BufRead,
    path: &Path,
    shown: &str,
    size: u64,
    offset: u64,
    limit: u64,
) -> Result<String, ToolError> {
    let head = reader
        .fill_buf()
        .map_err(|e| ToolError::io("reading", path, e))?;
    if head[..head.len().min(BINARY_SNIFF)].contains(&0) {
        return Err(ToolError::Failed(format!(
            "'{shown}' is a binary file ({size} bytes); read only shows text files"
        )));
    }
    let mut out = String::new();
    let mut line = Vec::new();
    let mut n: u64 = 0;
    let last = offset.saturating_add(limit - 1);
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| ToolError::io("reading", path, e))?;
        if read == 0 {
            break;
        }
        n += 1;
        if n < offset || n > last {
            continue;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        let text = String::from_utf8_lossy(&line);
        let _ = write!(out, "{n}: ");
        match text.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                let more = text[cut..].chars().count();
                let _ = writeln!(out, "{}… [line cut: {more} more chars]", &text[..cut]);
            }
            None => {
                out.push_str(&text);
                out.push('\n');
            }
        }
    }
    if n == 0 {
        return Ok(format!(
            "<path>{shown}</path>\n<content>\n</content>\n(The file is empty.)"
        ));
    }
    if offset > n {
        return Err(ToolError::InvalidArgs(format!(
            "offset {offset} is past the end of '{shown}', which has {n} lines"
        )));
    }
    let mut framed = String::with_capacity(out.len() + shown.len() + 64);
    let _ = write!(framed, "<path>{shown}</path>\n<content>\n{out}</content>");
    if last < n {
        let _ = write!(
            framed,
            "\n(Showing lines {offset}-{last} of {n}. Use offset={} to continue.)",
            last + 1
        );
    }
    Ok(framed)
}

/// `write {file_path, content}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Deserialize)]
struct WriteArgs {
    file_path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteTool {
    fn schema(&self) -> ToolSchema {
        schema(
            "write",
            "Create or overwrite a file with `content`; missing parent directories are created. \
             To change part of an existing file, use edit.",
            with_escalation(
                json!({"type":"object","properties":{
                "file_path":{"type":"string","description":"Relative to the working directory, or absolute."},
                "content":{"type":"string","description":"The complete new file content."}
            },"required":["file_path","content"]}),
                false,
            ),
        )
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        FILE_PATH_ALIAS
    }
    fn escalates(&self) -> bool {
        true
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Writes
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: WriteArgs = parse(args)?;
        let path = ctx.workspace.resolve(&a.file_path, Access::Write)?;
        let shown = ctx.workspace.display(&path);
        if ctx.workspace.text_files().is_none() {
            ctx.workspace.observed().check_change(&path, &a.file_path)?;
        }
        let bytes = a.content.len();
        let target = path.clone();
        let placed = ctx.workspace.place(&path, Access::Write);
        let created = blocking(move || {
            if path.is_dir() {
                return Err(ToolError::Failed(format!("'{shown}' is a directory")));
            }
            let created = std::fs::symlink_metadata(&path).is_err();
            placed.create_parent()?;
            Ok(created)
        })
        .await?;
        let shown = a.file_path;
        store(ctx, target.clone(), &shown, a.content).await?;
        ctx.workspace.observed().record_now(&target);
        let verb = if created { "Created" } else { "Overwrote" };
        Ok(ToolOutput::text(format!("{verb} {shown} ({bytes} bytes)."))
            .with_value(json!({"bytes": bytes, "created": created})))
    }
}

/// `edit {file_path, old_string, new_string, replace_all?}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Deserialize)]
struct EditArgs {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

#[async_trait]
impl Tool for EditTool {
    fn schema(&self) -> ToolSchema {
        schema(
            "edit",
            "Replace exact text in a file. old_string must match (indentation included, no \
             line-number prefixes) and occur once unless replace_all is true.",
            with_escalation(
                json!({"type":"object","properties":{
                "file_path":{"type":"string"},
                "old_string":{"type":"string"},
                "new_string":{"type":"string"},
                "replace_all":{"type":"boolean"}
            },"required":["file_path","old_string","new_string"]}),
                false,
            ),
        )
    }
    fn aliases(&self) -> &'static [(&'static str, &'static str)] {
        FILE_PATH_ALIAS
    }
    fn escalates(&self) -> bool {
        true
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Writes
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: EditArgs = parse(args)?;
        if a.old_string.is_empty() {
            return Err(ToolError::InvalidArgs(
                "old_string is empty; to create a file use write".into(),
            ));
        }
        if a.old_string == a.new_string {
            return Err(ToolError::InvalidArgs(
                "old_string and new_string are identical; nothing would change".into(),
            ));
        }
        let path = ctx.workspace.resolve(&a.file_path, Access::Write)?;
        let shown = a.file_path.clone();
        let open = editor_text(ctx, &path, &shown).await?;
        if open.is_none() {
            ctx.workspace.observed().check_change(&path, &shown)?;
        }
        let target = path.clone();
        let placed = ctx.workspace.place(&path, Access::Read);
        let (count, updated) = blocking(move || {
            let text = match open {
                Some(text) => text,
                None => {
                    let bytes = placed.read_bytes()?;
                    String::from_utf8(bytes).map_err(|_| {
                        ToolError::Failed(format!(
                            "'{}' is not UTF-8 text; edit changes text files",
                            a.file_path
                        ))
                    })?
                }
            };
            let count = text.matches(a.old_string.as_str()).count();
            if count == 0 {
                return Err(ToolError::InvalidArgs(format!(
                    "old_string was not found in '{}'; it must match exactly, including \
                     whitespace. Read the file and copy the text.",
                    a.file_path
                )));
            }
            if count > 1 && !a.replace_all {
                return Err(ToolError::InvalidArgs(format!(
                    "old_string occurs {count} times in '{}'; include more surrounding lines to \
                     make it unique, or set replace_all to true",
                    a.file_path
                )));
            }
            let updated = if a.replace_all {
                text.replace(&a.old_string, &a.new_string)
            } else {
                text.replacen(&a.old_string, &a.new_string, 1)
            };
            Ok((count, updated))
        })
        .await?;
        store(ctx, target.clone(), &shown, updated).await?;
        ctx.workspace.observed().record_now(&target);
        let s = if count == 1 { "" } else { "s" };
        Ok(
            ToolOutput::text(format!("Edited {shown}: replaced {count} occurrence{s}."))
                .with_value(json!({"replacements": count})),
        )
    }
}
