#!/usr/bin/env bash
# The Python SDK's overhead: `Keel.run()` (keel-sdk, sdk/python, on a started private server)
# against `keel run` on the same task, one text answer from the loopback mock model, each in a
# new session; N repetitions each (default 20), median and mean wall time. Also the SDK's
# cold path: `Keel(...)` started, one run, closed.
# Usage: bench/sdk.sh [N]     (KEEL=…, MOCK=…: other binaries; default target/release, built)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-20}
if [ -z "${KEEL:-}" ]; then
  cargo build --release -q -p keel-cli -p keel-testkit
  KEEL=$PWD/target/release/keel
fi
MOCK=${MOCK:-$(dirname "$KEEL")/keel-mock-server}
PY=${PYTHON:-sdk/python/.venv/bin/python}
[ -x "$PY" ] || { echo "no $PY: make the venv (sdk/python/README.md, Tests)" >&2; exit 2; }

work=$(mktemp -d)
trap 'kill $mock_pid 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/ws" "$work/home"
{ echo "responses:"; for _ in $(seq $((4 * n + 8))); do echo '  - text: "hello"'; done; } > "$work/script.yaml"
"$MOCK" --script "$work/script.yaml" > "$work/mock.url" &
mock_pid=$!
for _ in $(seq 50); do [ -s "$work/mock.url" ] && break; sleep 0.1; done
url=$(head -1 "$work/mock.url")

PYTHONPATH=sdk/python/src "$PY" - "$KEEL" "$url" "$work" "$n" <<'PY'
import os, statistics, subprocess, sys, time
from keel_sdk import Keel

keel_bin, url, work, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ws, home = os.path.join(work, "ws"), os.path.join(work, "home")
env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench")

def cli():
    t = time.perf_counter()
    out = subprocess.run([keel_bin, "--cwd", ws, "--base-url", url, "--trust-project", "run", "say hello"],
                         env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    assert out.returncode == 0 and "hello" in out.stdout, out.stderr
    return dt

def show(name, xs):
    print(f"{name:<34} median {statistics.median(xs) * 1000:7.1f} ms   mean {statistics.mean(xs) * 1000:7.1f} ms   (n={len(xs)})")

opts = dict(cwd=ws, binary=keel_bin, base_url=url, keel_home=home, trust_project=True,
            env={"DEEPSEEK_API_KEY": "sk-bench"})
cli()  # warm the page cache
runs_cli, runs_sdk = [], []
with Keel(**opts) as keel:
    keel.run("say hello")  # warm
    for _ in range(n):
        runs_cli.append(cli())
        t = time.perf_counter()
        r = keel.run("say hello")
        runs_sdk.append(time.perf_counter() - t)
        assert r.text == "hello", r
cold = []
for _ in range(min(n, 5)):
    t = time.perf_counter()
    with Keel(**opts) as keel:
        keel.run("say hello")
    cold.append(time.perf_counter() - t)
print(f"== keel-sdk run() against keel run: one text answer, a new session each ({keel_bin})")
show("keel run (a process each)", runs_cli)
show("Keel.run() (started server)", runs_sdk)
show("Keel() + run() + close() (cold)", cold)
d = statistics.median(runs_sdk) - statistics.median(runs_cli)
print(f"overhead of run() over keel run (medians): {d * 1000:+.1f} ms (budget: +50 ms)")
PY
