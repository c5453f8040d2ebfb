#!/usr/bin/env bash
# The web app streaming an answer (issue 47: "streaming at 100 tokens/s without dropped
# frames"; figures in bench/README.md, "The web app"): a release `keel serve` on a loopback
# keel-mock-server whose answer streams CHARS characters, 4 a chunk (about a token), one chunk
# every PACE ms (default 8: with the mock's own time per chunk, about 100 tokens a second), and
# Chromium (Playwright) showing it in the page as
# it streams, Markdown rendered once per frame. bench/web_stream.py reports the frames the page
# painted while the answer streamed, the longest gap between two, the frames dropped (a gap
# of n frame periods drops n-1) and the long tasks (over 50 ms) the browser saw.
# Usage: [PACE=ms] bench/web_stream.sh [CHARS] [RUNS]   (defaults 2400, 3). Honours
# CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
chars=${1:-2400}
runs=${2:-3}
python=crates/front/keel-cli/tests/serve/web/.venv/bin/python
[ -x "$python" ] || { echo "no Playwright venv: run .ci/run's playwright step first" >&2; exit 1; }
profile=${KEEL_BENCH_PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build --release -q -p keel-cli --bin keel
  cargo build --release -q -p keel-testkit --bin keel-mock-server
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp" 2>/dev/null || true
}
trap cleanup EXIT
# An answer of Markdown as models write it: paragraphs, a list, inline code, a code block.
python3 - "$chars" "${PACE:-8}" "$runs" > "$tmp/script.json" <<'PY'
import json, sys
n, pace, runs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
unit = ("The **stream** goes on: `keel serve` sends each chunk as it comes.\n\n"
        "- one point\n- another point with `code`\n\n```rust\nfn main() { println!(\"hi\"); }\n```\n\n")
text = (unit * (n // len(unit) + 1))[:n]
# One response a run (the mock answers each once): "stream it #N.".
print(json.dumps({"responses": [{"match": {"last_user_contains": f"stream it #{i + 1}."}, "text": text,
                                 "chunk_size": 4, "pace_ms": pace} for i in range(runs)]}))
PY
"$target/$profile/keel-mock-server" --script "$tmp/script.json" > "$tmp/mock.out" 2> "$tmp/mock.err" &
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/mock.out" ] && break; sleep 0.05; done
mock=$(head -1 "$tmp/mock.out")
mkdir -p "$tmp/ws"
KEEL_HOME=$tmp/home "$target/$profile/keel" --base-url "$mock" --cwd "$tmp/ws" serve --listen 127.0.0.1:0 > "$tmp/serve.out" 2> "$tmp/serve.err" &
pids+=($!)
for _ in $(seq 200); do grep -q '^keel serve: ' "$tmp/serve.out" && break; sleep 0.05; done
url=$(sed -n 's/^keel serve: //p' "$tmp/serve.out")
"$python" bench/web_stream.py "$url" "$tmp/ws" "$runs" "$chars"
