#!/usr/bin/env bash
# Start-up with 20 installed plugin bundles against none (issue 49's target: at most 10 ms more):
# `keel --version`, and a headless `keel run` on a scripted model (start-up, the first request,
# the answer). Each plugin has two commands, an agent, a skill and a PreToolUse hook (which the
# run never fires); none has an MCP server (a server's start-up is the server's own).
# Usage: bench/plugins.sh [RUNS]   (KEEL=path/to/keel to measure another build; default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
if [ -z "${KEEL:-}" ]; then
  cargo build --release -q -p keel-cli
  KEEL=$PWD/target/release/keel
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
market=$tmp/market
mkdir -p "$market/.claude-plugin" "$tmp/home0" "$tmp/home20" "$tmp/ws"
entries=""
for i in $(seq -w 1 20); do
  p=$market/plugins/p$i
  mkdir -p "$p/.claude-plugin" "$p/commands" "$p/agents" "$p/skills/s$i" "$p/hooks"
  printf '{"name": "p%s", "version": "1.0.0", "description": "bench plugin %s"}\n' "$i" "$i" > "$p/.claude-plugin/plugin.json"
  printf -- '---\ndescription: review %s\n---\nReview $ARGUMENTS\n' "$i" > "$p/commands/review$i.md"
  printf 'Explain $ARGUMENTS\n' > "$p/commands/explain$i.md"
  printf -- '---\nname: helper%s\ndescription: helps %s\ntools: read, grep\n---\nYou help.\n' "$i" "$i" > "$p/agents/helper$i.md"
  printf -- '---\nname: s%s\ndescription: skill %s\n---\nDo it.\n' "$i" "$i" > "$p/skills/s$i/SKILL.md"
  printf '{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]}}\n' > "$p/hooks/hooks.json"
  entries="$entries${entries:+,}{\"name\": \"p$i\", \"source\": \"./plugins/p$i\"}"
done
printf '{"name": "bench", "plugins": [%s]}\n' "$entries" > "$market/.claude-plugin/marketplace.json"
git -C "$market" init -q
git -C "$market" add -A
git -C "$market" -c user.email=b@b -c user.name=b commit -qm bench
KEEL_HOME=$tmp/home20 "$KEEL" plugin marketplace add "$market" > /dev/null
for i in $(seq -w 1 20); do KEEL_HOME=$tmp/home20 "$KEEL" plugin install "p$i@bench" > /dev/null; done
printf 'responses:\n  - text: "hello"\n' > "$tmp/one.yaml"

# One run first: a failure is shown, not timed.
KEEL_HOME=$tmp/home20 HOME=$tmp "$KEEL" --cwd "$tmp/ws" run --script "$tmp/one.yaml" hi > /dev/null
echo "== keel --version: 20 plugins vs none"
farm-bench -n "$runs" --vs "env KEEL_HOME=$tmp/home0 $KEEL --version" \
  -- env KEEL_HOME="$tmp/home20" "$KEEL" --version
echo "== keel run (scripted model): 20 plugins vs none"
farm-bench -n "$runs" --vs "env KEEL_HOME=$tmp/home0 HOME=$tmp $KEEL --cwd $tmp/ws run --script $tmp/one.yaml hi" \
  -- env KEEL_HOME="$tmp/home20" HOME="$tmp" "$KEEL" --cwd "$tmp/ws" run --script "$tmp/one.yaml" hi
