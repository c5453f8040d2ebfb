#!/usr/bin/env bash
# Checkpoints on vs off: PAIRS interleaved pairs (default 20) of a STEPS-step scripted task
# (default 30; bench/task.py, one `bash` call appending to a file per step, so every step
# takes a checkpoint), each in a fresh workspace and $KEEL_HOME, with the in-process scripted
# model. Prints keel's own CPU (getrusage self, KEEL_REPORT_RUSAGE=1) and the CPU with its
# children, per run, for both. Interleaving keeps a busy machine's noise on both sides.
# Usage: bench/checkpoints.sh [PAIRS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
pairs=${1:-20}
steps=${2:-30}
cargo build --release -q -p keel-cli
KEEL=$PWD/target/release/keel
script=$(mktemp)
trap 'rm -f "$script"' EXIT
python3 bench/task.py "$steps" > "$script"
for _ in $(seq "$pairs"); do
  for mode in on off; do
    work=$(mktemp -d)
    home=$(mktemp -d)
    if [ "$mode" = off ]; then
      printf '[[plugins]]\nid = "checkpoints"\nenabled = false\n' > "$home/config.toml"
    fi
    KEEL_HOME=$home KEEL_REPORT_RUSAGE=1 "$KEEL" --cwd "$work" --approval auto \
      run --script "$script" "run the steps" 2>&1 >/dev/null |
      grep -o 'self_user_s=.*' | sed 's/[a-z_]*=//g' | awk -v m="$mode" '{print m, $1 + $2, $4 + $5}'
    rm -rf "$work" "$home"
  done
done | awk -v steps="$steps" '
  { own[$1] += $2; kids[$1] += $3; n[$1]++ }
  END {
    for (m in n) { o[m] = own[m] * 1000 / n[m]; t[m] = (own[m] + kids[m]) * 1000 / n[m] }
    printf "checkpoints on:  own CPU %.1f ms/run (%.2f ms/step), with children %.1f ms/run\n", o["on"], o["on"] / steps, t["on"]
    printf "checkpoints off: own CPU %.1f ms/run (%.2f ms/step), with children %.1f ms/run\n", o["off"], o["off"] / steps, t["off"]
    printf "overhead: own CPU %+.0f%%, with children %+.0f%% (%d pairs)\n", (o["on"] / o["off"] - 1) * 100, (t["on"] / t["off"] - 1) * 100, n["on"]
  }'
