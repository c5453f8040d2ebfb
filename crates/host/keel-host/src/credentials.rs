//! API keys stored by `keel login`: `$KEEL_HOME/credentials.toml`.
//!
//! ```toml
//! [providers.deepseek]
//! api_key = "sk-..."
//! ```
//!
//! The file is the user's alone: it is read only when its mode has no group or other bit
//! (`chmod 600`), never through a symbolic link (opened with `O_NOFOLLOW`, like every file keel
//! reads on its own), and written whole: a new file created with mode 0600 beside it, synced,
//! then renamed over it, so a crash leaves the old file or the new one and never half of one.
//! A file keel cannot read (a bad mode, a link, bad TOML, a malformed key) is an error naming
//! the file and what is wrong, and is never overwritten: `keel login` refuses too.
//!
//! No system keyring is used (CI machines and containers have no secret service). An
//! environment variable named by the provider's table wins over the stored key, and a stored key
//! goes only where [`crate::endpoint`] lets it.

use keel_llm::ApiKey;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file's name under `$KEEL_HOME`.
pub const CREDENTIALS_FILE: &str = "credentials.toml";

/// Larger files are refused (a key file is a few hundred bytes).
const MAX_BYTES: u64 = 1 << 20;

/// Why the credentials file could not be read or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file may be read by others than its owner.
    #[error(
        "refusing to read {}: its mode is {mode:03o}, so others may read the keys in it; run `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    Permissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The path is a symbolic link.
    #[error(
        "refusing to read {}: it is a symbolic link (keel reads its credentials only from a regular file)",
        path.display()
    )]
    Symlink {
        /// The file.
        path: PathBuf,
    },
    /// The path is no regular file, or too large to be one of keel's.
    #[error("refusing to read {}: {what}", path.display())]
    NotAFile {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        what: &'static str,
    },
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not TOML of the expected shape.
    #[error(
        "invalid credentials file {}: {message} (expected [providers.NAME] tables with api_key = \"...\")",
        path.display()
    )]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, where.
        message: String,
    },
    /// A stored key cannot be sent (empty, whitespace, non-ASCII).
    #[error("invalid credentials file {}: the key of [providers.{provider}]", path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// The provider.
        provider: String,
        /// Why.
        #[source]
        source: keel_llm::ConfigError,
    },
    /// The file could not be written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file (or the directory it goes in).
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One `[providers.NAME]` table of the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    api_key: String,
}

/// The file's shape.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    providers: BTreeMap<String, Entry>,
}

/// The stored keys of one `$KEEL_HOME`, as read (or empty when there is no file).
#[derive(Clone)]
pub struct Credentials {
    path: PathBuf,
    keys: BTreeMap<String, ApiKey>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("path", &self.path)
            .field("providers", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `$KEEL_HOME/credentials.toml`.
pub fn path(home: &Path) -> PathBuf {
    home.join(CREDENTIALS_FILE)
}

impl Credentials {
    /// Read `$KEEL_HOME/credentials.toml` (`home`); no file is an empty store.
    pub fn load(home: &Path) -> Result<Credentials, CredentialsError> {
        let path = path(home);
        let keys = match read(&path)? {
            None => BTreeMap::new(),
            Some(text) => parse(&path, &text)?,
        };
        Ok(Credentials { path, keys })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key stored for `provider`.
    pub fn get(&self, provider: &str) -> Option<&ApiKey> {
        self.keys.get(provider)
    }

    /// The providers with a stored key.
    pub fn providers(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }

    /// Store `key` for `provider` (in memory; [`Credentials::save`] writes it).
    pub fn set(&mut self, provider: &str, key: ApiKey) {
        self.keys.insert(provider.to_owned(), key);
    }

    /// Forget `provider`'s key (in memory); whether there was one.
    pub fn remove(&mut self, provider: &str) -> bool {
        self.keys.remove(provider).is_some()
    }

    /// Write the file: a new file of mode 0600 in the same directory, synced, renamed over the
    /// old one (the directory is created when missing).
    pub fn save(&self) -> Result<(), CredentialsError> {
        let file = File {
            providers: self
                .keys
                .iter()
                .map(|(name, key)| {
                    (
                        name.clone(),
                        Entry {
                            api_key: key.expose().to_owned(),
                        },
                    )
                })
                .collect(),
        };
        let text = toml::to_string(&file).map_err(|e| CredentialsError::Invalid {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        write_atomic(&self.path, text.as_bytes())
    }
}

/// The file's text; `None` when it does not exist.
fn read(path: &Path) -> Result<Option<String>, CredentialsError> {
    let read_err = |source| CredentialsError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(CredentialsError::Symlink {
                path: path.to_path_buf(),
            });
        }
        Err(e) => return Err(read_err(e)),
    };
    let meta = file.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(CredentialsError::NotAFile {
            path: path.to_path_buf(),
            what: "it is not a regular file",
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(CredentialsError::Permissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.len() > MAX_BYTES {
        return Err(CredentialsError::NotAFile {
            path: path.to_path_buf(),
            what: "it is larger than 1 MiB",
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read_err)?;
    Ok(Some(text))
}

/// The keys of the file's text, each validated.
fn parse(path: &Path, text: &str) -> Result<BTreeMap<String, ApiKey>, CredentialsError> {
    let file: File = toml::from_str(text).map_err(|e| CredentialsError::Invalid {
        path: path.to_path_buf(),
        message: e.message().to_owned() + &line_of(text, e.span()),
    })?;
    file.providers
        .into_iter()
        .map(|(name, entry)| {
            let source = format!("{CREDENTIALS_FILE} [providers.{name}]");
            match ApiKey::new(&entry.api_key, &source) {
                Ok(key) => Ok((name, key)),
                Err(source) => Err(CredentialsError::BadKey {
                    path: path.to_path_buf(),
                    provider: name,
                    source,
                }),
            }
        })
        .collect()
}

/// ` at line N` for a parse error's span (never the line's text: it may hold a key).
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(span) => {
            let at = span.start.min(text.len());
            let line = text.as_bytes()[..at]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            format!(" at line {line}")
        }
        None => String::new(),
    }
}

/// Replace `path` with `bytes`: a temporary file of mode 0600 beside it, synced, renamed over.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CredentialsError> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let write_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| CredentialsError::Write { path: p, source }
    };
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    let tmp = dir.join(format!(".{CREDENTIALS_FILE}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(write_err(path)(e));
    }
    // The rename is durable once the directory is synced (best effort: some file systems
    // refuse to sync a directory).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn key(s: &str) -> ApiKey {
        ApiKey::new(s, "test").unwrap()
    }

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn save_writes_mode_600_and_load_reads_it_back() {
        let home = tempfile::tempdir().unwrap();
        let store = Credentials::load(home.path()).unwrap();
        assert_eq!(store.providers().count(), 0, "no file: an empty store");
        let mut store = store;
        store.set("deepseek", key("sk-one"));
        store.save().unwrap();
        let file = home.path().join(CREDENTIALS_FILE);
        assert_eq!(mode(&file), 0o600);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "[providers.deepseek]\napi_key = \"sk-one\"\n"
        );
        let back = Credentials::load(home.path()).unwrap();
        assert_eq!(back.get("deepseek").unwrap().expose(), "sk-one");
        let leftovers: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from(CREDENTIALS_FILE)]);
    }

    #[test]
    fn save_creates_the_home_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("new-home");
        let mut store = Credentials::load(&home).unwrap();
        store.set("deepseek", key("sk-one"));
        store.save().unwrap();
        assert_eq!(mode(&home.join(CREDENTIALS_FILE)), 0o600);
    }

