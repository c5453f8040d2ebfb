//! `str_replace_editor {command, path, …}`: the file editor of dsh's minimal preset
//! ([`crate::registry::Preset::Minimal`]), in the shape Anthropic's text-editor tool gave it.
//! `view`, `create` and `str_replace` are `read`, `write` and `edit` under another name (the
//! same sandbox, read-before-write rule and editor buffers); `insert` adds lines after a line
//! number. A directory's `view` lists it two levels deep.

use super::files::{EditTool, ReadTool, WriteTool, editor_text, store};
use super::{blocking, parse};
use crate::beneath::Reader;
use crate::error::ToolError;
use crate::tool::{ExecMode, Tool, ToolContext, ToolEffect, ToolOutput};
use crate::workspace::{Access, Placed};
use async_trait::async_trait;
use keel_protocol::ToolSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;

/// Entries a directory `view` lists at most.
const VIEW_ENTRIES: usize = 200;

/// `str_replace_editor`.
#[derive(Debug, Clone, Copy, Default)]
pub struct StrReplaceEditorTool;

#[derive(Deserialize)]
struct EditorArgs {
    command: String,
    path: String,
    file_text: Option<String>,
    insert_line: Option<i64>,
    new_str: Option<String>,
    old_str: Option<String>,
    view_range: Option<Vec<i64>>,
}

#[async_trait]
impl Tool for StrReplaceEditorTool {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "str_replace_editor".into(),
            description: "View, create and edit files. view: a file's numbered lines \
                          (view_range [start, end], end -1 = to the end) or a directory's \
                          entries; create: write file_text; str_replace: replace old_str, which \
                          must occur exactly once, with new_str; insert: add new_str after line \
                          insert_line (0 = at the top)."
                .into(),
            parameters: json!({"type":"object","properties":{
                "command":{"type":"string","enum":["view","create","str_replace","insert"]},
                "path":{"type":"string"},
                "file_text":{"type":"string"},
                "insert_line":{"type":"integer"},
                "new_str":{"type":"string"},
                "old_str":{"type":"string"},
                "view_range":{"type":"array","items":{"type":"integer"}}
            },"required":["command","path"]}),
        }
    }
    fn mode(&self) -> ExecMode {
        ExecMode::Exclusive
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::Writes
    }
    async fn execute(&self, args: Value, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
        let a: EditorArgs = parse(args)?;
        let need = |what: Option<String>, name: &str| {
            what.ok_or_else(|| ToolError::InvalidArgs(format!("'{}' needs '{name}'", a.command)))
        };
        match a.command.as_str() {
            "view" => view(&a.path, a.view_range.as_deref(), ctx).await,
            "create" => {
                let content = need(a.file_text.clone(), "file_text")?;
                WriteTool
                    .execute(json!({"file_path": a.path, "content": content}), ctx)
                    .await
            }
            "str_replace" => {
                let old = need(a.old_str.clone(), "old_str")?;
                let new = a.new_str.clone().unwrap_or_default();
                EditTool
                    .execute(
                        json!({"file_path": a.path, "old_string": old, "new_string": new}),
                        ctx,
                    )
                    .await
            }
            "insert" => {
                let line = a
                    .insert_line
                    .ok_or_else(|| ToolError::InvalidArgs("'insert' needs 'insert_line'".into()))?;
                let text = need(a.new_str.clone(), "new_str")?;
                insert(&a.path, line, text, ctx).await
            }
            other => Err(ToolError::InvalidArgs(format!(
                "unknown command '{other}'; expected view, create, str_replace or insert"
            ))),
        }
    }
}

async fn view(
    raw: &str,
    range: Option<&[i64]>,
    ctx: &ToolContext<'_>,
) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.resolve(raw, Access::Read)?;
    // Looked at and listed beneath the workspace directory that holds it: a directory linked
    // out of it is not followed.
    let reader = reader_of(&ctx.workspace.place(&path, Access::Read))?;
    if reader.metadata(&path).is_ok_and(|m| m.is_dir()) {
        let shown = ctx.workspace.display(&path);
        return blocking(move || list(&reader, &path, &shown))
            .await
            .map(ToolOutput::text);
    }
    let mut args = json!({"file_path": raw});
    match range {
        None | Some([]) => {}
        Some(&[start, end]) if start >= 1 && (end == -1 || end >= start) => {
            args["offset"] = json!(start);
            if end != -1 {
                args["limit"] = json!(end - start + 1);
            }
        }
        Some(other) => {
            return Err(ToolError::InvalidArgs(format!(
                "view_range {other:?} is not [start, end] with 1 <= start <= end (or end -1)"
            )));
        }
    }
    ReadTool.execute(args, ctx).await
}

