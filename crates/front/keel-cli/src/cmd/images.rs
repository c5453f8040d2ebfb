//! `keel run --image FILE`: images sent with the prompt.
//!
//! Every file is read and checked before anything else happens (PNG, JPEG, GIF or WebP by its
//! bytes, at most 20 MiB; an error names the file), the model must read images (its catalogue
//! entry has vision, or `[models.NAME] vision = true`) or the run is refused naming the model and
//! the file, before any session or request. Then the images are stored content-addressed under
//! `$KEEL_HOME/attachments` and the prompt's user message carries the text and one image block
//! per file, each a `keel-attachment:` reference (the session log holds no image bytes).

use anyhow::{Result, anyhow, bail};
use keel_agent::{Agent, InboxMode};
use keel_host::ModelRoute;
use keel_protocol::ContentBlock;
use keel_tools::attachments::read_image_file;
use std::path::{Path, PathBuf};

/// One checked image file of the prompt.
pub(super) struct PromptImage {
    /// The file as the user named it.
    shown: String,
    bytes: Vec<u8>,
    /// Its media type, from its bytes.
    mime: &'static str,
}

impl PromptImage {
    /// The image as a `data:` URL (`keel run --server` sends it so, docs/serve.md).
    pub(super) fn data_url(&self) -> String {
        use base64::Engine;
        format!(
            "data:{};base64,{}",
            self.mime,
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        )
    }
}

/// Reads and checks `files` (relative to `cwd`).
pub(super) fn read(cwd: &Path, files: &[PathBuf]) -> Result<Vec<PromptImage>> {
    files
        .iter()
        .map(|file| {
            let shown = file.display().to_string();
            let (bytes, kind) =
                read_image_file(&cwd.join(file), &shown).map_err(|e| anyhow!("--image {e}"))?;
            Ok(PromptImage {
                shown,
                bytes,
                mime: kind.mime,
            })
        })
        .collect()
}

/// Refuses images for a model that does not read them, naming the model and the first file.
pub(super) fn check_model(route: &ModelRoute, images: &[PromptImage]) -> Result<()> {
    match images.first() {
        Some(first) if !route.info.vision => bail!(
            "model {model} does not read images, so it cannot be sent --image {file}: pick a \
             model with vision (--model NAME), or declare that {model} has it with vision = \
             true in the [models.\"{model}\"] table of the configuration",
            model = route.model,
            file = first.shown,
        ),
        _ => Ok(()),
    }
}

/// Queues `prompt` with `images` as the agent's next turn (a plain text prompt without them).
pub(super) fn followup(agent: &Agent, prompt: &str, images: Vec<PromptImage>) -> Result<()> {
    if images.is_empty() {
        agent.followup(prompt)?;
        return Ok(());
    }
    let store = agent
        .attachments()
        .ok_or_else(|| anyhow!("no keel home to store the --image files in"))?;
    let mut message = keel_agent::user_message(prompt);
    for image in images {
        let stored = store.store(&image.bytes, &image.shown)?;
        message.content.push(ContentBlock::Image(stored));
    }
    agent.enqueue(InboxMode::Followup, message)?;
    Ok(())
}