    #[test]
    fn a_file_others_may_read_is_refused_and_named() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(CREDENTIALS_FILE);
        std::fs::write(&file, "[providers.deepseek]\napi_key = \"sk-one\"\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Credentials::load(home.path()).unwrap_err();
        assert!(
            matches!(err, CredentialsError::Permissions { mode: 0o644, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(&file.display().to_string()), "{msg}");
        assert!(msg.contains("644"), "{msg}");
        assert!(
            msg.contains(&format!("chmod 600 {}", file.display())),
            "{msg}"
        );
        assert!(!msg.contains("sk-one"), "{msg}");
    }

    #[test]
    fn a_symbolic_link_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = home.path().join("elsewhere.toml");
        std::fs::write(&elsewhere, "[providers.deepseek]\napi_key = \"sk-one\"\n").unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, home.path().join(CREDENTIALS_FILE)).unwrap();
        let err = Credentials::load(home.path()).unwrap_err();
        assert!(matches!(err, CredentialsError::Symlink { .. }), "{err:?}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
    }

    #[test]
    fn bad_toml_is_named_and_the_file_kept() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join(CREDENTIALS_FILE);
        let text = "[providers.deepseek]\napi_key = \"sk-secret\n";
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = Credentials::load(home.path()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, CredentialsError::Invalid { .. }), "{err:?}");
        assert!(msg.contains(&file.display().to_string()), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        assert!(!msg.contains("sk-secret"), "{msg}");

        std::fs::write(&file, "[providers.deepseek]\napi_key = \"sk one\"\n").unwrap();
        let err = Credentials::load(home.path()).unwrap_err();
        assert!(
            matches!(&err, CredentialsError::BadKey { provider, .. } if provider == "deepseek"),
            "{err:?}"
        );
        assert!(err.to_string().contains("[providers.deepseek]"), "{err}");

        std::fs::write(&file, "[providers.deepseek]\nkey = \"sk-one\"\n").unwrap();
        let err = Credentials::load(home.path()).unwrap_err().to_string();
        assert!(err.contains("unknown field `key`"), "{err}");
    }

    #[test]
    fn remove_keeps_the_other_providers() {
        let home = tempfile::tempdir().unwrap();
        let mut store = Credentials::load(home.path()).unwrap();
        store.set("deepseek", key("sk-one"));
        store.set("local", key("sk-two"));
        store.save().unwrap();
        let mut store = Credentials::load(home.path()).unwrap();
        assert!(store.remove("deepseek"));
        assert!(!store.remove("deepseek"), "only once");
        store.save().unwrap();
        let back = Credentials::load(home.path()).unwrap();
        assert_eq!(back.providers().collect::<Vec<_>>(), vec!["local"]);
        assert_eq!(back.get("local").unwrap().expose(), "sk-two");
        assert_eq!(mode(&back.path), 0o600);
    }
}
