//! Images as keel stores and sends them: content-addressed files under `$KEEL_HOME/attachments`.
//!
//! An image that enters a session (a `keel run --image FILE`, an ACP image block, a `read_image`
//! call) is checked ([`sniff`]: PNG, JPEG, GIF or WebP by its first bytes, at most
//! [`MAX_IMAGE_BYTES`]) and stored once as `<sha256 of its bytes>.<ext>`. The session log then
//! carries only an [`ImageRef`] whose `uri` is `keel-attachment:<sha256>.<ext>`
//! ([`ATTACHMENT_SCHEME`]), never the bytes. When a request is built, [`Attachments::data_url`]
//! turns that reference back into the `data:<mime>;base64,…` URL the model is sent.

use base64::Engine as _;
use keel_protocol::ImageRef;
use sha2::{Digest, Sha256};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest image keel takes, in bytes (20 MiB, OpenAI's limit for one image).
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// The scheme of an attachment's `uri`: `keel-attachment:<sha256>.<ext>`.
pub const ATTACHMENT_SCHEME: &str = "keel-attachment:";

/// The image formats keel sends, by their magic numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageKind {
    /// MIME type, e.g. `image/png`.
    pub mime: &'static str,
    /// File extension of the stored attachment, e.g. `png`.
    pub ext: &'static str,
}

const KINDS: [ImageKind; 4] = [
    ImageKind {
        mime: "image/png",
        ext: "png",
    },
    ImageKind {
        mime: "image/jpeg",
        ext: "jpg",
    },
    ImageKind {
        mime: "image/gif",
        ext: "gif",
    },
    ImageKind {
        mime: "image/webp",
        ext: "webp",
    },
];

/// The image format of `bytes` from its first bytes: PNG, JPEG, GIF or WebP; `None` for
/// anything else (a file named `.png` that is text is not an image).
pub fn sniff(bytes: &[u8]) -> Option<ImageKind> {
    let [png, jpeg, gif, webp] = KINDS;
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(png)
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(jpeg)
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some(gif)
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some(webp)
    } else {
        None
    }
}

/// Why an image could not be taken or sent. Every message names the file (as the user or the
/// model gave it) and says what keel accepts.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// The bytes are not PNG, JPEG, GIF or WebP. Returned to whoever gave the file: the user
    /// picks another, a tool call fails with this message and the turn goes on.
    #[error("{shown} is not an image keel can send: it is not PNG, JPEG, GIF or WebP")]
    NotAnImage {
        /// The file as given.
        shown: String,
    },
    /// The file is larger than [`MAX_IMAGE_BYTES`].
    #[error(
        "{shown} is {bytes} bytes, more than the {MAX_IMAGE_BYTES} bytes (20 MiB) an image may have"
    )]
    TooLarge {
        /// The file as given.
        shown: String,
        /// Its size.
        bytes: u64,
    },
    /// The file is a directory.
    #[error("{shown} is a directory, not an image")]
    Directory {
        /// The path as given.
        shown: String,
    },
    /// Reading or storing failed.
    #[error("{op} {shown}: {source}")]
    Io {
        /// What was attempted (`reading`, `storing`).
        op: &'static str,
        /// The file involved.
        shown: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An `keel-attachment:` uri that names no attachment keel could have written (a damaged
    /// or hand-edited log).
    #[error("{uri} is not a keel attachment reference")]
    BadReference {
        /// The uri as found.
        uri: String,
    },
}

/// The image file at `path` (`shown` names it in errors): its bytes and format, checked.
pub fn read_image_file(path: &Path, shown: &str) -> Result<(Vec<u8>, ImageKind), ImageError> {
    let io = |op, source| ImageError::Io {
        op,
        shown: shown.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|e| io("reading", e))?;
    read_image_from(file, shown)
}

/// [`read_image_file`] of a file already opened (the `read_image` tool opens it beneath the
/// workspace, [`crate::workspace::Placed::open_read`]).
pub fn read_image_from(
    file: std::fs::File,
    shown: &str,
) -> Result<(Vec<u8>, ImageKind), ImageError> {
    let io = |op, source| ImageError::Io {
        op,
        shown: shown.to_owned(),
        source,
    };
    let md = file.metadata().map_err(|e| io("reading", e))?;
    if md.is_dir() {
        return Err(ImageError::Directory {
            shown: shown.to_owned(),
        });
    }
    if md.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            shown: shown.to_owned(),
            bytes: md.len(),
        });
    }
    let mut bytes = Vec::with_capacity(md.len() as usize);
    file.take(MAX_IMAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io("reading", e))?;
    let kind = check(&bytes, shown)?;
    Ok((bytes, kind))
}

/// The format of `bytes` (the image `shown`), or why it is refused.
pub fn check(bytes: &[u8], shown: &str) -> Result<ImageKind, ImageError> {
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge {
            shown: shown.to_owned(),
            bytes: bytes.len() as u64,
        });
    }
    sniff(bytes).ok_or_else(|| ImageError::NotAnImage {
        shown: shown.to_owned(),
    })
}

/// The attachment store: a directory of content-addressed images (`$KEEL_HOME/attachments`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachments {
    dir: PathBuf,
}

