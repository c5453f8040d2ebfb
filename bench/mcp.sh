#!/usr/bin/env bash
# MCP client costs end to end (see bench/README.md), on a release build with the scripted
# model (no network), against the real servers of crates/plugins/keel-mcp/tests/node (npm ci'd here):
#  1. keel's own peak RSS with 0, 1 and 10 idle server-everything connections (per connection);
#  2. start-up: the wall time a one-answer `keel run` gains with each server alone, and with the
#     three started together (target: no more than the slowest alone).
# Usage: bench/mcp.sh [RUNS]   (default 7 runs per start-up figure, median). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-7}
out=bench/out
mkdir -p "$out"
cargo build --release -q -p keel-cli --bin keel
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel
node_dir=$PWD/crates/plugins/keel-mcp/tests/node
[ -d "$node_dir/node_modules" ] || npm ci --prefix "$node_dir" --no-audit --no-fund >/dev/null
EVERYTHING=$node_dir/node_modules/.bin/mcp-server-everything
FILESYSTEM=$node_dir/node_modules/.bin/mcp-server-filesystem
DYNAMIC=$node_dir/dynamic-server.mjs

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'responses:\n  - text: "done"\n' > "$tmp/answer.yaml"

# A project whose config names the given servers ("everything:N" = N server-everything copies,
# "filesystem", "dynamic"); prints its directory.
project() {
  local dir=$tmp/p$RANDOM$RANDOM
  mkdir -p "$dir/.keel" "$dir/files"
  echo "x" > "$dir/files/a.txt"
  for s in "$@"; do
    case $s in
      everything:*)
        for i in $(seq "${s#everything:}"); do
          printf '[mcp_servers.everything%s]\ncommand = "%s"\nargs = ["stdio"]\n' "$i" "$EVERYTHING"
        done ;;
      filesystem) printf '[mcp_servers.filesystem]\ncommand = "%s"\nargs = ["%s"]\n' "$FILESYSTEM" "$dir/files" ;;
      dynamic) printf '[mcp_servers.dynamic]\ncommand = "node"\nargs = ["%s"]\n' "$DYNAMIC" ;;
    esac
  done > "$dir/.keel/config.toml"
  echo "$dir"
}

# keel's own peak RSS (KiB, getrusage(RUSAGE_SELF) at exit) for one run in project $1.
peak() {
  local log=$tmp/peak.log
  KEEL_HOME=$tmp/home KEEL_REPORT_RUSAGE=1 "$KEEL" --cwd "$1" run --script "$tmp/answer.yaml" "[bench]" \
    > /dev/null 2> "$log"
  if grep -q "not available" "$log"; then cat "$log" >&2; exit 1; fi
  grep -o 'self_maxrss_kib=[0-9]*' "$log" | cut -d= -f2
}

# Median wall time (ms) of RUNS one-answer runs in project $1.
wall() {
  python3 - "$runs" "$KEEL" "$1" "$tmp/answer.yaml" "$tmp/home" <<'PY'
import os, statistics, subprocess, sys, time
runs, keel, cwd, script, home = int(sys.argv[1]), *sys.argv[2:]
env = dict(os.environ, KEEL_HOME=home)
times = []
for _ in range(runs + 1):
    t = time.perf_counter()
    p = subprocess.run([keel, "--cwd", cwd, "run", "--script", script, "[bench]"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    times.append((time.perf_counter() - t) * 1000)
    if p.returncode != 0 or "not available" in p.stderr:
        sys.exit(f"run failed: {p.stderr}")
print(round(statistics.median(times[1:])))
PY
}

echo "== keel's own peak RSS with idle server-everything connections (release, scripted model)"
p0=$(peak "$(project)")
p1=$(peak "$(project everything:1)")
p10=$(peak "$(project everything:10)")
echo "0 servers: ${p0} KiB; 1 server: ${p1} KiB; 10 servers: ${p10} KiB"
echo "per connection: $(( (p10 - p0) / 10 )) KiB (10 vs 0; target <= 1024 KiB), first connection $((p1 - p0)) KiB (runtime thread included)"

echo "== start-up cost over a run with no server (median of $runs, ms)"
base=$(wall "$(project)")
e=$(wall "$(project everything:1)")
f=$(wall "$(project filesystem)")
d=$(wall "$(project dynamic)")
all=$(wall "$(project everything:1 filesystem dynamic)")
slowest=$(printf '%s\n' "$e" "$f" "$d" | sort -n | tail -1)
echo "no server: ${base} ms; server-everything alone: +$((e - base)) ms; server-filesystem alone: +$((f - base)) ms; sdk server alone: +$((d - base)) ms"
echo "the three together: +$((all - base)) ms (the slowest alone: +$((slowest - base)) ms; $(nproc) cores: three node processes share them)"
