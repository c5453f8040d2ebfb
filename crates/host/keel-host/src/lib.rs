//! keel's host assembly: the one place that turns configuration into a running agent.
//!
//! A front end (the `keel` binary, a terminal UI, an ACP server, a delegation provider, a test)
//! loads a [`Host`] for a workspace (the layered configuration of [`config`], with the
//! built-in plugins of [`plugins::builtin`]), resolves its flags into an [`AgentFactory`]
//! ([`Host::factory`]: model route, sandbox, approval) and builds agents with it
//! ([`AgentFactory::build`]). The factory registers the built-in tools, installs the enabled
//! plugins, builds the agent through [`keel_agent::AgentBuilder`] and binds the plugins to it.
//!
//! ```no_run
//! # async fn f(url: String) -> Result<(), Box<dyn std::error::Error>> {
//! use keel_host::{Flags, Host, ModelSource, Sources};
//! let host = Host::load(&Sources::for_workspace("/tmp/home".into(), "/tmp/work".into()))?;
//! let flags = Flags { base_url: Some(url), ..Flags::default() };
//! let agent = host.factory(flags, ModelSource::Configured)?.new_agent()?;
//! agent.followup("hello")?;
//! let outcome = agent.run_until_idle().await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod approval;
pub mod bundles;
pub mod commands;
pub mod config;
pub mod credentials;
pub mod endpoint;
mod error;
mod factory;
pub mod modes;
pub mod plugins;
mod resume_route;
pub mod source;
pub mod switches;
pub mod titles;
pub mod trust;

pub use config::{ConfigError, Loaded, Sources};
pub use credentials::{Credentials, CredentialsError};
pub use endpoint::{Endpoint, EndpointInputs, KeyFrom, KeySource};
pub use error::HostError;
pub use factory::{
    ANSWER_RESERVE_TOKENS, AgentFactory, BuildOptions, ConfigEdit, Flags, Host, ModelRoute,
    ModelSource, RowEdit,
};
pub use keel_session::Format as LogFormat;
pub use plugins::{presenters, presents_files};
pub use resume_route::{ROUTE_EVENT, resume_flags, strip_url};
pub use source::{AgentSource, SessionEntry, SessionRef, SessionSpec, SourceError};
pub use trust::{GovernedFile, Ignored, ProjectTrust, TrustDecision, TrustSource, WorkspaceTrust};
