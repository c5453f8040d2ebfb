//! The token store: a token per server URL under `$KEEL_HOME/mcp/oauth`, in a private file
//! (directory 0700, file 0600, replaced atomically), used only for exactly the URL it was issued
//! for.

use super::{AuthError, EXPIRY_MARGIN, now};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// A token and what is needed to refresh it, as stored.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredToken {
    /// The server URL it was issued for (the binding).
    pub server_url: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Expiry, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scope granted (or asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The token endpoint found at login (refresh goes there).
    pub token_endpoint: String,
    /// The client id (registered or configured).
    pub client_id: String,
    /// The client secret, when registration issued one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the secret is sent (`client_secret_basic`; otherwise in the form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_method: Option<String>,
    /// The authorization server's issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("server_url", &self.server_url)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl StoredToken {
    /// Whether it has expired (or will within [`EXPIRY_MARGIN`] seconds).
    pub fn expired(&self) -> bool {
        self.expires_at
            .is_some_and(|at| now().saturating_add(EXPIRY_MARGIN) >= at)
    }
}

/// The token store under `$KEEL_HOME/mcp/oauth`.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
}

impl TokenStore {
    /// The store of `keel_home`.
    pub fn new(keel_home: &Path) -> Self {
        TokenStore {
            dir: keel_home.join("mcp").join("oauth"),
        }
    }

    /// The file holding the token of `server_url`.
    pub fn path(&self, server_url: &str) -> PathBuf {
        let digest = Sha256::digest(server_url.as_bytes());
        self.dir
            .join(format!("{}.json", hex::encode(&digest[..16])))
    }

    fn store_error(path: &Path, e: impl std::fmt::Display) -> AuthError {
        AuthError::Store {
            path: path.display().to_string(),
            why: e.to_string(),
        }
    }

    /// The token issued for exactly `server_url`, if any.
    pub fn load(&self, server_url: &str) -> Result<Option<StoredToken>, AuthError> {
        let path = self.path(server_url);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Self::store_error(&path, e)),
        };
        let token: StoredToken = serde_json::from_slice(&bytes)
            .map_err(|e| Self::store_error(&path, format!("unreadable ({e})")))?;
        // The binding: a file for another URL (a hash collision, a hand edit) is not used.
        Ok((token.server_url == server_url).then_some(token))
    }

    /// Write `token` (directory 0700, file 0600, replaced atomically).
    pub fn save(&self, token: &StoredToken) -> Result<(), AuthError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Self::store_error(&self.dir, e))?;
        set_mode(&self.dir, 0o700).map_err(|e| Self::store_error(&self.dir, e))?;
        let path = self.path(&token.server_url);
        let tmp = path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(token).map_err(|e| Self::store_error(&path, e))?;
        write_private(&tmp, &bytes).map_err(|e| Self::store_error(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Self::store_error(&path, e))
    }

    /// Remove the token of `server_url`; whether there was one.
    pub fn remove(&self, server_url: &str) -> Result<bool, AuthError> {
        let path = self.path(server_url);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::store_error(&path, e)),
        }
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    set_mode(path, 0o600)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_private_and_bound_to_their_url() {
        let home = tempfile::tempdir().unwrap();
        let store = TokenStore::new(home.path());
        let token = StoredToken {
            server_url: "https://a.example/mcp".into(),
            access_token: "secret".into(),
            refresh_token: None,
            expires_at: None,
            scope: None,
            token_endpoint: "https://a.example/token".into(),
            client_id: "c".into(),
            client_secret: None,
            token_endpoint_auth_method: None,
            issuer: None,
        };
        store.save(&token).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path(&token.server_url))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            store.load("https://a.example/mcp").unwrap(),
            Some(token.clone())
        );
        assert_eq!(store.load("https://evil.example/mcp").unwrap(), None);
        // A file copied under another URL's name is not used for that URL.
        std::fs::copy(
            store.path(&token.server_url),
            store.path("https://evil.example/mcp"),
        )
        .unwrap();
        assert_eq!(store.load("https://evil.example/mcp").unwrap(), None);
        assert!(!format!("{token:?}").contains("secret"));
        assert!(store.remove("https://a.example/mcp").unwrap());
        assert!(!store.remove("https://a.example/mcp").unwrap());
    }
}
