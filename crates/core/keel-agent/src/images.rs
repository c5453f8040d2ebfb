//! Images on their way to the model: the session log references images
//! (`keel-attachment:<sha256>.<ext>`, or a file an MCP tool saved), the model is sent their
//! bytes as `data:` URLs.
//!
//! [`resolve_images`] runs on the request at the edge, just before the provider streams it, so
//! the `agent/llm-request` observers and the log see short references, never megabytes of
//! base64. Only a model with vision is sent image bytes; for others the request builder puts a
//! line of text where the image was ([`keel_llm::request`]). An image that cannot be read any
//! more (the attachment was deleted) is replaced by a text block saying so: the turn goes on.

use keel_llm::{ChatRequest, ModelInfo};
use keel_protocol::ContentBlock;
use keel_tools::Attachments;

/// Turns the image references of `request` into `data:` URLs read from `store` (a model
/// without vision is left alone: it is sent no image).
pub fn resolve_images(request: &mut ChatRequest, info: &ModelInfo, store: Option<&Attachments>) {
    if !info.vision {
        return;
    }
    for message in &mut request.messages {
        for block in &mut message.content {
            match block {
                ContentBlock::ToolResult(result) => {
                    for inner in &mut result.content {
                        resolve(inner, store);
                    }
                }
                other => resolve(other, store),
            }
        }
    }
}

fn resolve(block: &mut ContentBlock, store: Option<&Attachments>) {
    let ContentBlock::Image(image) = block else {
        return;
    };
    let url = match store {
        Some(store) => store.data_url(image),
        None => keel_tools::attachments::data_url_outside_store(image),
    };
    match url {
        Ok(Some(url)) => image.uri = url,
        Ok(None) => {}
        Err(e) => *block = ContentBlock::text(format!("[image not available: {e}]")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use keel_protocol::{ImageRef, Message, MessageSource, Role};
    use pretty_assertions::assert_eq;

    #[test]
    fn references_become_data_urls_for_a_seeing_model_only() {
        let home = tempfile::tempdir().unwrap();
        let store = Attachments::under_home(home.path());
        let stored = store.store(b"GIF89a-tiny", "a.gif").unwrap();
        let gone = ImageRef {
            uri: format!("keel-attachment:{}.png", "0".repeat(64)),
            media_type: None,
        };
        let request = ChatRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![
                    ContentBlock::Image(stored.clone()),
                    ContentBlock::Image(gone),
                ],
                source: MessageSource::user(),
                id: "m".into(),
            }],
            ..ChatRequest::default()
        };
        let blind = ModelInfo::UNKNOWN;
        let mut same = request.clone();
        resolve_images(&mut same, &blind, Some(&store));
        assert_eq!(same, request);

        let seeing = ModelInfo {
            vision: true,
            ..blind
        };
        let mut sent = request.clone();
        resolve_images(&mut sent, &seeing, Some(&store));
        let content = &sent.messages[0].content;
        assert_eq!(
            content[0],
            ContentBlock::Image(ImageRef {
                uri: "data:image/gif;base64,R0lGODlhLXRpbnk=".into(),
                media_type: Some("image/gif".into()),
            })
        );
        let ContentBlock::Text { text } = &content[1] else {
            panic!("{content:?}")
        };
        assert!(
            text.starts_with("[image not available: reading keel-attachment:000"),
            "{text}"
        );

        // Without a keel home an attachment cannot be read (never from the current directory).
        let mut homeless = request.clone();
        resolve_images(&mut homeless, &seeing, None);
        let ContentBlock::Text { text } = &homeless.messages[0].content[0] else {
            panic!("{homeless:?}")
        };
        assert!(
            text.contains("no keel home holds the attachments"),
            "{text}"
        );
    }
}
