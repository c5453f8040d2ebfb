#!/usr/bin/env bash
# Crash campaign on a release build: SIGKILL the real keel binary at seeded random instants of a
# long scripted session, resume, repeat; check after every kill that the log kept its committed
# prefix, that no tool call ran twice, that no tool process outlived keel (within 1 s) and that
# `keel sessions check` says valid or repairable. The suite runs the same test with 20 kills.
# Usage: bench/crash.sh [KILLS] [SEED]   (default 500 kills, the suite's seed)
set -euo pipefail
cd "$(dirname "$0")/.."
export KEEL_CRASH_KILLS=${1:-500}
[ -n "${2:-}" ] && export KEEL_CRASH_SEED=$2
cargo test --release -q -p keel-cli --test crash_campaign -- --nocapture 2>&1 |
  grep -E -A6 "crash campaign|final resume|kill [0-9]+:|test result|panicked"
