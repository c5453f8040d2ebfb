//! What ACP requests carry, checked: the client's MCP servers, the working directory, the
//! prompt's content blocks.

use super::err;
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, ErrorCode, McpServer,
};
use std::path::{Path, PathBuf};

/// The MCP servers of `session/new` or `session/load` in keel's `[mcp_servers.NAME]` shape.
/// SSE servers are refused (keel speaks stdio and streamable HTTP; `initialize` says so).
pub(super) fn mcp_servers(
    servers: &[McpServer],
) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
    let mut out = serde_json::Map::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(s) => {
                let env: serde_json::Map<String, serde_json::Value> = s
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone().into()))
                    .collect();
                (
                    &s.name,
                    serde_json::json!({
                        "command": s.command.to_string_lossy(),
                        "args": s.args,
                        "env": env,
                    }),
                )
            }
            McpServer::Http(s) => {
                let headers: serde_json::Map<String, serde_json::Value> = s
                    .headers
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone().into()))
                    .collect();
                (
                    &s.name,
                    serde_json::json!({"url": s.url, "headers": headers}),
                )
            }
            McpServer::Sse(s) => {
                return Err(err(
                    ErrorCode::InvalidParams,
                    format!(
                        "MCP server {:?} uses SSE, which keel does not speak: give it as a stdio \
                         or streamable HTTP server (mcpCapabilities in initialize)",
                        s.name
                    ),
                ));
            }
            _ => {
                return Err(err(
                    ErrorCode::InvalidParams,
                    "an MCP server of a transport keel does not know: keel speaks stdio and \
                     streamable HTTP",
                ));
            }
        };
        if name.is_empty() {
            return Err(err(ErrorCode::InvalidParams, "an MCP server has no name"));
        }
        out.insert(name.clone(), entry);
    }
    Ok(out)
}

/// The request's `cwd`: an existing directory, absolute as ACP requires.
pub(super) fn working_dir(cwd: &Path) -> Result<PathBuf, Error> {
    if !cwd.is_absolute() {
        return Err(err(
            ErrorCode::InvalidParams,
            format!("cwd {} is not an absolute path", cwd.display()),
        ));
    }
    let dir = cwd.canonicalize().map_err(|e| {
        err(
            ErrorCode::InvalidParams,
            format!("cwd {}: {e}", cwd.display()),
        )
    })?;
    if !dir.is_dir() {
        return Err(err(
            ErrorCode::InvalidParams,
            format!("cwd {} is not a directory", dir.display()),
        ));
    }
    Ok(dir)
}

/// The prompt as the text keel's model reads: text blocks, resource links as links, embedded
/// text resources inline. Images, audio and binary resources are refused (keel advertises
/// none of them).
pub(super) fn prompt_text(blocks: &[ContentBlock]) -> Result<String, Error> {
    let mut text = String::new();
    let mut push = |s: &str| {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(s);
    };
    for block in blocks {
        match block {
            ContentBlock::Text(t) => push(&t.text),
            ContentBlock::ResourceLink(l) => push(&format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    push(&format!(
                        "<context uri=\"{}\">\n{}\n</context>",
                        t.uri, t.text
                    ));
                }
                _ => {
                    return Err(unsupported("a binary embedded resource"));
                }
            },
            ContentBlock::Image(_) => return Err(unsupported("an image")),
            ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("a content block of an unknown type")),
        }
    }
    if text.trim().is_empty() {
        return Err(err(
            ErrorCode::InvalidParams,
            "the prompt has no text: send at least one text content block",
        ));
    }
    Ok(text)
}

fn unsupported(what: &str) -> Error {
    err(
        ErrorCode::InvalidParams,
        format!(
            "keel takes text prompts only and this one has {what}; send text, resource links or \
             embedded text resources (see the promptCapabilities of initialize)"
        ),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn prompts_take_text_links_and_embedded_text() {
        let text = prompt_text(&blocks(serde_json::json!([
            {"type": "text", "text": "look at"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///w/a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
        ])))
        .unwrap();
        assert_eq!(
            text,
            "look at\n\n[a.rs](file:///w/a.rs)\n\n<context uri=\"file:///w/b.rs\">\nfn b() {}\n</context>"
        );
    }

    #[test]
    fn images_audio_and_empty_prompts_are_refused() {
        for (v, needle) in [
            (
                serde_json::json!([{"type": "image", "mimeType": "image/png", "data": "AA=="}]),
                "an image",
            ),
            (
                serde_json::json!([{"type": "audio", "mimeType": "audio/wav", "data": "AA=="}]),
                "audio",
            ),
            (
                serde_json::json!([{"type": "text", "text": "  "}]),
                "no text",
            ),
        ] {
            let e = prompt_text(&blocks(v)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }
}
