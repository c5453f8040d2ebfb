#!/usr/bin/env bash
# Memory of a supervisor following 8 live delegations, against the same supervisor idle and
# following 1 (see bench/README.md). Real `keel run --script` processes (release build) with
# the `delegate` row on the consult provider, over the fake consult CLI
# (crates/support/keel-testkit/src/consult.rs); each delegation stays running RUN_MS.
# Usage: bench/delegate.sh [RUN_MS]   (default 4000). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
run_ms=${1:-4000}
out=bench/out
mkdir -p "$out"
cargo build --release -q -p keel-cli -p keel-testkit --bin keel --bin fake-consult
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel
FAKE=$target/release/fake-consult

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The model script of a supervisor delegating N tasks in one step, then calling
# delegate_status while they all run, then job_output waiting for the last one. Completion
# notices may wake it afterwards (within the jobs plugin's wake budget): spare answers follow.
# N = 0 is the idle supervisor: the same config, one answer, no delegation.
script() {
  local n=$1 f=$out/delegate-$1.yaml
  if [ "$n" -eq 0 ]; then
    printf 'responses:\n  - match: { last_user_contains: "[bench]" }\n    text: "Nothing to delegate."\n' > "$f"
    echo "$f"
    return
  fi
  {
    echo 'responses:'
    echo '  - match: { last_user_contains: "[bench]" }'
    echo "    text: \"Delegating $n tasks.\""
    echo '    tool_calls:'
    for i in $(seq "$n"); do
      echo "      - { name: delegate, arguments: { prompt: \"Task $i: read src/ and report what module $i does.\", label: \"task $i\" } }"
    done
    echo "  - match: { last_tool_result_contains: \"Started delegation delegate-$n \" }"
    echo '    tool_calls: [ { name: delegate_status, arguments: {} } ]'
    echo "  - match: { last_tool_result_contains: \"delegate-$n [running]\" }"
    echo "    tool_calls: [ { name: job_output, arguments: { job_id: delegate-$n, wait: true, timeout_ms: 60000 } } ]"
    echo '  - text: "All done."'
    for _ in 1 2 3 4 5; do echo '  - text: "noted"'; done
  } > "$f"
  echo "$f"
}

# One run with N delegations: prints
# "<keel's peak RSS KiB> <max sampled VmRSS KiB> <max live followers> <wall s>".
measure() {
  local n=$1 work=$tmp/$1 home=$tmp/$1-home log=$out/delegate-$1.stderr
  local yaml
  yaml=$(script "$n")
  mkdir -p "$work/.keel" "$work/src" "$home" "$work/consult-state"
  cat > "$work/.keel/config.toml" <<TOML
[[plugins]]
id = "delegate"
enabled = true
[plugins.config]
provider = "consult"
consult_path = "$FAKE"
TOML
  # keel is forked by this shell, not by the sampler: getrusage's maxrss of a process counts
  # the RSS of what it was forked from, and a Python parent would lend it Python's.
  KEEL_HOME=$home KEEL_REPORT_RUSAGE=1 \
  FAKE_CONSULT_STATE_DIR=$work/consult-state FAKE_CONSULT_RUN_MS=$run_ms \
    "$KEEL" --cwd "$work" --approval auto run --script "$yaml" "[bench] go" \
    > /dev/null 2> "$log" &
  local pid=$! t0=$SECONDS sampled rc=0 peak
  # Every 20 ms: keel's VmRSS, and the fake consult `events --follow` processes alive.
  sampled=$(python3 -c '
import os, re, sys, time
pid = sys.argv[1]
max_rss = max_followers = 0
while True:
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        break
    m = re.search(r"VmRSS:\s+(\d+)", status)
    if not m:  # a zombie: keel has exited
        break
    max_rss = max(max_rss, int(m.group(1)))
    followers = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if os.path.basename(cmd[0]) == b"fake-consult" and b"events" in cmd and b"--follow" in cmd:
            followers += 1
    max_followers = max(max_followers, followers)
    time.sleep(0.02)
print(max_rss, max_followers)
' "$pid")
  wait "$pid" || rc=$?
  peak=$(grep -o 'self_maxrss_kib=[0-9]*' "$log" | cut -d= -f2 || true)
  if [ "$rc" -ne 0 ] || [ -z "$peak" ] || grep -q '✗' "$log" \
     || { [ "$n" -gt 0 ] && ! grep -q '→ job_output' "$log"; }; then
    cat "$log" >&2
    echo "the run with $n delegations did not go as scripted (exit $rc; see $log)" >&2
    return 1
  fi
  echo "$peak $sampled $((SECONDS - t0))"
}

echo "== supervisor peak RSS: idle, following 1 and 8 live delegations (consult provider over the fake, each running ${run_ms} ms)"
r0=$(measure 0)
r1=$(measure 1)
r8=$(measure 8)
read -r p0 s0 _ w0 <<< "$r0"
read -r p1 s1 f1 w1 <<< "$r1"
read -r p8 s8 f8 w8 <<< "$r8"
if [ "$f8" -lt 8 ]; then
  echo "only $f8 'events --follow' followers were seen alive at once (expected 8)" >&2
  exit 1
fi
echo "idle:           peak RSS ${p0} KiB (sampled VmRSS max ${s0} KiB; the run lasts ms), ~${w0} s"
echo "1 delegation:   peak RSS ${p1} KiB (sampled VmRSS max ${s1} KiB), ~${w1} s, ${f1} follower live"
echo "8 delegations:  peak RSS ${p8} KiB (sampled VmRSS max ${s8} KiB), ~${w8} s, ${f8} followers live at once"
echo "difference 8 vs idle: $((p8 - p0)) KiB (target <= 2048 KiB); 8 vs 1: $((p8 - p1)) KiB ($(( (p8 - p1) / 7 )) KiB per extra delegation)"
echo "(peak RSS: keel's own getrusage(RUSAGE_SELF) maxrss at exit, KEEL_REPORT_RUSAGE; the fake consult children are not counted)"
