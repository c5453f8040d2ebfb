#!/usr/bin/env bash
# End-to-end figures for keel against the loopback mock model (see bench/README.md).
# Usage: bench/run.sh [STEPS]   (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
out=bench/out
mkdir -p "$out"
cargo build --release -q -p keel-cli -p keel-testkit
KEEL=$PWD/target/release/keel
MOCK=$PWD/target/release/keel-mock-server

# A scripted task: $steps steps, each one bash call, then the answer.
python3 bench/task.py "$steps" > "$out/script.yaml"
python3 - > "$out/one.yaml" <<'PY'
print("responses:\n  - text: \"hello\"")
PY

work=$(mktemp -d)
home=$(mktemp -d)
trap 'kill $mock_pid 2>/dev/null || true; rm -rf "$work" "$home"' EXIT
# BENCH_CONFIG: a user configuration for the measured run, e.g. checkpoints off:
#   BENCH_CONFIG=$'[[plugins]]\nid = "checkpoints"\nenabled = false' bench/run.sh
if [ -n "${BENCH_CONFIG:-}" ]; then printf '%s\n' "$BENCH_CONFIG" > "$home/config.toml"; fi
# BENCH_GIT=1: the workspace is a git repository, so every confined command gets its own mount
# namespace with .git read-only (docs/sandbox.md "Protected paths").
if [ -n "${BENCH_GIT:-}" ]; then git -C "$work" init -q; fi
rm -f "$out/requests.jsonl" "$out/mock.url"
"$MOCK" --script "$out/script.yaml" --record "$out/requests.jsonl" > "$out/mock.url" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$out/mock.url" ] && break; sleep 0.1; done
url=$(head -1 "$out/mock.url")

echo "== keel ${KEEL_FLAGS:-} run: $steps steps, $steps bash calls (loopback mock model)"
# KEEL_FLAGS: extra global flags for the measured run, e.g. KEEL_FLAGS="--context managed", or
# KEEL_FLAGS="--provider anthropic" for the Messages wire ("--provider openai": Responses).
# shellcheck disable=SC2086
KEEL_HOME=$home DEEPSEEK_API_KEY=sk-bench KEEL_REPORT_RUSAGE=1 \
  /usr/bin/time -v "$KEEL" --cwd "$work" --base-url "$url" --approval auto ${KEEL_FLAGS:-} \
  run "run the steps" > "$out/answer.txt" 2> "$out/run.stderr" || true
grep -E 'keel-rusage|keel-timing|Elapsed|Maximum resident|User time|System time' "$out/run.stderr"
python3 - "$out/run.stderr" "$steps" <<'PY'
import re, sys
text = open(sys.argv[1]).read(); steps = int(sys.argv[2])
m = re.search(r"self_user_s=([\d.]+) self_sys_s=([\d.]+)", text)
if m:
    own = float(m.group(1)) + float(m.group(2))
    print(f"harness CPU (children excluded): {own*1000:.1f} ms total, {own*1000/(steps+1):.2f} ms per step")
PY
kill $mock_pid 2>/dev/null || true; wait $mock_pid 2>/dev/null || true

echo "== fixed request overhead (first request: system prompt + tool schemas as sent)"
python3 - "$out/requests.jsonl" <<'PY'
import json, sys
first = json.loads(open(sys.argv[1]).readline())
body = first.get("body", first)
# chat: a system message; messages: `system`; responses: `instructions`.
system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), None)
system = system or body.get("system") or body.get("instructions")
sys_bytes = len(json.dumps(system, ensure_ascii=False, separators=(",", ":")).encode()) if system else 0
tools_bytes = len(json.dumps(body.get("tools", []), ensure_ascii=False, separators=(",", ":")).encode())
print(f"system prompt {sys_bytes} B + tool schemas {tools_bytes} B ({len(body.get('tools', []))} tools) = {sys_bytes + tools_bytes} B")
PY

echo "== start-up to first request (10 runs of a one-step scripted task; keel-timing)"
for _ in $(seq 10); do
  KEEL_HOME=$home KEEL_REPORT_RUSAGE=1 "$KEEL" --cwd "$work" run --script "$out/one.yaml" hi 2>&1 >/dev/null | grep -o 'first_request_ms=[0-9.]*'
done | sort -t= -k2 -n | awk -F= '{a[NR]=$2} END {print "median first_request_ms=" a[int((NR+1)/2)] " (min " a[1] ", max " a[NR] ")"}'

if command -v hyperfine >/dev/null; then
  echo "== keel --version"
  hyperfine -N --warmup 5 --runs 50 "$KEEL --version" --export-json "$out/version.json" | grep -E 'Time|Range'
  echo "== keel run, start-up to answer with an in-process scripted model (upper bound of start-up to first request)"
  KEEL_HOME=$home hyperfine -N --warmup 3 --runs 30 \
    "$KEEL --cwd $work run --script $out/one.yaml hi" --export-json "$out/startup.json" | grep -E 'Time|Range'
fi
/usr/bin/time -v "$KEEL" --version 2>&1 >/dev/null | grep 'Maximum resident'
