//! Delegation: hand one cold, self-contained prompt turn under one explicit authority grant to
//! a separate agent, track it as a background job, steer it, and read back a bounded result
//! framed as untrusted data (`specs/delegation.md`).
//!
//! ```text
//! model ─► delegate tool ─► DelegationService::delegate (provider) ─► provider job id
//!            └► JobControl::spawn "delegate-N": wait (provider) ─► result ─► job output
//!                 job_kill ─► job cancel ─► DelegationService::cancel (best effort)
//! provider reports ─► watch listener ─► Reports::deliver ─► Agent::deliver (wake or inject)
//! ```
//!
//! Modules: [`seam`] (the provider-neutral vocabulary and trait), [`inprocess`] (a tiny
//! provider for tests and demos), [`tools`] (the six tools; they know only the seam),
//! [`render`] (bounding and untrusted framing), [`reports`] (mid-flight reports and the wake
//! budget), [`review`] (the human's `/review`), [`plugin`] (the `delegate` row), [`consult`] (the consult CLI provider), [`keel`]
//! (another `keel run` process as the delegate), [`acp`] (any Agent Client Protocol agent
//! command as the delegate, keel its client through the `keel-acp-client` crate).
//!
//! The keel, acp and in-process providers keep their jobs themselves: each implements the small
//! `table::Provider` trait (its capability report, start, steer, review) and its job table
//! answers the rest of [`seam::DelegationService`] once (status, wait, result, logs, cancel,
//! events, watch; `events::EventLog` is the table's report bookkeeping). The consult provider
//! implements the seam directly: its jobs are the consult CLI's, which keeps and answers them.

#![deny(missing_docs)]

pub mod acp;
pub mod consult;
mod events;
pub mod inprocess;
pub mod keel;
pub mod plugin;
pub mod render;
pub mod reports;
pub mod review;
pub mod seam;
mod table;
pub mod tools;

pub use plugin::{DelegateConfig, DelegatePlugin, ID};
