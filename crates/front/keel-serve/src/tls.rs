//! TLS for `keel serve --tls-cert FILE --tls-key FILE`: the certificate chain and key read from
//! PEM files ([`Tls::from_pem_files`]), and a listener that completes each connection's
//! handshake in a task of its own, so a client that never finishes its handshake holds up no
//! one else ([`TlsListener`]).

use crate::ServeError;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// The largest PEM file read (certificate chains are a few KiB).
const PEM_LIMIT: u64 = 1 << 20;

/// How long a client gets to finish its handshake before its connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A server certificate and its key, ready to accept TLS connections.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// The certificate chain in `cert` (PEM, the server's certificate first) and its private
    /// key in `key` (PEM: PKCS#8, PKCS#1 or SEC1). Each error names the file and what is wrong
    /// with it.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls, ServeError> {
        let bad = |path: &Path, why: String| ServeError::Tls {
            path: path.to_path_buf(),
            why,
        };
        let cert_pem = read_pem(cert)?;
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(cert, format!("not a PEM certificate chain: {e}")))?;
        if chain.is_empty() {
            return Err(bad(cert, "holds no CERTIFICATE block".to_owned()));
        }
        let key_pem = read_pem(key)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| bad(key, format!("holds no PEM private key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(cert, e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| {
                bad(
                    key,
                    format!(
                        "does not go with the certificate in {}: {e}",
                        cert.display()
                    ),
                )
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// A PEM file of the user's, within [`PEM_LIMIT`].
fn read_pem(path: &Path) -> Result<Vec<u8>, ServeError> {
    use std::io::Read;
    let failed = |e: io::Error| ServeError::Tls {
        path: path.to_path_buf(),
        why: format!("cannot be read: {e}"),
    };
    let file = std::fs::File::open(path).map_err(failed)?;
    let mut bytes = Vec::new();
    file.take(PEM_LIMIT + 1)
        .read_to_end(&mut bytes)
        .map_err(failed)?;
    if bytes.len() as u64 > PEM_LIMIT {
        return Err(ServeError::Tls {
            path: path.to_path_buf(),
            why: format!("is larger than {PEM_LIMIT} bytes"),
        });
    }
    Ok(bytes)
}

/// Connections whose handshake completed, handed to axum one by one.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    /// Accept on `listener`, each handshake in its own task.
    pub(crate) fn new(mut listener: TcpListener, tls: &Tls, addr: SocketAddr) -> TlsListener {
        let (tx, ready) = mpsc::channel(64);
        let acceptor = tls.acceptor.clone();
        let accepting = tokio::spawn(async move {
            loop {
                // axum's own accept: it retries after errors (a full descriptor table, say).
                let (tcp, peer) = axum::serve::Listener::accept(&mut listener).await;
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    if let Ok(Ok(stream)) = handshake.await {
                        let _ = tx.send((stream, peer)).await;
                    }
                });
            }
        });
        TlsListener {
            ready,
            addr,
            accepting,
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accepting task ended (only when the runtime shuts down): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
