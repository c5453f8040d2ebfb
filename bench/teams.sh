#!/usr/bin/env bash
# Memory of a parent with 8 live subagents (agent teams), against the same parent idle and
# with 1 (see bench/README.md). Real `keel run --script` processes (release build): the
# parent starts N background subagents in one step; each child runs one `bash` (a sleep of
# RUN_S seconds, so all N are alive and in a turn at once), answers, and waits for a message;
# the parent lists them, and the run ends when only waiting children are left.
# Usage: bench/teams.sh [RUN_S]   (default 2). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
run_s=${1:-2}
out=bench/out
mkdir -p "$out"
cargo build --release -q -p keel-cli --bin keel
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# N = 0: the same parent answering at once, no child.
script() {
  local n=$1 f=$out/teams-$1.yaml
  {
    echo 'responses:'
    if [ "$n" -eq 0 ]; then
      echo '  - match: { last_user_contains: "[bench]" }'
      echo '    text: "Nothing to start."'
    else
      echo '  - match: { last_user_contains: "[bench]" }'
      echo "    text: \"Starting $n helpers.\""
      echo '    tool_calls:'
      for i in $(seq "$n"); do
        echo "      - { name: subagent, arguments: { description: \"helper $i\", prompt: \"Child task $i: wait, then say done.\", run_in_background: true } }"
      done
      echo "  - match: { last_tool_result_contains: \"Started subagent subagent-$n \" }"
      echo '    tool_calls: [ { name: list_agents, arguments: {} } ]'
      echo "  - match: { last_tool_result_contains: \"working\" }"
      echo '    text: "They are working."'
      for _ in $(seq "$n"); do
        echo '  - match: { last_user_contains: "Child task" }'
        echo "    tool_calls: [ { name: bash, arguments: { command: \"sleep $run_s; echo slept\", description: \"wait\" } } ]"
      done
      for _ in $(seq "$n"); do
        echo '  - match: { last_tool_result_contains: "slept" }'
        echo '    text: "done"'
      done
      for _ in $(seq "$n"); do echo '  - text: "noted"'; done
    fi
  } > "$f"
  echo "$f"
}

# One run with N children: prints "<keel's peak RSS KiB> <most sleeps alive at once> <wall s>".
measure() {
  local n=$1 work=$tmp/$1 home=$tmp/$1-home log=$out/teams-$1.stderr yaml
  yaml=$(script "$n")
  mkdir -p "$work" "$home"
  KEEL_HOME=$home KEEL_REPORT_RUSAGE=1 \
    "$KEEL" --cwd "$work" --approval auto run --script "$yaml" "[bench] go" \
    > /dev/null 2> "$log" &
  local pid=$! t0=$SECONDS sleeps rc=0 peak
  sleeps=$(python3 -c '
import os, sys, time
pid, arg = sys.argv[1], sys.argv[2].encode()
most = 0
while os.path.exists(f"/proc/{pid}/status") and "zombie" not in open(f"/proc/{pid}/status").read():
    alive = 0
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmd = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if os.path.basename(cmd[0]) == b"sleep" and cmd[1:2] == [arg]:
                alive += 1
    most = max(most, alive)
    time.sleep(0.02)
print(most)
' "$pid" "$run_s")
  wait "$pid" || rc=$?
  peak=$(grep -o 'self_maxrss_kib=[0-9]*' "$log" | cut -d= -f2 || true)
  if [ "$rc" -ne 0 ] || [ -z "$peak" ]; then
    cat "$log" >&2
    echo "the run with $n children failed (exit $rc; see $log)" >&2
    return 1
  fi
  echo "$peak $sleeps $((SECONDS - t0))"
}

echo "== parent peak RSS: idle, with 1 and with 8 live subagents (each in a ${run_s} s bash call, then waiting)"
read -r p0 _ w0 <<< "$(measure 0)"
read -r p1 s1 w1 <<< "$(measure 1)"
read -r p8 s8 w8 <<< "$(measure 8)"
if [ "$s8" -lt 8 ]; then
  echo "only $s8 children were in their bash call at once (expected 8)" >&2
  exit 1
fi
echo "idle:        peak RSS ${p0} KiB, ~${w0} s"
echo "1 child:     peak RSS ${p1} KiB, ~${w1} s"
echo "8 children:  peak RSS ${p8} KiB, ~${w8} s, ${s8} in a turn at once"
echo "per child: $(( (p8 - p0) / 8 )) KiB over idle; $(( (p8 - p1) / 7 )) KiB per extra child over 1 (target <= 3072 KiB each)"
echo "(peak RSS: keel's own getrusage(RUSAGE_SELF) maxrss at exit, KEEL_REPORT_RUSAGE; the children's bash processes are not counted)"
