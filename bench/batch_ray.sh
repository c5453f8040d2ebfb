#!/usr/bin/env bash
# `keel batch --engine ray` vs `--engine local` on this machine, the same tasks against the
# loopback mock model: wall of each, their ratio, and Ray's submission + collection overhead per
# task (docs/batch.md). Needs Ray: RAY=path/to/ray, else the venv .ci/run makes for the tests.
# Usage: bench/batch_ray.sh [TASKS] [CONCURRENCY] [STEPS]   (default 20 4 30)
set -euo pipefail
cd "$(dirname "$0")/.."
tasks=${1:-20}; conc=${2:-4}; steps=${3:-30}
ray=${RAY:-$PWD/crates/front/keel-cli/tests/ray/.venv/bin/ray}
[ -x "$ray" ] || { echo "no ray at $ray: set RAY or run .ci/run's ray step"; exit 1; }
out=bench/out/batch-ray
mkdir -p "$out"
cargo build --release -q -p keel-cli -p keel-testkit
python3 bench/batch_ray.py "$PWD/target/release/keel" "$PWD/target/release/keel-mock-server" \
  "$ray" "$tasks" "$conc" "$steps" "$out"
