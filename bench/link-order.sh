#!/usr/bin/env bash
# The function order of the `keel` binary, crates/front/keel-cli/link-order.txt: the code (and the
# named read-only data) a headless `keel run` touches, which the linker places together
# (crates/front/keel-cli/build.rs; bench/README.md, "Link order").
#
# Usage: bench/link-order.sh [STEPS]           rewrite the list from the release build (default 30)
#        bench/link-order.sh --check [STEPS]   CI: fail when fewer than LINK_ORDER_MIN_PCT (99) % of
#                                              the functions the release build executes are in the
#                                              committed list, or when the task's peak RSS is above
#                                              LINK_ORDER_MAX_RSS_KIB (10240; 0: not checked)
#
# Rewriting takes two profiles of the 30-step task and `--version`:
# 1. callgrind: every function executed under valgrind (a complete list of what runs there);
# 2. page faults (perf, with bench/link-order/madv.so preloaded so that each page faults alone):
#    what runs only natively and so never under valgrind (Landlock and mount-namespace set-up,
#    the pidfd reaper, SHA and CRC code chosen by CPU feature) and the data keel reads. One
#    fault names only the first symbol touched on its page, so the binary is linked again with
#    the grown list (from the objects rustc kept, `-C save-temps`: a second each) and profiled
#    again, LINK_ORDER_ROUNDS (10) times.
# Needs valgrind, perf (linux-perf; without it only step 1 runs) and a C compiler. The names
# carry rustc's hashes and LTO's `.llvm.N` suffixes, which change with the code (not with the
# directory: the release profile has no debug info, whose paths fed the suffixes): names the
# linker no longer finds are skipped silently, so a stale list costs memory (peak RSS of
# `bench/run.sh 30` 9.4 MiB fresh, 12-19 MiB stale), never correctness. The check is what makes it
# fail loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
check=
if [ "${1:-}" = --check ]; then check=1; shift; fi
steps=${1:-30}
min_pct=${LINK_ORDER_MIN_PCT:-99}
max_rss_kib=${LINK_ORDER_MAX_RSS_KIB:-10240}
rounds=${LINK_ORDER_ROUNDS:-10}
# LINK_ORDER_RSS_ADVISORY=1: measure and print the peak RSS but do not fail on it.
rss_advisory=${LINK_ORDER_RSS_ADVISORY:-0}
list=crates/front/keel-cli/link-order.txt
command -v valgrind >/dev/null || { echo "link-order.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release -q -p keel-testkit
work=$(mktemp -d)
trap 'kill ${mock_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
if [ -z "$check" ]; then
  # The objects rustc links keel from, kept (`-C save-temps`), and its link command, so that the
  # binary can be linked again with another order in a second. The build script is touched so
  # that rustc runs (and prints the command) even when keel is up to date.
  touch crates/front/keel-cli/build.rs
  cargo rustc --release -q -p keel-cli --bin keel -- -C save-temps --print link-args > "$work/link-args"
else
  cargo build --release -q -p keel-cli
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
KEEL=$target/release/keel
MOCK=$target/release/keel-mock-server
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
  cp "$work/hot.txt" "$work/order.txt"
  if command -v perf >/dev/null && perf stat -e page-faults true > /dev/null 2>&1; then
    cc -shared -fPIC -O2 -o "$work/madv.so" bench/link-order/madv.c
    python3 bench/link-order/relink.py "$work/link-args" "$work/order.txt" "$work/bin/keel" > "$work/relink.sh"
    mkdir -p "$work/bin"
    for round in $(seq "$rounds"); do
      bash "$work/relink.sh"
      start_mock
      python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$work/bin/keel"
      KEEL_HOME=$work/home DEEPSEEK_API_KEY=sk-bench KEEL_REPORT_RUSAGE=1 LD_PRELOAD=$work/madv.so \
        perf record -q -e page-faults -c 1 -d -o "$work/faults.data" "$work/bin/keel" --cwd "$work/cwd" \
        --base-url "$url" --approval auto run "run the steps" > /dev/null 2>&1 || true
      stop_mock
      python3 bench/link-order/faults.py "$work/faults.data" "$work/bin/keel" > "$work/faulted.txt"
      before=$(wc -l < "$work/order.txt")
      sort -u "$work/order.txt" "$work/faulted.txt" -o "$work/order.txt"
      echo "link-order.sh: round $round: $before -> $(wc -l < "$work/order.txt") names"
    done
  else
    echo "link-order.sh: perf cannot count page faults here: the list holds what callgrind saw only" >&2
  fi
  cp "$work/order.txt" "$list"
  echo "$list: $(wc -l < "$list") names; run cargo build --release to link keel with it"
  exit 0
fi

status=0
python3 - "$work/hot.txt" "$list" "$min_pct" <<'PY' || status=1
import re, sys
# By exact name, which is what the linker orders (the names do not depend on the checkout).
hot = set(open(sys.argv[1]).read().split())
listed = set(open(sys.argv[2]).read().split())
pct = 100 * len(hot & listed) / max(len(hot), 1)
print(f"link order: {len(hot & listed)} of the {len(hot)} functions the release build executes "
      f"are in {sys.argv[2]} ({pct:.1f} %, at least {sys.argv[3]} % required)")
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
