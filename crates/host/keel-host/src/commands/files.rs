//! Custom command files: walking a commands directory (namespaces from subdirectories, hidden
//! entries skipped, depth and size bounded), reading a file as text, and its front matter
//! (`description:`, `argument-hint:`) and fallback description.

use super::{FALLBACK_DESCRIPTION_CHARS, MAX_COMMAND_FILE_BYTES, MAX_DEPTH, Problem, ProblemKind};
use keel_tools::beneath::{BeneathError, Reader};
use std::path::{Path, PathBuf};

pub(super) struct FoundFile {
    pub(super) name: String,
    pub(super) path: PathBuf,
    pub(super) text: Result<String, ProblemKind>,
}

/// Why a file or directory was not used: the reason of a [`BeneathError`] (a link out of the
/// workspace, not a regular file, an I/O error …).
fn unusable(e: &BeneathError) -> ProblemKind {
    match e {
        BeneathError::TooLarge { cap, .. } => ProblemKind::TooLarge { limit: *cap },
        e => ProblemKind::Unreadable { reason: e.reason() },
    }
}

/// The `.md` files under `dir`, entries in name order (a subdirectory read where its name
/// falls, at most [`MAX_DEPTH`] levels down), their names prefixed with `namespace`. The
/// project's directories are listed and read through `reader` beneath the workspace: a file
/// or directory linked out of it is a problem, never read.
pub(super) fn scan_dir(
    reader: &Reader,
    dir: &Path,
    namespace: &[String],
    depth: usize,
    found: &mut Vec<FoundFile>,
    problems: &mut Vec<Problem>,
) {
    // A directory that cannot be read (or listed to the end) is a problem without a name.
    let entries = match reader.list(dir) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(Problem {
                name: None,
                path: dir.to_path_buf(),
                kind: unusable(&e),
            });
            return;
        }
    };
    let mut names: Vec<(String, PathBuf)> = Vec::new();
    for raw in entries {
        let path = dir.join(&raw);
        match raw.into_string() {
            Ok(file_name) => names.push((file_name, path)),
            Err(raw) => {
                // A name that is not UTF-8 can't be typed; only worth a word if it is meant
                // to be a command.
                if Path::new(&raw)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("md"))
                {
                    problems.push(Problem {
                        name: None,
                        path,
                        kind: ProblemKind::InvalidName,
                    });
                }
            }
        }
    }
    names.sort();
    for (file_name, path) in names {
        if file_name.starts_with('.') {
            continue;
        }
        let is_md = Path::new(&file_name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("md"));
        // Follows symlinks (the project's only within the workspace): a linked command file
        // or directory is used like a real one.
        let meta = match reader.metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                if is_md {
                    found.push(FoundFile {
                        name: command_name(namespace, &file_name),
                        path,
                        text: Err(unusable(&e)),
                    });
                } else if !e.is_not_found() {
                    // A directory linked out of the workspace, say.
                    problems.push(Problem {
                        name: None,
                        path,
                        kind: unusable(&e),
                    });
                }
                continue;
            }
        };
        if meta.is_dir() {
            if depth < MAX_DEPTH {
                let mut inner = namespace.to_vec();
                inner.push(file_name);
                scan_dir(reader, &path, &inner, depth + 1, found, problems);
            }
        } else if is_md {
            // Not a regular file (a FIFO, a device): a problem from the read, never a read.
            found.push(FoundFile {
                name: command_name(namespace, &file_name),
                text: read_text(reader, &path),
                path,
            });
        }
    }
}

/// `namespace:…:stem` for the file `file_name` (`.md` dropped).
fn command_name(namespace: &[String], file_name: &str) -> String {
    let stem = Path::new(file_name)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(file_name);
    let mut name = namespace.join(":");
    if !name.is_empty() {
        name.push(':');
    }
    name.push_str(stem);
    name
}

/// The file's text: a regular file of at most [`MAX_COMMAND_FILE_BYTES`] (1 MiB), without a
/// byte-order mark and with CRLF line ends as LF.
fn read_text(reader: &Reader, path: &Path) -> Result<String, ProblemKind> {
    let bytes = reader
        .read_regular(path, MAX_COMMAND_FILE_BYTES)
        .map_err(|e| unusable(&e))?;
    let text = String::from_utf8(bytes).map_err(|_| ProblemKind::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    Ok(text.replace("\r\n", "\n"))
}

pub(super) struct CommandFile {
    pub(super) description: String,
    pub(super) argument_hint: Option<String>,
    pub(super) body: String,
}

/// Front matter and body of a command file's text (LF line ends).
pub(super) fn parse_command_file(text: &str) -> CommandFile {
    let (front, body) = split_front_matter(text);
    let mut description = None;
    let mut argument_hint = None;
    for line in front.lines() {
        // Indented lines continue a YAML value (a list, a block); not ours.
        if line.starts_with(char::is_whitespace) || line.trim_start().starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = unquote(value.trim());
        if value.is_empty() {
            continue;
        }
        match key.trim() {
            "description" => description = Some(value),
            "argument-hint" => argument_hint = Some(value),
            _ => {}
        }
    }

    // Leading blank lines and trailing whitespace are not part of the prompt; indentation
    // of the first line is.
    let mut body = body;
    while let Some((first, rest)) = body.split_once('\n') {
        if !first.trim().is_empty() {
            break;
        }
        body = rest;
    }
    let body = body.trim_end().to_owned();
    let description = description.unwrap_or_else(|| fallback_description(&body));
    CommandFile {
        description,
        argument_hint,
        body,
    }
}

/// (front matter, body). Front matter needs a first line `---` and a closing `---` line;
/// without the closing one the whole text is the body.
fn split_front_matter(text: &str) -> (&str, &str) {
    let Some((first, after_open)) = text.split_once('\n') else {
        return ("", text);
    };
    if first.trim_end() != "---" {
        return ("", text);
    }
    let mut offset = 0;
    for line in after_open.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (&after_open[..offset], &after_open[offset + line.len()..]);
        }
        offset += line.len();
    }
    ("", text)
}

/// A front-matter value without its quotes: `"…"` (with `\"`, `\\`, `\n`, `\t` escapes) or
/// `'…'` (with `''` for `'`). Anything else as is.
fn unquote(value: &str) -> String {
    if value.len() >= 2 && value.starts_with('"') && value.ends_with('"') {
        let inner = &value[1..value.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        }
        return out;
    }
    if value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'') {
        return value[1..value.len() - 1].replace("''", "'");
    }
    value.to_owned()
}

/// The first non-empty line of `body`, without Markdown heading marks, at most
/// [`FALLBACK_DESCRIPTION_CHARS`] characters (a cut one ends in `…`). Empty for an empty body.
fn fallback_description(body: &str) -> String {
    let Some(line) = body.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return String::new();
    };
    let line = line.trim_start_matches('#').trim_start();
    if line.chars().count() <= FALLBACK_DESCRIPTION_CHARS {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(FALLBACK_DESCRIPTION_CHARS - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}
