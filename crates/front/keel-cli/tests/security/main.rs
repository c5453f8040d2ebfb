//! End-to-end: the holes found by attacking keel (issue 44), each closed and tested with the
//! real binary against a loopback mock model. One test binary for all of them (each test
//! binary links the whole stack), one module per hole.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod git;
mod instructions;
mod protected;
mod resume;
mod web;
mod writes;
