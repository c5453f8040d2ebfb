//! What ACP requests carry, checked: the client's MCP servers, the working directory, the
//! prompt's content blocks (images stored as attachments).

use super::err;
use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    ContentBlock, EmbeddedResourceResource, ErrorCode, McpServer,
};
use base64::Engine as _;
use keel_protocol::ImageRef;
use keel_tools::Attachments;
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

/// Where the images of a prompt go: the session's model reads images and they are stored in
/// `$KEEL_HOME/attachments`, or it does not and they are refused naming it.
pub(super) enum Images<'a> {
    /// Store them here.
    Store(&'a Attachments),
    /// Refuse them: `model` has no vision.
    Refuse {
        /// The session's model.
        model: &'a str,
    },
}

/// A prompt as keel's model reads it: its text, and the images sent with it (stored).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Prompt {
    /// Text blocks, resource links as links, embedded text resources inline.
    pub text: String,
    /// Image blocks, stored as attachments.
    pub images: Vec<ImageRef>,
}

/// The prompt's content blocks as keel's model reads them: text blocks, resource links as
/// links, embedded text resources inline, image blocks (base64 PNG, JPEG, GIF or WebP) stored
/// as attachments when the session's model reads images. Audio and binary resources are
/// refused (keel advertises neither), and so are images for a model without vision.
pub(super) fn prompt_content(blocks: &[ContentBlock], images: Images<'_>) -> Result<Prompt, Error> {
    let mut prompt = Prompt::default();
    let mut push = |s: &str| {
        if !prompt.text.is_empty() {
            prompt.text.push_str("\n\n");
        }
        prompt.text.push_str(s);
    };
    let mut stored = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
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
            ContentBlock::Image(image) => {
                let shown = image
                    .uri
                    .clone()
                    .unwrap_or_else(|| format!("the image of content block {i}"));
                let store = match images {
                    Images::Store(store) => store,
                    Images::Refuse { model } => {
                        return Err(err(
                            ErrorCode::InvalidParams,
                            format!(
                                "model {model} does not read images, so it cannot be sent \
                                 {shown}: pick a model with vision, or declare that {model} has \
                                 it with vision = true in the [models.\"{model}\"] table of \
                                 keel's configuration"
                            ),
                        ));
                    }
                };
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(image.data.trim())
                    .map_err(|e| {
                        err(
                            ErrorCode::InvalidParams,
                            format!("{shown}: its data is not base64: {e}"),
                        )
                    })?;
                let image = store
                    .store(&bytes, &shown)
                    .map_err(|e| err(ErrorCode::InvalidParams, e.to_string()))?;
                stored.push(image);
            }
            ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("a content block of an unknown type")),
        }
    }
    prompt.images = stored;
    if prompt.text.trim().is_empty() && prompt.images.is_empty() {
        return Err(err(
            ErrorCode::InvalidParams,
            "the prompt has no text: send at least one text content block",
        ));
    }
    Ok(prompt)
}

fn unsupported(what: &str) -> Error {
    err(
        ErrorCode::InvalidParams,
        format!(
            "keel takes text and images only and this prompt has {what}; send text, images, \
             resource links or embedded text resources (see the promptCapabilities of initialize)"
        ),
    )
}

/// What a line read before the connection is initialized is ([`check_initialize`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Initialize {
    /// Not an `initialize` request (or not JSON): the SDK answers it.
    Other,
    /// An `initialize` whose `protocolVersion` is a version number.
    Valid,
    /// An `initialize` whose `protocolVersion` is missing or not a number: the JSON-RPC error
    /// line that answers it, naming what was sent.
    Refused(String),
}

