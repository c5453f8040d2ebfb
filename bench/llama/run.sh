#!/usr/bin/env bash
# Opt-in compatibility test against a real llama.cpp llama-server (docs/local-servers.md): builds
# llama-server and fetches the model (bench/llama/setup.sh, cached), then runs the ignored tests
# of crates/front/keel-cli/tests/real_llama.rs one at a time. Not part of CI.
# Usage: bench/llama/run.sh [TEST-NAME-FILTER]
#   KEEL_LLAMA_CACHE, KEEL_LLAMA_JOBS: see setup.sh; KEEL_LLAMA_THREADS: llama-server --threads
#   (default 1). Extra cargo flags (e.g. -j 1) go in CARGO_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/../.."
start=$(date +%s)
eval "$(bench/llama/setup.sh)"
echo "== setup: $(( $(date +%s) - start )) s" >&2
export KEEL_LLAMA_SERVER KEEL_LLAMA_MODEL KEEL_LLAMA_TEMPLATES
start=$(date +%s)
# shellcheck disable=SC2086
cargo test ${CARGO_FLAGS:-} -p keel-cli --test real_llama -- --ignored --test-threads=1 --nocapture "$@"
echo "== tests: $(( $(date +%s) - start )) s" >&2
