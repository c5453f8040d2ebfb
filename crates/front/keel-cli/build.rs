//! Link settings of the `keel` binary (Linux with glibc; see `bench/README.md`, "Peak RSS").
//!
//! - Packed relative relocations (`-z pack-relative-relocs`, `DT_RELR`, glibc ≥ 2.36, used only
//!   when the build machine's glibc has it, so a binary always runs where it was built): keel is a
//!   position-independent executable with about 47,000 relative relocations (vtables, string
//!   tables); as `RELA` entries they took 1.1 MB that the dynamic loader read, so kept resident,
//!   at every start. As `RELR` they take 18 KB.
//! - `link-order.txt` (written by `bench/link-order.sh`; x86_64, linked by rustc's lld): the
//!   code and named data a `keel run` touches (callgrind plus a native page-fault profile),
//!   placed together by the linker. Each first call of a function maps the 64 KiB of code around
//!   it; scattered over the 24 MB of code, the ~2,500 functions of a run kept ~11 MB resident,
//!   placed together about 2.9 MB. Names the linker does not find (code changed since the file
//!   was written) are skipped: a stale file costs memory, never correctness; CI's
//!   `bench/link-order.sh --check` fails when the file no longer names what the binary runs.

// A build script speaks to cargo on stdout.
#![allow(clippy::print_stdout)]

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=link-order.txt");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || env != "gnu" {
        return;
    }
    // A loader without DT_RELR refuses such a binary: pack only where the C library keel is
    // built against has it (the machine `cargo install` runs on is the one keel runs on).
    if glibc_has_dt_relr() {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let order = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("link-order.txt");
    // `--symbol-ordering-file` is an lld option: x86_64-unknown-linux-gnu links with rustc's own
    // lld (Rust ≥ 1.90, rust-toolchain.toml pins 1.95); elsewhere the system linker may be GNU ld.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch == "x86_64" && order.is_file() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether this machine's glibc loads `DT_RELR` binaries (2.36 and later define the
/// `GLIBC_ABI_DT_RELR` version a packed binary requires).
fn glibc_has_dt_relr() -> bool {
    const LIBCS: [&str; 5] = [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
        "/usr/lib64/libc.so.6",
        "/usr/lib/libc.so.6",
    ];
    let needle = b"GLIBC_ABI_DT_RELR";
    LIBCS.iter().any(|path| {
        std::fs::read(path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
    })
}
