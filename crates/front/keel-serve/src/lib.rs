//! keel as a local HTTP service (`keel serve`): one process hosting any number of sessions,
//! each built through the binary's [`AgentSource`] exactly as the command line builds it,
//! driven and watched over a versioned API under `/api/v1` (docs/serve.md).
//!
//! It listens on loopback, or beyond it over TLS ([`tls`]) or when told that plain HTTP is
//! meant; a random token guards every request ([`security`]); sessions listed, created, prompted, steered and cancelled ([`api`]), and each
//! session's log streamed as Server-Sent Events from any seq, then live ([`events`]), with the
//! approvals and questions of its turns put to every client and answered by the first
//! (`requests`); sessions searched, forked, rewound, and switched to another mode or model
//! (`control`), as the command line and the terminal UI do it. The routes are described by the
//! OpenAPI document the server serves ([`openapi`]).

#![deny(missing_docs)]

pub mod api;
mod commands;
mod control;
mod error;
pub mod events;
mod extensions;
mod feedback;
mod files;
mod hub;
mod images;
mod jobs;
mod models;
pub mod openapi;
mod paths;
mod present;
mod provenance;
mod requests;
mod schedules;
pub mod security;
mod state;
pub mod tls;
mod trust;
mod web;

pub use error::{ApiError, ServeError};
pub use tls::Tls;

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
    /// `https` when the server speaks TLS, else `http`: its own origin's scheme.
    pub(crate) scheme: &'static str,
    /// Host names accepted in `Host` and `Origin` besides the loopback names (lowercase).
    pub(crate) trusted_hosts: Vec<String>,
    /// The sessions hosted live.
    pub(crate) hub: Hub,
    /// Where stored sessions' logs ended when a stream last read them.
    pub(crate) stored_ends: events::StoredEnds,
}

/// Where and how the server listens (`keel serve --listen`, `--tls-cert/--tls-key`,
/// `--insecure-no-tls`).
#[derive(Debug, Clone)]
pub struct Listen {
    /// The address and port (port 0: a free port). Never a wildcard address: the server's
    /// own `Host` is the address it was given.
    pub addr: SocketAddr,
    /// Speak TLS with this certificate.
    pub tls: Option<Tls>,
    /// Serve plain HTTP on an address beyond loopback (the token then crosses the network in
    /// clear: for a network the user trusts completely).
    pub insecure: bool,
}

impl Listen {
    /// Plain HTTP on `addr` (a loopback address).
    pub fn plain(addr: SocketAddr) -> Self {
        Listen {
            addr,
            tls: None,
            insecure: false,
        }
    }
}

/// A listening socket, not yet serving.
#[derive(Debug)]
pub struct Bound {
    listener: TcpListener,
    addr: SocketAddr,
    tls: Option<Tls>,
}

impl Bound {
    /// Listen as `listen` says. A wildcard address (`0.0.0.0`, `::`) is refused; an address
    /// beyond loopback needs TLS or [`Listen::insecure`].
    pub async fn bind(listen: Listen) -> Result<Bound, ServeError> {
        let Listen {
            addr,
            tls,
            insecure,
        } = listen;
        if addr.ip().is_unspecified() {
            return Err(ServeError::Wildcard(addr));
        }
        if !addr.ip().is_loopback() && tls.is_none() && !insecure {
            return Err(ServeError::NotLoopback(addr));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
        Ok(Bound {
            listener,
            addr,
            tls,
        })
    }

    /// The address listened on (with the port picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` over TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The URL a person opens: the server's root with `token`, which sets the cookie.
    pub fn url(&self, token: &str) -> String {
        format!("{}://{}/?token={token}", self.scheme(), self.addr)
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
    let mut trusted_hosts = access
        .trusted_hosts
        .iter()
        .map(|h| security::trusted_host(h).ok_or_else(|| ServeError::TrustedHost(h.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    if !bound.addr.ip().is_loopback() {
        // The address it was told to listen on names the server too (`10.0.0.5:PORT`).
        trusted_hosts.push(security::address_host(bound.addr.ip()));
    }
    let app = Arc::new(App {
        source: Arc::new(source),
        store,
        token: access.token,
        port: bound.addr.port(),
        scheme: bound.scheme(),
        trusted_hosts,
        hub: Hub::default(),
        stored_ends: events::StoredEnds::default(),
    });
    let router = router(app.clone());
    let Bound {
        listener,
        addr,
        tls,
    } = bound;
    let serving = async move {
        match tls {
            Some(tls) => axum::serve(tls::TlsListener::new(listener, &tls, addr), router).await,
            None => axum::serve(listener, router).await,
        }
    };
    let served = tokio::select! {
        served = serving => served.map_err(ServeError::Serve),
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
        .route("/assets/{name}", axum::routing::get(web::asset_named))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            security::guard,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(app)
}
