#!/usr/bin/env bash
# The HTML session viewer end to end (release build): a synthetic session of EVENTS events
# (keel-session's generator, `examples/synth.rs`: streamed chunks, reasoning, a bash call per
# step), exported with `keel sessions export PATH --format html` (wall time, best and median of
# RUNS), then opened in headless Chromium with --dump-dom (wall time of the whole browser run,
# best and median of RUNS), next to the same browser run on an empty page (its start-up cost).
# Usage: bench/viewer.sh [EVENTS] [RUNS]   (defaults 100000, 5). Needs chromium. Honours
# CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
events=${1:-100000}
runs=${2:-5}
command -v chromium >/dev/null || { echo "chromium is needed (apt-get install chromium)" >&2; exit 1; }
cargo build --release -q -p keel-cli --bin keel
cargo build --release -q -p keel-session --example synth
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" 2>/dev/null || true' EXIT
export KEEL_HOME=$tmp/home
mkdir -p "$KEEL_HOME"
written=$("$target/release/examples/synth" "$tmp/session.jsonl" "$events")
# `events=N bytes=…`: the file packs streamed chunks into rows, so lines are not events.
written=${written#events=}
written=${written%% *}

now() { date +%s%N; }
# Best and median of a list of nanosecond figures, in ms.
stats() { sort -n | awk '{ a[NR] = $1 } END { printf "best %.0f ms, median %.0f ms", a[1] / 1e6, a[int((NR + 1) / 2)] / 1e6 }'; }

: > "$tmp/export.ns"
for _ in $(seq "$runs"); do
  t0=$(now)
  "$KEEL" sessions export "$tmp/session.jsonl" --format html > "$tmp/s.html"
  echo $(($(now) - t0)) >> "$tmp/export.ns"
done

browse() {
  local profile
  profile=$(mktemp -d "$tmp/profile.XXXX")
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --dump-dom "file://$1" 2>"$tmp/chromium.err" ||
    { echo "chromium failed on $1:" >&2; tail -5 "$tmp/chromium.err" >&2; exit 1; }
}
printf '<!DOCTYPE html><html><body>empty</body></html>\n' > "$tmp/empty.html"
: > "$tmp/open.ns"
: > "$tmp/empty.ns"
for _ in $(seq "$runs"); do
  t0=$(now)
  browse "$tmp/empty.html" > /dev/null
  echo $(($(now) - t0)) >> "$tmp/empty.ns"
  t0=$(now)
  browse "$tmp/s.html" > "$tmp/dom.html"
  echo $(($(now) - t0)) >> "$tmp/open.ns"
done

turns=$(grep -c '<section class="turn"' "$tmp/dom.html")
calls=$(grep -c 'data-call-id=' "$tmp/dom.html")
echo "session        $written events ($(wc -c < "$tmp/session.jsonl") bytes of JSONL)"
echo "page           $(wc -c < "$tmp/s.html") bytes; the browser's DOM: $turns turns, $calls tool calls"
echo "export         $(stats < "$tmp/export.ns")   (keel sessions export --format html, target ≤ 2 s)"
echo "open           $(stats < "$tmp/open.ns")   (chromium --headless --dump-dom, whole run, target ≤ 3 s)"
echo "empty page     $(stats < "$tmp/empty.ns")   (the same browser run on an empty page)"
