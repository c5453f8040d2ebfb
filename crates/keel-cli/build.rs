//! Link settings of the `keel` binary.
//!
//! On Linux with glibc, the binary is linked with packed relative relocations
//! (`-z pack-relative-relocs`, `DT_RELR`, glibc ≥ 2.36). keel is a position-independent
//! executable with about 47,000 relative relocations (vtables, string tables); as `RELA` entries
//! they take 1.1 MB that the dynamic loader reads at every start, so every `keel` process had
//! those pages resident. As `RELR` they take a few kilobytes. See `bench/README.md`, "Peak RSS".

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
