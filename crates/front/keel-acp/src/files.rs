//! The client's file system (`fs/read_text_file`, `fs/write_text_file`) as keel's editor view
//! of text files: when the client offers them in `initialize`, `read` and `edit` see the
//! editor's unsaved buffers and `write` and `edit` go through them, so the person sees each
//! change in the editor as it happens. Paths reach the client only after keel's sandbox has
//! resolved them.

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    FileSystemCapabilities, ReadTextFileRequest, SessionId, WriteTextFileRequest,
};
use keel_tools::{TextFiles, TextFilesError};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Reads and writes through the client, as far as it offers to.
pub struct ClientFiles {
    cx: ConnectionTo<Client>,
    session: Arc<OnceLock<SessionId>>,
    read: bool,
    write: bool,
}

impl ClientFiles {
    /// The client's files for the session whose id `session` holds once known; `None` when
    /// the client offers neither reads nor writes.
    pub fn offered(
        cx: ConnectionTo<Client>,
        session: Arc<OnceLock<SessionId>>,
        fs: &FileSystemCapabilities,
    ) -> Option<Self> {
        (fs.read_text_file || fs.write_text_file).then(|| ClientFiles {
            cx,
            session,
            read: fs.read_text_file,
            write: fs.write_text_file,
        })
    }

    fn session(&self) -> Result<SessionId, TextFilesError> {
        self.session.get().cloned().ok_or_else(|| {
            TextFilesError::Unavailable("the ACP session is not open yet".to_owned())
        })
    }
}

#[async_trait::async_trait]
impl TextFiles for ClientFiles {
    async fn read(&self, path: &Path) -> Result<Option<String>, TextFilesError> {
        // A file that is not on disk is reported as missing by the disk read, in keel's words
        // (an editor has no buffer of it either, short of a new unsaved one).
        if !self.read || !path.is_file() {
            return Ok(None);
        }
        let request = ReadTextFileRequest::new(self.session()?, path);
        match self.cx.send_request(request).block_task().await {
            Ok(answer) => Ok(Some(answer.content)),
            Err(e) => Err(TextFilesError::Refused {
                method: "fs/read_text_file",
                message: e.message,
            }),
        }
    }

    async fn write(&self, path: &Path, text: &str) -> Result<bool, TextFilesError> {
        if !self.write {
            return Ok(false);
        }
        let request = WriteTextFileRequest::new(self.session()?, path, text);
        match self.cx.send_request(request).block_task().await {
            Ok(_) => Ok(true),
            Err(e) => Err(TextFilesError::Refused {
                method: "fs/write_text_file",
                message: e.message,
            }),
        }
    }
}