/// How a placed path is looked at and listed: beneath its workspace directory, or as named
/// in `full-access` outside every one.
fn reader_of(placed: &Placed) -> Result<Reader, ToolError> {
    match placed {
        Placed::Beneath { base, .. } => {
            Reader::beneath(base).map_err(|e| ToolError::Failed(e.to_string()))
        }
        Placed::Anywhere(_) => Ok(Reader::User),
    }
}

/// A directory's entries two levels deep, hidden ones left out, directories marked with `/`;
/// listed through `reader`, so a subdirectory linked out of the workspace is named, not listed.
fn list(reader: &Reader, dir: &Path, shown: &str) -> Result<String, ToolError> {
    let mut entries = Vec::new();
    let mut more = false;
    let mut walk = vec![(dir.to_path_buf(), 0)];
    while let Some((at, depth)) = walk.pop() {
        let read = reader
            .list(&at)
            .map_err(|e| ToolError::Failed(format!("listing {}: {}", at.display(), e.reason())))?;
        let names: Vec<(String, bool)> = read
            .into_iter()
            .filter_map(|e| {
                let is_dir = reader.metadata(&at.join(&e)).is_ok_and(|m| m.is_dir());
                let name = e.to_string_lossy().into_owned();
                (!name.starts_with('.')).then_some((name, is_dir))
            })
            .collect();
        for (name, is_dir) in names.into_iter().rev() {
            let path = at.join(&name);
            if is_dir && depth == 0 {
                walk.push((path.clone(), 1));
            }
            if entries.len() == VIEW_ENTRIES {
                more = true;
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .unwrap_or(&path)
                .display()
                .to_string();
            entries.push(if is_dir { format!("{rel}/") } else { rel });
        }
    }
    entries.sort();
    let mut text = format!("{shown}/ (two levels, hidden entries left out):\n");
    text.push_str(&entries.join("\n"));
    if more {
        text.push_str(&format!(
            "\n[... more than {VIEW_ENTRIES} entries; use glob]"
        ));
    }
    Ok(text)
}

async fn insert(
    raw: &str,
    line: i64,
    new: String,
    ctx: &ToolContext<'_>,
) -> Result<ToolOutput, ToolError> {
    let path = ctx.workspace.resolve(raw, Access::Write)?;
    let shown = raw.to_owned();
    let open = editor_text(ctx, &path, &shown).await?;
    if open.is_none() {
        ctx.workspace.observed().check_change(&path, &shown)?;
    }
    let placed = ctx.workspace.place(&path, Access::Write);
    let name = shown.clone();
    let added = new.lines().count().max(1);
    let updated = blocking(move || {
        let text = match open {
            Some(text) => text,
            // Beneath the workspace directory it is written in: never through a link out.
            None => String::from_utf8(placed.read_bytes()?).map_err(|_| {
                ToolError::Failed(format!("'{name}' is not UTF-8 text; it was not changed"))
            })?,
        };
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let at = usize::try_from(line).ok().filter(|&n| n <= lines.len());
        let Some(at) = at else {
            return Err(ToolError::InvalidArgs(format!(
                "insert_line {line} is outside '{name}', which has {} lines (0 inserts at the top)",
                lines.len()
            )));
        };
        let mut out = String::with_capacity(text.len() + new.len() + 1);
        for l in &lines[..at] {
            out.push_str(l);
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&new);
        if !new.ends_with('\n') && at < lines.len() {
            out.push('\n');
        }
        for l in &lines[at..] {
            out.push_str(l);
        }
        Ok(out)
    })
    .await?;
    store(ctx, path.clone(), &shown, updated).await?;
    ctx.workspace.observed().record_now(&path);
    Ok(ToolOutput::text(format!(
        "Inserted {added} line{} into {shown} after line {line}.",
        if added == 1 { "" } else { "s" }
    )))
}
