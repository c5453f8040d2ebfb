#!/usr/bin/env bash
# Regenerate crates/front/keel-cli/link-order.txt: the functions keel executes in the bench task, which
# the linker places together (crates/front/keel-cli/build.rs, bench/README.md "Peak RSS").
# Usage: bench/link-order.sh [STEPS]   (default 30; needs valgrind)
# Names the linker no longer finds (code changed since) are skipped silently; rerun this when
# bench/rss.sh shows the resident code windows growing.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-30}
command -v valgrind >/dev/null || { echo "link-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p keel-cli -p keel-testkit
KEEL=$PWD/target/release/keel
MOCK=$PWD/target/release/keel-mock-server
work=$(mktemp -d)
trap 'kill ${mock_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
python3 bench/task.py "$steps" > "$work/script.yaml"
"$MOCK" --script "$work/script.yaml" > "$work/mock.url" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
mkdir -p "$work/cwd" "$work/home"
cg="valgrind -q --tool=callgrind --demangle=no"
KEEL_HOME=$work/home DEEPSEEK_API_KEY=sk-bench $cg --callgrind-out-file="$work/cg.run" \
  "$KEEL" --cwd "$work/cwd" --base-url "$(head -1 "$work/mock.url")" --approval auto run "run the steps" > /dev/null 2>&1
$cg --callgrind-out-file="$work/cg.version" "$KEEL" --version > /dev/null
python3 - "$work"/cg.* > crates/front/keel-cli/link-order.txt <<'PY'
import re, sys
names = set()
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = re.match(r"^c?fn=\(\d+\) (_ZN|_R)(\S*)$", line.rstrip("\n"))
        if m:
            names.add(m.group(1) + m.group(2))
print("\n".join(sorted(names)))
PY
echo "crates/front/keel-cli/link-order.txt: $(wc -l < crates/front/keel-cli/link-order.txt) functions"
