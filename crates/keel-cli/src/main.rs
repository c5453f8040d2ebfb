//! The `keel` binary.

mod config;

fn main() {}
