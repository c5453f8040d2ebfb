//! keel as a local HTTP service (`keel serve`): one process hosting any number of sessions,
//! each built through the binary's [`AgentSource`] exactly as the command line builds it,
//! driven and watched over a versioned API under `/api/v1` (docs/serve.md).
//!
//! This is the first step of the service: loopback only, a random token on every request
//! ([`security`]), sessions listed, created, prompted, steered and cancelled ([`api`]), and each
//! session's log streamed as Server-Sent Events from any seq, then live ([`events`]), with the
//! approvals and questions of its turns put to every client and answered by the first
//! (`requests`); sessions searched, forked, rewound, and switched to another mode or model
//! (`control`), as the command line and the terminal UI do it. The routes are described by the
//! OpenAPI document the server serves ([`openapi`]).

#![deny(missing_docs)]

pub mod api;
mod control;
mod error;
pub mod events;
mod hub;
mod images;
pub mod openapi;
mod requests;
pub mod security;

pub use error::{ApiError, ServeError};

use axum::Router;
use hub::Hub;
use keel_host::AgentSource;
use keel_session::Store;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The largest request body accepted (1 MiB): larger ones are answered 413.
pub const BODY_LIMIT: usize = 1 << 20;

/// How long the running turns get to end after the server is told to stop (or a session to
/// close).
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What every request handler shares.
pub(crate) struct App {
    /// Builds and resumes the sessions' agents.
    pub(crate) source: Arc<dyn AgentSource>,
    /// `$KEEL_HOME`'s sessions.
    pub(crate) store: Store,
    /// The secret every request must carry.
    pub(crate) token: String,
    /// The port the server listens on (the `Host` and `Origin` it accepts name it).
    pub(crate) port: u16,
    /// Host names accepted in `Host` and `Origin` besides the loopback names (lowercase).
    pub(crate) trusted_hosts: Vec<String>,
    /// The sessions hosted live.
    pub(crate) hub: Hub,
}

/// A listening socket on a loopback address, not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
}

impl Bound {
    /// Listen on `addr` (port 0: a free port). Only loopback addresses are accepted in this
    /// step: serving beyond this machine needs TLS, which is not there yet.
    pub async fn bind(addr: SocketAddr) -> Result<Bound, ServeError> {
        if !addr.ip().is_loopback() {
            return Err(ServeError::NotLoopback(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Bound { listener, addr })
    }

    /// The address listened on (with the port picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL a person opens: the server's root with `token`, which sets the cookie.
    pub fn url(&self, token: &str) -> String {
        format!("http://{}/?token={token}", self.addr)
    }
}

/// A new random token: 32 bytes as 64 lowercase hex digits.
pub fn new_token() -> String {
    use std::fmt::Write;
    let bytes: [u8; 32] = rand::random();
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Who may call the server: the token every request carries, and the host names accepted in
/// `Host` and `Origin` besides the loopback names.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The secret ([`new_token`]).
    pub token: String,
    /// Trusted host names (`--trusted-host`): `NAME:PORT` is accepted as this server.
    pub trusted_hosts: Vec<String>,
}

/// Serve the API on `bound` with agents from `source` and the sessions of `store`, every
/// request checked against `access`, until `shutdown` completes; then cancel the running turns
/// and wait for them (a few seconds at most). A trusted host that is not a host name is
/// refused.
pub async fn serve<S, F>(
    bound: Bound,
    source: S,
    store: Store,
    access: Access,
    shutdown: F,
) -> Result<(), ServeError>
where
    S: AgentSource + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let trusted_hosts = access
        .trusted_hosts
        .iter()
        .map(|h| security::trusted_host(h).ok_or_else(|| ServeError::TrustedHost(h.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    let app = Arc::new(App {
        source: Arc::new(source),
        store,
        token: access.token,
        port: bound.addr.port(),
        trusted_hosts,
        hub: Hub::default(),
    });
    let router = router(app.clone());
    let served = tokio::select! {
        served = axum::serve(bound.listener, router) => served.map_err(ServeError::Serve),
        () = shutdown => Ok(()),
    };
    app.hub.shutdown(SHUTDOWN_GRACE).await;
    served
}

/// Every route of [`api::routes`] behind the security checks, with the body limit and a JSON
/// 404 for unknown paths.
fn router(app: Arc<App>) -> Router {
    let routes = api::routes()
        .into_iter()
        .fold(Router::new(), |r, route| r.route(route.path, route.handler));
    routes
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            security::guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(app)
}
