#!/usr/bin/env bash
# The fixed part of every request (system prompt + tool schemas) with every tool of dsh 0.2's
# default set that keel has offered: the web tools (a search URL and `fetch = true`, as against
# DeepSeek's own endpoint) and one skill, so `skill` is offered too. It prints each tool's size,
# the total, and what the same set would weigh with schemas offered on demand (design B of
# issue 48: the tools a coding turn uses in full, the others as one line each in a loader tool).
# Usage: bench/tools.sh        (KEEL=path/to/keel to measure another build; default: release)
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"
if [ -z "${KEEL:-}" ]; then
  cargo build --release -q -p keel-cli -p keel-testkit
  KEEL=$PWD/target/release/keel
fi
MOCK=${MOCK:-$(dirname "$KEEL")/keel-mock-server}

work=$(mktemp -d)
home=$(mktemp -d)
trap 'kill $mock_pid 2>/dev/null || true; rm -rf "$work" "$home"' EXIT
printf 'responses:\n  - text: "hello"\n' > "$out/one.yaml"
mkdir -p "$home/skills/release-notes"
printf -- '---\nname: release-notes\ndescription: Write release notes from the git log.\n---\nRead the log.\n' \
  > "$home/skills/release-notes/SKILL.md"
rm -f "$out/tools-requests.jsonl" "$out/tools-mock.url"
"$MOCK" --script "$out/one.yaml" --record "$out/tools-requests.jsonl" > "$out/tools-mock.url" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$out/tools-mock.url" ] && break; sleep 0.1; done
url=$(head -1 "$out/tools-mock.url")
cat > "$home/config.toml" <<EOF
[[plugins]]
id = "web"
[plugins.config]
search_base_url = "$url"
fetch = true
EOF
KEEL_HOME=$home DEEPSEEK_API_KEY=sk-bench "$KEEL" --cwd "$work" --base-url "$url" \
  --approval auto ${KEEL_FLAGS:-} run "hi" > /dev/null
kill $mock_pid 2>/dev/null || true; wait $mock_pid 2>/dev/null || true

python3 - "$out/tools-requests.jsonl" <<'PY'
import json, sys
first = json.loads(open(sys.argv[1]).readline())
body = first.get("body", first)
dump = lambda v: len(json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode())
system = next((m["content"] for m in body.get("messages", []) if m.get("role") == "system"), None)
system = system or body.get("system") or body.get("instructions") or ""
tools = body.get("tools", [])
def name(t): return t.get("function", t).get("name")
def desc(t): return t.get("function", t).get("description", "")
print(f"{'tool':<20} bytes")
for t in tools:
    print(f"{name(t):<20} {dump(t)}")
sys_b, tools_b = dump(system), dump(tools)
print(f"A, every schema in full: system {sys_b} B + schemas {tools_b} B ({len(tools)} tools) = {sys_b + tools_b} B")
# B: what a coding turn uses stays in full; the rest as "name: first sentence" in a loader.
core = {"read", "write", "edit", "glob", "grep", "bash", "working_directory", "todo_write"}
kept = [t for t in tools if name(t) in core]
lines = "\n".join(f"{name(t)}: {desc(t).split('. ')[0].rstrip('.')}" for t in tools if name(t) not in core)
loader = {"type": "function", "function": {"name": "load_tools",
          "description": "Load the full schema of these tools before calling one:\n" + lines,
          "parameters": {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}},
                         "required": ["names"]}}}
b = dump(kept + [loader])
deferred = [t for t in tools if name(t) not in core]
print(f"B, {len(deferred)} schemas on demand: system {sys_b} B + schemas {b} B ({len(kept)} tools + load_tools) = {sys_b + b} B;"
      f" each first use of a deferred tool costs one more request and adds its schema "
      f"({min(map(dump, deferred))}-{max(map(dump, deferred))} B) to the history")
PY