/// Check an `initialize` request's `protocolVersion` (ACP versions are integers: `1`).
pub(super) fn check_initialize(line: &str) -> Initialize {
    let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
        return Initialize::Other;
    };
    if message.get("method").and_then(serde_json::Value::as_str) != Some("initialize") {
        return Initialize::Other;
    }
    let Some(id) = message.get("id").cloned() else {
        return Initialize::Other;
    };
    let sent = message.get("params").and_then(|p| p.get("protocolVersion"));
    if sent
        .and_then(serde_json::Value::as_u64)
        .is_some_and(|v| v <= u64::from(u16::MAX))
    {
        return Initialize::Valid;
    }
    let sent = sent.map_or_else(|| "nothing".to_owned(), ToString::to_string);
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32602,
            "message": format!(
                "initialize: protocolVersion must be an ACP protocol version, an integer \
                 (keel speaks 1); the client sent {sent}"
            ),
        },
    });
    Initialize::Refused(answer.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    const REFUSE: Images<'static> = Images::Refuse {
        model: "deepseek-chat",
    };

    #[test]
    fn prompts_take_text_links_and_embedded_text() {
        let prompt = prompt_content(
            &blocks(serde_json::json!([
                {"type": "text", "text": "look at"},
                {"type": "resource_link", "name": "a.rs", "uri": "file:///w/a.rs"},
                {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}"}}
            ])),
            REFUSE,
        )
        .unwrap();
        assert_eq!(
            prompt.text,
            "look at\n\n[a.rs](file:///w/a.rs)\n\n<context uri=\"file:///w/b.rs\">\nfn b() {}\n</context>"
        );
        assert_eq!(prompt.images, Vec::new());
    }

    #[test]
    fn images_are_stored_for_a_model_with_vision() {
        let home = tempfile::tempdir().unwrap();
        let store = Attachments::under_home(home.path());
        // "GIF89a!" in base64.
        let v = serde_json::json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image", "mimeType": "image/gif", "data": "R0lGODlhIQ=="}
        ]);
        let prompt = prompt_content(&blocks(v), Images::Store(&store)).unwrap();
        assert_eq!(prompt.text, "what is this?");
        assert_eq!(prompt.images.len(), 1);
        assert!(
            prompt.images[0].uri.starts_with("keel-attachment:")
                && prompt.images[0].uri.ends_with(".gif"),
            "{:?}",
            prompt.images
        );
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);

        // Bytes that are not an image, and data that is not base64, are refused.
        for (data, needle) in [("aGVsbG8=", "is not an image"), ("%%", "is not base64")] {
            let v = serde_json::json!([
                {"type": "image", "mimeType": "image/png", "data": data, "uri": "file:///w/x.png"}
            ]);
            let e = prompt_content(&blocks(v), Images::Store(&store)).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(
                e.message.contains("file:///w/x.png") && e.message.contains(needle),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn images_for_a_text_model_audio_and_empty_prompts_are_refused() {
        for (v, needle) in [
            (
                serde_json::json!([{"type": "image", "mimeType": "image/png", "data": "AA=="}]),
                "model deepseek-chat does not read images",
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
            let e = prompt_content(&blocks(v), REFUSE).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(e.message.contains(needle), "{}", e.message);
        }
    }

    #[test]
    fn an_initialize_with_a_version_of_the_wrong_type_is_refused_naming_it() {
        let line = |v: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"initialize","params":{{"protocolVersion":{v},"clientCapabilities":{{}}}}}}"#
            )
        };
        assert_eq!(check_initialize(&line("1")), Initialize::Valid);
        let Initialize::Refused(answer) = check_initialize(&line("\"2025-11-25\"")) else {
            panic!("accepted")
        };
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -32602);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("protocolVersion") && message.contains("\"2025-11-25\""),
            "{message}"
        );
        assert!(matches!(
            check_initialize(&line("70000")),
            Initialize::Refused(_)
        ));
        assert_eq!(
            check_initialize(r#"{"jsonrpc":"2.0","id":1,"method":"session/new"}"#),
            Initialize::Other
        );
        assert_eq!(check_initialize("{not json"), Initialize::Other);
    }
}
