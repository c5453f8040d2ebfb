#!/usr/bin/env bash
# The terminal UI end to end (release build, in a tmux pane): a session of about 10,000 events
# made by a scripted run of STEPS tool calls, then `keel resume` of it in the UI, once printing
# the history into the terminal's scrollback (the default) and once on the alternate screen
# (--alt-screen): the time until the resumed session is on screen, keel's resident memory with
# it in view, and its CPU while idle for IDLE seconds (no busy redraw).
# Usage: bench/tui.sh [STEPS] [IDLE]   (defaults 1000, 10). Needs tmux. Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-1000}
idle=${2:-10}
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 1; }
cargo build --release -q -p keel-cli --bin keel
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel
tmp=$(mktemp -d)
sock=keel-bench-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/ws" "$tmp/home"
printf 'line one\nline two\n' > "$tmp/ws/a.txt"
{
  echo 'responses:'
  for i in $(seq "$steps"); do
    echo "  - text: \"Step $i: reading the file again, **carefully**.\""
    echo "    tool_calls: [ { name: read, arguments: { path: a.txt } } ]"
  done
  echo '  - text: "Done."'
} > "$tmp/script.yaml"
export KEEL_HOME=$tmp/home
"$KEEL" --cwd "$tmp/ws" -c agent.max_steps=$((steps + 10)) run --script "$tmp/script.yaml" "[bench] read it $steps times" > /dev/null 2>&1
session=$(ls -d "$tmp"/home/sessions/*/session-* | head -1)
events=$(($(wc -l < "$session/session.jsonl") - 1))
hz=$(getconf CLK_TCK)
echo "session: $events events ($steps tool calls)"
measure() { # $1: label, $2: extra flag
  tmux -L "$sock" kill-server 2>/dev/null || true
  local t0 t1 pid rss hwm c0 c1
  t0=$(date +%s%N)
  tmux -L "$sock" -f /dev/null new-session -d -x 200 -y 60 \
    "KEEL_HOME=$KEEL_HOME $KEEL --cwd $tmp/ws $2 resume $(basename "$session") --script $tmp/script.yaml; sleep 60"
  for _ in $(seq 1000); do
    tmux -L "$sock" capture-pane -p | grep -q "resumed session" && break
    sleep 0.01
  done
  t1=$(date +%s%N)
  pid=$(pgrep -n -f "$KEEL --cwd $tmp/ws $2 *resume")
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
  c0=$(ticks); sleep "$idle"; c1=$(ticks)
  echo "$1: on screen after $(( (t1 - t0) / 1000000 )) ms; VmRSS ${rss} KiB, peak ${hwm} KiB (target <= 40 MiB); idle CPU over ${idle} s: $(( (c1 - c0) * 1000 / hz )) ms = $(awk -v c=$((c1 - c0)) -v hz="$hz" -v s="$idle" 'BEGIN { printf "%.2f", c / hz / s * 100 }')% (target <= 0.5%)"
}
measure "scrollback (default)" ""
measure "alternate screen" "--alt-screen"
