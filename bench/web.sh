#!/usr/bin/env bash
# The web app (issue 47, docs/web-app.md; figures in bench/README.md, "The web app"): a synthetic
# session of EVENTS events (keel-session's `examples/synth.rs`) stored in a temp $KEEL_HOME, a
# release `keel serve` on it, and Chromium driven by Playwright (the venv of
# crates/front/keel-cli/tests/serve/web, which .ci/run makes):
#   - opening the session: first paint and the whole session shown (median and best of RUNS);
#   - the server's private memory before and with 5 tabs on the session;
#   - the JavaScript and CSS the page loads (bench/web_weight.py), raw and gzip.
# Usage: bench/web.sh [EVENTS] [RUNS]   (defaults 1000, 5). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-1000}
runs=${2:-5}
python=crates/front/keel-cli/tests/serve/web/.venv/bin/python
[ -x "$python" ] || { echo "no Playwright venv: run .ci/run's playwright step first" >&2; exit 1; }
# KEEL_BENCH_PROFILE=debug measures a debug build already there (a quick try of the script).
profile=${KEEL_BENCH_PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build --release -q -p keel-cli --bin keel
  cargo build --release -q -p keel-session --example synth
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
tmp=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$tmp" 2>/dev/null || true
}
trap cleanup EXIT
export KEEL_HOME=$tmp/home
"$target/$profile/examples/synth" "$tmp/session.jsonl" "$events" > "$tmp/synth.out"
id=$(head -1 "$tmp/session.jsonl" | python3 -c 'import json,sys; h=json.loads(sys.stdin.read()); print(h.get("id") or h.get("sessionId") or h["data"]["id"])')
mkdir -p "$KEEL_HOME/sessions/--bench--/$id"
cp "$tmp/session.jsonl" "$KEEL_HOME/sessions/--bench--/$id/session.jsonl"
# `events=N …`: the generator writes whole steps, so N may be above EVENTS; seqs run 0..N-1.
written=$(sed -n 's/^events=\([0-9]*\).*/\1/p' "$tmp/synth.out")
last=$((written - 1))
DEEPSEEK_API_KEY=sk-bench "$target/$profile/keel" serve --listen 127.0.0.1:0 > "$tmp/serve.out" 2> "$tmp/serve.err" &
pid=$!
for _ in $(seq 200); do grep -q '^keel serve: ' "$tmp/serve.out" && break; sleep 0.05; done
url=$(sed -n 's/^keel serve: //p' "$tmp/serve.out")
echo "session: $(cat "$tmp/synth.out"); last seq $last"
"$python" bench/web_paint.py "$url" "$id" "$last" "$pid" "$runs"
"$python" bench/web_weight.py "$url"