impl Attachments {
    /// The store in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Attachments { dir: dir.into() }
    }

    /// The store of a keel home: `<home>/attachments`.
    pub fn under_home(home: &Path) -> Self {
        Attachments::new(home.join("attachments"))
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores the image `bytes` (`shown` names it in errors) unless an equal one is stored,
    /// and returns its reference. Refuses what is not an image or is too large.
    pub fn store(&self, bytes: &[u8], shown: &str) -> Result<ImageRef, ImageError> {
        let kind = check(bytes, shown)?;
        let sha = Sha256::digest(bytes);
        let mut name = hex::encode(sha);
        name.push('.');
        name.push_str(kind.ext);
        let path = self.dir.join(&name);
        if !path.is_file() {
            let io = |source| ImageError::Io {
                op: "storing",
                shown: shown.to_owned(),
                source,
            };
            std::fs::create_dir_all(&self.dir).map_err(io)?;
            // Written whole under a temporary name, then renamed: a reader never sees half.
            let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
            std::io::Write::write_all(&mut tmp, bytes).map_err(io)?;
            tmp.persist(&path).map_err(|e| io(e.error))?;
        }
        Ok(ImageRef {
            uri: format!("{ATTACHMENT_SCHEME}{name}"),
            media_type: Some(kind.mime.to_owned()),
        })
    }

    /// Reads, checks and stores the image file at `path` (`shown` names it in errors).
    pub fn store_file(&self, path: &Path, shown: &str) -> Result<ImageRef, ImageError> {
        let (bytes, _) = read_image_file(path, shown)?;
        self.store(&bytes, shown)
    }

    /// The file of an attachment reference (`None` when `uri` is not `keel-attachment:`).
    /// Only names keel writes are accepted: 64 hex digits and a known extension.
    pub fn path_of(&self, uri: &str) -> Option<Result<PathBuf, ImageError>> {
        let name = uri.strip_prefix(ATTACHMENT_SCHEME)?;
        let ok = name.split_once('.').is_some_and(|(sha, ext)| {
            sha.len() == 64
                && sha.bytes().all(|b| b.is_ascii_hexdigit())
                && KINDS.iter().any(|k| k.ext == ext)
        });
        Some(if ok {
            Ok(self.dir.join(name))
        } else {
            Err(ImageError::BadReference {
                uri: uri.to_owned(),
            })
        })
    }

    /// The URL a model is sent for `image`: a stored attachment or an image file on disk (an
    /// absolute path, as MCP tools save them) as a `data:<mime>;base64,…` URL; `None` when the
    /// uri is already a URL (`data:`, `http:`, `https:`) and goes out as it is.
    pub fn data_url(&self, image: &ImageRef) -> Result<Option<String>, ImageError> {
        match self.path_of(&image.uri) {
            Some(path) => file_data_url(&path?, &image.uri).map(Some),
            None => data_url_outside_store(image),
        }
    }
}

/// [`Attachments::data_url`] without a store: an absolute path is read, a URL goes out as it
/// is (`None`), and an attachment reference cannot be read.
pub fn data_url_outside_store(image: &ImageRef) -> Result<Option<String>, ImageError> {
    let uri = image.uri.as_str();
    if uri.starts_with(ATTACHMENT_SCHEME) {
        return Err(ImageError::Io {
            op: "reading",
            shown: uri.to_owned(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no keel home holds the attachments",
            ),
        });
    }
    if Path::new(uri).is_absolute() {
        return file_data_url(Path::new(uri), uri).map(Some);
    }
    Ok(None)
}

/// The image file at `path` (`shown` names it in errors) as a `data:<mime>;base64,…` URL.
pub fn file_data_url(path: &Path, shown: &str) -> Result<String, ImageError> {
    let (bytes, kind) = read_image_file(path, shown)?;
    let mut url = format!("data:{};base64,", kind.mime);
    base64::engine::general_purpose::STANDARD.encode_string(&bytes, &mut url);
    Ok(url)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn formats_are_told_by_their_first_bytes() {
        assert_eq!(sniff(PNG).map(|k| k.mime), Some("image/png"));
        assert_eq!(sniff(b"\xFF\xD8\xFF\xE0").map(|k| k.ext), Some("jpg"));
        assert_eq!(sniff(b"GIF89a..").map(|k| k.ext), Some("gif"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 ").map(|k| k.ext), Some("webp"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(sniff(b"hello"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn images_are_stored_once_by_content_and_come_back_as_data_urls() {
        let dir = tempfile::tempdir().unwrap();
        let store = Attachments::under_home(dir.path());
        let a = store.store(PNG, "a.png").unwrap();
        let b = store.store(PNG, "b.png").unwrap();
        assert_eq!(a, b);
        assert!(a.uri.starts_with(ATTACHMENT_SCHEME) && a.uri.ends_with(".png"));
        assert_eq!(a.media_type.as_deref(), Some("image/png"));
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
        let url = store.data_url(&a).unwrap().unwrap();
        assert_eq!(
            url,
            format!(
                "data:image/png;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(PNG)
            )
        );
        let remote = ImageRef {
            uri: "https://example.com/a.png".into(),
            media_type: None,
        };
        assert_eq!(store.data_url(&remote).unwrap(), None);
    }

    #[test]
    fn what_is_not_an_image_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Attachments::new(dir.path());
        let e = store.store(b"just text", "notes.txt").unwrap_err();
        assert_eq!(
            e.to_string(),
            "notes.txt is not an image keel can send: it is not PNG, JPEG, GIF or WebP"
        );
        for uri in [
            "keel-attachment:../../etc/passwd.png",
            "keel-attachment:abc.png",
        ] {
            let image = ImageRef {
                uri: uri.into(),
                media_type: None,
            };
            assert!(matches!(
                store.data_url(&image),
                Err(ImageError::BadReference { .. })
            ));
        }
    }
}
