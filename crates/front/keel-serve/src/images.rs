//! Images sent with a message (`"images"` of `POST …/messages`): what `keel run --image FILE`
//! sends, given over HTTP as `data:` URLs instead of files. Each is a base64 `data:` URL whose
//! media type is PNG, JPEG, GIF or WebP and agrees with its bytes (keel_tools' check, as for
//! `--image`); the whole body is held to [`crate::BODY_LIMIT`], so the images of one message
//! come to about 750 KiB at most. The session's model must read images (as for `--image`).
//! Then each is stored content-addressed under `$KEEL_HOME/attachments` and the message
//! carries one image block per image, a `keel-attachment:` reference (the log holds no image
//! bytes).

use crate::ApiError;
use base64::Engine as _;
use keel_agent::Agent;
use keel_protocol::{ContentBlock, Message};

/// The media types an image may be sent as.
const MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One checked image of a message.
pub(crate) struct Image {
    /// `images[i]`, for errors.
    shown: String,
    bytes: Vec<u8>,
}

/// Decode and check `urls` (400 naming the image and what is wrong).
pub(crate) fn decode(urls: &[String]) -> Result<Vec<Image>, ApiError> {
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            let shown = format!("images[{i}]");
            let bad = |what: String| ApiError::bad_request(format!("{shown}: {what}"));
            let rest = url.strip_prefix("data:").ok_or_else(|| {
                bad(
                    "an image is a data URL (data:image/png;base64,…); a path or a \
                     remote URL is not read"
                        .to_owned(),
                )
            })?;
            let (meta, data) = rest
                .split_once(',')
                .ok_or_else(|| bad("the data URL has no `,` before its data".to_owned()))?;
            let media = meta.strip_suffix(";base64").ok_or_else(|| {
                bad(format!(
                    "the data URL must be base64 with a media type (data:image/png;base64,…), \
                     not data:{meta},…"
                ))
            })?;
            if !MEDIA_TYPES.contains(&media) {
                return Err(bad(format!(
                    "media type {media:?} is not one keel sends: {}",
                    MEDIA_TYPES.join(", ")
                )));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .map_err(|e| bad(format!("its data is not base64: {e}")))?;
            let kind = keel_tools::attachments::check(&bytes, &shown)
                .map_err(|e| ApiError::bad_request(e.to_string()))?;
            if kind.mime != media {
                return Err(bad(format!(
                    "it says {media} and its bytes are {}",
                    kind.mime
                )));
            }
            Ok(Image { shown, bytes })
        })
        .collect()
}

/// The user message of `text` with `images`, stored as attachments; refused (400) when the
/// session's model does not read images, naming it.
pub(crate) fn message(agent: &Agent, text: &str, images: Vec<Image>) -> Result<Message, ApiError> {
    let mut message = keel_agent::user_message(text);
    let Some(first) = images.first() else {
        return Ok(message);
    };
    let config = agent.config();
    if !config.model_info.vision {
        return Err(ApiError::bad_request(format!(
            "model {model} does not read images, so it cannot be sent {shown}: pick a model \
             with vision (POST …/model), or declare that {model} has it with vision = true in \
             the [models.\"{model}\"] table of the configuration",
            model = config.model,
            shown = first.shown,
        )));
    }
    let store = agent
        .attachments()
        .ok_or_else(|| ApiError::internal("no keel home to store the images in"))?;
    for image in images {
        let stored = store
            .store(&image.bytes, &image.shown)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        message.content.push(ContentBlock::Image(stored));
    }
    Ok(message)
}

/// `GET /api/v1/attachments/{name}`: an image a session carries (`keel-attachment:NAME` in its
/// log: `<sha256>.<ext>` under `$KEEL_HOME/attachments`), for a page that shows it. Only names
/// keel writes are served, a regular file of at most the image limit that is still the image
/// its name says, with its sniffed type, `nosniff`, a policy that lets nothing in it run, and a
/// year's caching (the name is the content's hash).
pub(crate) async fn attachment(
    axum::extract::State(app): axum::extract::State<std::sync::Arc<crate::App>>,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Result<axum::response::Response, ApiError> {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let missing = || ApiError::not_found(format!("no attachment {name}"));
    let store = keel_tools::attachments::Attachments::under_home(app.store.home());
    let path = match store.path_of(&format!(
        "{}{name}",
        keel_tools::attachments::ATTACHMENT_SCHEME
    )) {
        Some(Ok(path)) => path,
        _ => return Err(missing()),
    };
    let bytes = tokio::task::spawn_blocking(move || {
        let meta = std::fs::symlink_metadata(&path).ok()?;
        (meta.is_file() && meta.len() <= keel_tools::attachments::MAX_IMAGE_BYTES)
            .then(|| std::fs::read(&path).ok())
            .flatten()
    })
    .await
    .map_err(|e| ApiError::internal(format!("reading attachment {name} failed: {e}")))?
    .ok_or_else(missing)?;
    let kind = keel_tools::attachments::check(&bytes, &name).map_err(|_| missing())?;
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, kind.mime),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "sandbox; default-src 'none'",
            ),
            (
                header::CACHE_CONTROL,
                "private, max-age=31536000, immutable",
            ),
        ],
        bytes,
    )
        .into_response())
}
