//! keel-provenance (WIP)
#![deny(missing_docs)]

pub mod hash;
pub mod jcs;
pub mod model;
pub mod receipt;
