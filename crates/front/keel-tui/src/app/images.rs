//! `@path/to/image.png` in the composer: the image is sent with the message.
//!
//! A word of the message that starts with `@` and names a file with an image extension (`.png`,
//! `.jpg`, `.jpeg`, `.gif`, `.webp`), relative to the working directory or absolute, attaches
//! that image: the text is sent as typed (so the model sees the file's name) and the image
//! follows it as an image block, stored under `$KEEL_HOME/attachments`. The message is not sent
//! when the model has no vision or the file is not an image (the error names them).

use keel_agent::Agent;
use keel_protocol::{ContentBlock, Message};
use keel_tools::ImageError;
use keel_tools::attachments::read_image_file;
use std::path::Path;

const IMAGE_EXTENSIONS: [&str; 5] = ["png", "jpg", "jpeg", "gif", "webp"];

/// The `@` words of `text` that name image files, in order, each once.
pub(super) fn image_mentions(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = word.strip_prefix('@') else {
            continue;
        };
        let path = path.trim_end_matches([',', '.', ';', ':', ')', '!', '?']);
        let is_image = Path::new(path)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if is_image && !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// Why a message with images cannot be sent (it names the model or the image).
#[derive(Debug, thiserror::Error)]
pub(super) enum ImagesError {
    /// The model reads no images.
    #[error(
        "model {model} does not read images, so it cannot be sent @{first}: pick a model \
         with vision, or declare that {model} has it with vision = true in the \
         [models.\"{model}\"] table of the configuration"
    )]
    NoVision {
        /// The session's model.
        model: String,
        /// The first image mentioned.
        first: String,
    },
    /// No keel home to store the images in.
    #[error("no keel home to store the images in")]
    NoHome,
    /// An image could not be read or stored.
    #[error(transparent)]
    Image(#[from] ImageError),
}

/// The message to send for `text`: `None` when it mentions no image (send it as text), else
/// the text with the images, or why it cannot be sent.
pub(super) fn with_images(agent: &Agent, text: &str) -> Option<Result<Message, ImagesError>> {
    let mentions = image_mentions(text);
    let first = *mentions.first()?;
    Some(build(agent, text, first, &mentions))
}

fn build(
    agent: &Agent,
    text: &str,
    first: &str,
    mentions: &[&str],
) -> Result<Message, ImagesError> {
    let config = agent.config();
    if !config.model_info.vision {
        return Err(ImagesError::NoVision {
            model: config.model.clone(),
            first: first.to_owned(),
        });
    }
    let store = agent.attachments().ok_or(ImagesError::NoHome)?;
    let mut message = keel_agent::user_message(text);
    for mention in mentions {
        let path = config.cwd.join(mention);
        let shown = format!("@{mention}");
        let stored =
            read_image_file(&path, &shown).and_then(|(bytes, _)| store.store(&bytes, &shown))?;
        message.content.push(ContentBlock::Image(stored));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_mentions_are_at_words_with_image_extensions() {
        assert_eq!(
            image_mentions("look at @shots/a.png, and @b.JPG or @c.txt and a@d.png @shots/a.png"),
            vec!["shots/a.png", "b.JPG"]
        );
        assert_eq!(image_mentions("no images @here"), Vec::<&str>::new());
    }
}
