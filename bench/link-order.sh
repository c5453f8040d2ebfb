#!/usr/bin/env bash
# The function order of the `keel` binary, crates/front/keel-cli/link-order.txt: the functions a
# headless `keel run` executes (callgrind over the bench task and `keel --version`), which the
# linker places together (crates/front/keel-cli/build.rs; bench/README.md, "Link order").
#
# Usage: bench/link-order.sh [STEPS]           rewrite the list from the release build (default 30)
#        bench/link-order.sh --check [STEPS]   CI: fail when fewer than LINK_ORDER_MIN_PCT (99) % of
#                                              the functions the release build executes are in the
#                                              committed list, or when the task's peak RSS is above
#                                              LINK_ORDER_MAX_RSS_KIB (12288; 0: not checked)
# Needs valgrind. The names carry rustc's hashes and LTO's `.llvm.N` suffixes, which change with
# the code: names the linker no longer finds are skipped silently, so a stale list costs memory
# (peak RSS of `bench/run.sh 30` 10.5 MiB fresh, 12-19 MiB stale), never correctness. The check
# is what makes it fail loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
steps=${1:-30}
min_pct=${LINK_ORDER_MIN_PCT:-99}
max_rss_kib=${LINK_ORDER_MAX_RSS_KIB:-12288}
# LINK_ORDER_RSS_ADVISORY=1: measure and print the peak RSS but do not fail on it. ThinLTO's
# `.llvm.N` suffixes depend on the directory the code is built in, so a list made in one checkout
# orders only ~91 % of the hot functions of a build in another (the rest keep their place in the
# binary): peak RSS there was 14.6 MiB against 10.5 MiB where the list was made.
rss_advisory=${LINK_ORDER_RSS_ADVISORY:-0}
list=crates/front/keel-cli/link-order.txt
command -v valgrind >/dev/null || { echo "link-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p keel-cli -p keel-testkit
KEEL=$PWD/target/release/keel
MOCK=$PWD/target/release/keel-mock-server
work=$(mktemp -d)
trap 'kill ${mock_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
python3 bench/task.py "$steps" > "$work/script.yaml"

# Starts a mock model for one run of the task; its URL in $url.
start_mock() {
  rm -f "$work/mock.url"
  "$MOCK" --script "$work/script.yaml" > "$work/mock.url" &
  mock_pid=$!
  for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
  url=$(head -1 "$work/mock.url")
  rm -rf "$work/cwd" "$work/home" && mkdir -p "$work/cwd" "$work/home"
}
stop_mock() { kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; }

# The Rust functions (mangled names) the task and `--version` execute, one a line, sorted.
# KEEL_REPORT_RUSAGE=1 as in bench/run.sh: its timing hook and report are code of the measured
# run (left out of the list, they cost the figure 2 MiB).
start_mock
cg="valgrind -q --tool=callgrind --demangle=no"
KEEL_HOME=$work/home DEEPSEEK_API_KEY=sk-bench KEEL_REPORT_RUSAGE=1 $cg --callgrind-out-file="$work/cg.run" \
  "$KEEL" --cwd "$work/cwd" --base-url "$url" --approval auto run "run the steps" > /dev/null 2> "$work/cg.err" \
  || { tail -5 "$work/cg.err" >&2; echo "link-order.sh: keel failed under callgrind" >&2; exit 2; }
stop_mock
$cg --callgrind-out-file="$work/cg.version" "$KEEL" --version > /dev/null
python3 - "$work/cg.run" "$work/cg.version" > "$work/hot.txt" <<'PY'
import re, sys
names = set()
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        # `fn=(id) name` the first time a name appears; `'2` marks callgrind's recursion levels.
        m = re.match(r"^c?fn=\(\d+\) ((?:_ZN|_R)\S*?)(?:'\d+)?$", line.rstrip("\n"))
        if m:
            names.add(m.group(1))
print("\n".join(sorted(names)))
PY

if [ -z "$check" ]; then
  cp "$work/hot.txt" "$list"
  echo "$list: $(wc -l < "$list") functions"
  exit 0
fi

status=0
python3 - "$work/hot.txt" "$list" "$min_pct" <<'PY' || status=1
import re, sys
# Staleness is judged by the functions, not by ThinLTO's `.llvm.N` suffix (which depends on the
# directory the build ran in, not on the code).
stem = lambda names: {re.sub(r"\.llvm\.\d+$", "", n) for n in names}
hot_exact = set(open(sys.argv[1]).read().split())
listed_exact = set(open(sys.argv[2]).read().split())
hot, listed = stem(hot_exact), stem(listed_exact)
pct = 100 * len(hot & listed) / max(len(hot), 1)
exact = 100 * len(hot_exact & listed_exact) / max(len(hot_exact), 1)
print(f"link order: {len(hot & listed)} of the {len(hot)} functions the release build executes "
      f"are in {sys.argv[2]} ({pct:.1f} %, at least {sys.argv[3]} % required; "
      f"{exact:.1f} % by exact name, which is what the linker orders)")
if pct < float(sys.argv[3]):
    print(f"link order: the list is stale: run bench/link-order.sh and commit {sys.argv[2]}")
    sys.exit(1)
PY

# Peak RSS of the task, three runs, the binary evicted from the page cache before each (as on a
# machine where keel is not running; a freshly linked binary's page cache shows more).
if [ "$max_rss_kib" != 0 ]; then
  rss=()
  for _ in 1 2 3; do
    start_mock
    python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$KEEL"
    # keel's own peak (KEEL_REPORT_RUSAGE=1), forked from this shell: a process's maxrss counts
    # the process it was forked from, so not from Python.
    KEEL_HOME=$work/home DEEPSEEK_API_KEY=sk-bench KEEL_REPORT_RUSAGE=1 "$KEEL" --cwd "$work/cwd" \
      --base-url "$url" --approval auto run "run the steps" > /dev/null 2> "$work/run.err" || true
    r=$(grep -o 'self_maxrss_kib=[0-9]*' "$work/run.err" | cut -d= -f2 || true)
    rss+=("${r:--1}")
    stop_mock
  done
  median=$(printf '%s\n' "${rss[@]}" | sort -n | sed -n 2p)
  echo "peak RSS of the $steps-step task: ${rss[*]} KiB (median $median, at most $max_rss_kib)"
  if [[ " ${rss[*]} " == *" -1 "* ]]; then
    echo "link order: keel did not finish the task (no keel-rusage line)"; status=1
  elif [ "$median" -gt "$max_rss_kib" ] && [ "$rss_advisory" = 1 ]; then
    echo "link order: peak RSS above $max_rss_kib KiB (advisory here: LINK_ORDER_RSS_ADVISORY=1)"
  elif [ "$median" -gt "$max_rss_kib" ]; then
    echo "link order: peak RSS above $max_rss_kib KiB: run bench/link-order.sh; if the fresh list does not bring it back, bench/rss.sh shows where the memory goes"
    status=1
  fi
fi
exit "$status"
