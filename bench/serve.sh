#!/usr/bin/env bash
# `keel serve` figures (issue 46; see bench/README.md, "keel serve: sessions as a service").
# Usage: bench/serve.sh [N...] [--300]      (default: 10 100; --300 adds N=300, which takes long)
#
# 1. N sessions in one `keel serve` against N `keel run` processes, each running bench/task.py's
#    30-step task against one loopback mock model whose every response pauses 1 s mid-stream
#    (keel-mock-server has no delay flag: the script's `stall` behaviour with `stall_ms: 1000`
#    streams half of the response, goes silent 1 s, then finishes it). Wall time against the
#    ideal (31 requests x 1 s), private memory (Private_Clean+Private_Dirty of
#    /proc/PID/smaps_rollup; the server's over its idle figure) per session, CPU per step
#    (the server's utime+stime from /proc/PID/stat; keel run's own, KEEL_REPORT_RUSAGE, summed).
# 2. Event latency: 10 SSE clients on one session running the task; receive time minus the
#    event's own `time` (ms since the epoch, as logged): p50/p99/max.
# 3. Idle server memory, and `keel serve` start to first accepted request (median of 10).
#
# KEEL and MOCK from the environment skip the build (both must be set); SERVE_DELAY_MS changes
# the 1 s pause (for a quick try of the script).
# Everything started is killed on exit; every wait has a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${KEEL:-}" ] || [ -z "${MOCK:-}" ]; then
  cargo build --release -q -p keel-cli -p keel-testkit
  KEEL=$PWD/target/release/keel
  MOCK=$PWD/target/release/keel-mock-server
fi
ns=()
for a in "$@"; do
  case $a in
    --300) ns+=(300) ;;
    *[!0-9]*|'') echo "usage: bench/serve.sh [N...] [--300]" >&2; exit 2 ;;
    *) ns+=("$a") ;;
  esac
done
if [ ${#ns[@]} -eq 0 ] || { [ ${#ns[@]} -eq 1 ] && [ "${ns[0]}" = 300 ]; }; then ns=(10 100 "${ns[@]}"); fi
mkdir -p bench/out
root=$(mktemp -d /tmp/keel-serve-bench.XXXXXX)
py_pid=
cleanup() {
  if [ -n "$py_pid" ]; then kill -TERM "$py_pid" 2>/dev/null || true; wait "$py_pid" 2>/dev/null || true; fi
  rm -rf "$root"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python3 - "$KEEL" "$MOCK" "$root" "${ns[@]}" <<'PY' &
import http.client, json, os, signal, statistics, subprocess, sys, threading, time, glob

KEEL, MOCK, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
NS = [int(a) for a in sys.argv[4:]]
STEPS, DELAY_MS = 30, int(os.environ.get("SERVE_DELAY_MS", "1000"))
IDEAL = (STEPS + 1) * DELAY_MS / 1000
procs = []

def stop_all(*_):
    for p in procs:
        if p.poll() is None:
            try: p.kill()
            except OSError: pass
    for p in procs:
        try: p.wait(5)
        except Exception: pass
    if _: sys.exit(130)
signal.signal(signal.SIGTERM, stop_all)
signal.signal(signal.SIGINT, stop_all)

def spawn(args, **kw):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, **kw)
    procs.append(p)
    return p

def responses(tid):
    out = []
    for i in range(1, STEPS + 1):
        out.append({"match": {"last_user_contains": tid}, "text": f"Step {i}.",
                    "behaviour": "stall", "stall_ms": DELAY_MS,
                    "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step {i} >> log.txt && wc -l < log.txt"}}]})
    out.append({"match": {"last_user_contains": tid}, "text": "All steps done.",
                "behaviour": "stall", "stall_ms": DELAY_MS})
    return out

def start_mock(name, ids):
    path = os.path.join(ROOT, name + ".json")
    json.dump({"responses": [r for t in ids for r in responses(t)]}, open(path, "w"))
    url_file = path + ".url"
    p = spawn([MOCK, "--script", path], stdout=open(url_file, "w"), stderr=open(path + ".err", "w"))
    deadline = time.monotonic() + 10
    while os.path.getsize(url_file) == 0:
        if time.monotonic() > deadline or p.poll() is not None:
            sys.exit("keel-mock-server did not start: " + open(path + ".err").read())
        time.sleep(0.01)
    return p, open(url_file).readline().strip()

def stop(p, grace=6):
    if p.poll() is None:
        p.terminate()
        try: p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill(); p.wait()

def private_kib(pid):
    """Private_Clean+Private_Dirty and Rss of smaps_rollup, KiB (None when gone)."""
    try:
        f = {}
        for line in open(f"/proc/{pid}/smaps_rollup"):
            parts = line.split()
            if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                f[parts[0][:-1]] = int(parts[1])
        return f["Private_Clean"] + f["Private_Dirty"], f["Rss"]
    except (OSError, KeyError):
        return None

def cpu_s(pid):
    """utime+stime of the process itself (children excluded), seconds."""
    stat = open(f"/proc/{pid}/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def mib(kib): return kib / 1024

class Server:
    def __init__(self, home, mock_url, extra_env=None):
        os.makedirs(home, exist_ok=True)
        self.home = home
        env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench", **(extra_env or {}))
        self.t_spawn = time.monotonic()
        self.p = spawn([KEEL, "--base-url", mock_url, "--approval", "auto", "serve", "--listen", "127.0.0.1:0"],
                       env=env, stdout=subprocess.PIPE, stderr=open(os.path.join(home, "serve.stderr"), "w"))
        line = self.p.stdout.readline().decode()
        self.t_url = time.monotonic()
        if not line.startswith("keel serve: http://"):
            stop(self.p)
            sys.exit("keel serve did not print its URL: " + line + open(os.path.join(home, "serve.stderr")).read())
        threading.Thread(target=lambda: self.p.stdout.read(), daemon=True).start()
        url = line.split(": ", 1)[1].strip()
        self.hostport = url.split("//", 1)[1].split("/", 1)[0]
        self.token = url.split("token=", 1)[1]
        self.pid = self.p.pid

    def request(self, method, path, body=None, timeout=30):
        host, port = self.hostport.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=timeout)
        headers = {"Authorization": "Bearer " + self.token}
        if body is not None:
            headers["Content-Type"] = "application/json"
            body = json.dumps(body)
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
        return json.loads(data) if data else None

    def first_request(self, deadline_s=10):
        """Retries GET /api/v1/sessions until it is answered; returns the time since spawn."""
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                self.request("GET", "/api/v1/sessions", timeout=5)
                return time.monotonic() - self.t_spawn
            except (ConnectionRefusedError, ConnectionResetError):
                if time.monotonic() > deadline: raise
                time.sleep(0.001)

    def stop(self): stop(self.p)

def workspaces(prefix, n):
    out = []
    for i in range(n):
        d = os.path.join(ROOT, prefix, f"ws{i:03d}"); os.makedirs(d)
        out.append(d)
    return out

def log_lines(ws):
    try: return open(os.path.join(ws, "log.txt")).read().count("\n")
    except OSError: return 0

def turn_ended(path):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2); size = f.tell(); f.seek(max(0, size - 8192))
            return b'"type":"turn/end"' in f.read()
    except OSError:
        return False

results = {}

# ---- 3. start-up and idle memory (a server without sessions) --------------------------------
print("== keel serve start-up: spawn to first answered request (GET /api/v1/sessions), 10 starts")
mock, mock_url = start_mock("startup", [])
starts, urls = [], []
for i in range(10):
    s = Server(os.path.join(ROOT, f"home-start{i}"), mock_url)
    starts.append(s.first_request() * 1000); urls.append((s.t_url - s.t_spawn) * 1000)
    if i == 9:
        time.sleep(2)
        idle_priv, idle_rss = private_kib(s.pid)
        status = dict(l.split(":", 1) for l in open(f"/proc/{s.pid}/status") if ":" in l)
        vmrss = int(status["VmRSS"].split()[0]); threads = int(status["Threads"])
    s.stop()
stop(mock)
print(f"start to first answered request: median {statistics.median(starts):.1f} ms "
      f"(min {min(starts):.1f}, max {max(starts):.1f}); start to URL line: median {statistics.median(urls):.1f} ms")
print(f"idle server (one request answered, 2 s later): private {mib(idle_priv):.2f} MiB, "
      f"RSS {mib(vmrss):.2f} MiB, {threads} threads")
results["startup_ms"] = starts; results["idle_private_kib"] = idle_priv; results["idle_rss_kib"] = vmrss

# ---- 1. N sessions in one server vs N keel run processes ------------------------------------
SAMPLE = 0.25
for n in NS:
    deadline_s = IDEAL * 4 + n * 1.0 + 60
    ids = [f"task-{i:03d}" for i in range(n)]
    # keel serve
    mock, mock_url = start_mock(f"serve{n}", ids)
    home = os.path.join(ROOT, f"home-serve{n}")
    s = Server(home, mock_url)
    s.first_request()
    time.sleep(1)
    idle_priv_n, _ = private_kib(s.pid)
    cpu0 = cpu_s(s.pid)
    wss = workspaces(f"serve{n}", n)
    t0 = time.monotonic()
    sids = [s.request("POST", "/api/v1/sessions", {"cwd": ws, "prompt": f"Run the steps ({t})."})["id"]
            for t, ws in zip(ids, wss)]
    t_created = time.monotonic() - t0
    paths = {}
    peak = idle_priv_n
    done = set()
    while len(done) < n:
        if time.monotonic() - t0 > deadline_s or s.p.poll() is not None:
            s.stop(); stop(mock)
            sys.exit(f"keel serve N={n}: {len(done)}/{n} sessions done after {time.monotonic()-t0:.0f} s; giving up")
        m = private_kib(s.pid)
        if m: peak = max(peak, m[0])
        for sid in sids:
            if sid in done: continue
            if sid not in paths:
                found = glob.glob(os.path.join(home, "sessions", "*", sid, "session.jsonl"))
                if not found: continue
                paths[sid] = found[0]
            if turn_ended(paths[sid]): done.add(sid)
        time.sleep(SAMPLE)
    wall = time.monotonic() - t0
    cpu = cpu_s(s.pid) - cpu0
    time.sleep(1)
    end_priv, _ = private_kib(s.pid)
    ok = sum(1 for ws in wss if log_lines(ws) == STEPS)
    s.stop(); stop(mock)
    serve = dict(n=n, wall=wall, created=t_created, idle=idle_priv_n, peak=peak, end=end_priv, cpu=cpu, ok=ok)

    # N keel run processes
    mock, mock_url = start_mock(f"run{n}", ids)
    home = os.path.join(ROOT, f"home-run{n}"); os.makedirs(home)
    wss = workspaces(f"run{n}", n)
    env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench", KEEL_REPORT_RUSAGE="1")
    t0 = time.monotonic()
    runs = []
    for t, ws in zip(ids, wss):
        err = os.path.join(ws + ".stderr")
        runs.append((spawn([KEEL, "--cwd", ws, "--base-url", mock_url, "--approval", "auto", "run", f"Run the steps ({t})."],
                           env=env, stdout=subprocess.DEVNULL, stderr=open(err, "w")), err))
    peak_sum = 0
    while any(p.poll() is None for p, _ in runs):
        if time.monotonic() - t0 > deadline_s:
            for p, _ in runs: stop(p, 1)
            stop(mock)
            sys.exit(f"keel run N={n}: processes still running after {deadline_s:.0f} s; giving up")
        total = 0
        for p, _ in runs:
            if p.poll() is None:
                m = private_kib(p.pid)
                if m: total += m[0]
        peak_sum = max(peak_sum, total)
        time.sleep(SAMPLE)
    wall_run = time.monotonic() - t0
    stop(mock)
    own = 0.0; maxrss = 0; rc_bad = sum(1 for p, _ in runs if p.returncode != 0)
    for _, err in runs:
        for line in open(err):
            if line.startswith("keel-rusage"):
                f = dict(kv.split("=") for kv in line.split()[1:])
                own += float(f["self_user_s"]) + float(f["self_sys_s"]); maxrss += int(f["self_maxrss_kib"])
    ok_run = sum(1 for ws in wss if log_lines(ws) == STEPS)
    steps = n * STEPS
    sp = (serve["peak"] - serve["idle"]) / n
    se = (serve["end"] - serve["idle"]) / n
    print(f"== N={n}: {n} sessions x {STEPS} steps, every response paused {DELAY_MS} ms (ideal wall {IDEAL:.0f} s)")
    print(f"keel serve:  {ok}/{n} workspaces with {STEPS} lines; wall {serve['wall']:.1f} s (+{serve['wall']-IDEAL:.1f} s over ideal; "
          f"the {n} POSTs took {serve['created']:.2f} s); private: idle {mib(serve['idle']):.1f} MiB, peak {mib(serve['peak']):.1f} MiB, "
          f"after the turns {mib(serve['end']):.1f} MiB -> {mib(sp):.2f} MiB per session at peak, {mib(se):.2f} MiB per idle hosted session; "
          f"CPU {serve['cpu']:.2f} s = {serve['cpu']*1000/steps:.2f} ms per step")
    print(f"keel run x{n}: {ok_run}/{n} workspaces with {STEPS} lines, {rc_bad} non-zero exits; wall {wall_run:.1f} s "
          f"(+{wall_run-IDEAL:.1f} s over ideal); private summed over the processes at peak {mib(peak_sum):.1f} MiB "
          f"-> {mib(peak_sum/n):.2f} MiB per session; peak RSS summed {mib(maxrss):.0f} MiB; "
          f"own CPU {own:.2f} s = {own*1000/steps:.2f} ms per step")
    results[f"n{n}"] = dict(serve=serve, run=dict(wall=wall_run, peak_private_sum=peak_sum, maxrss_sum=maxrss, cpu=own, ok=ok_run))

# ---- 2. event latency: 10 SSE clients on one session -----------------------------------------
CLIENT = r'''
import http.client, sys, time
host, port, token, sid, out = sys.argv[1:6]
c = http.client.HTTPConnection(host, int(port), timeout=120)
c.request("GET", f"/api/v1/sessions/{sid}/events", headers={"Authorization": "Bearer " + token, "Accept": "text/event-stream"})
r = c.getresponse()
assert r.status == 200, r.status
f = open(out, "w", buffering=1)
named = False
while True:
    line = r.readline()
    t = time.time() * 1000
    if not line: break
    if line.startswith(b"event:"): named = True
    elif line.startswith(b"data:"):
        f.write(("N " if named else "E ") + f"{t:.3f} " + line[5:].decode().strip() + "\n")
    elif line in (b"\n", b"\r\n"): named = False
'''
print("== event latency: 10 SSE clients on one session running the task (receive time - event time)")
mock, mock_url = start_mock("latency", ["task-lat"])
home = os.path.join(ROOT, "home-lat")
s = Server(home, mock_url)
s.first_request()
ws = workspaces("lat", 1)[0]
sid = s.request("POST", "/api/v1/sessions", {"cwd": ws})["id"]
host, port = s.hostport.rsplit(":", 1)
outs = [os.path.join(ROOT, f"client{i}.txt") for i in range(10)]
clients = [spawn([sys.executable, "-c", CLIENT, host, port, s.token, sid, o]) for o in outs]
deadline = time.monotonic() + 20
while not all(os.path.exists(o) and open(o).read().startswith("N ") for o in outs):
    if time.monotonic() > deadline: sys.exit("SSE clients did not connect")
    time.sleep(0.05)
time.sleep(0.5)
t_prompt = time.time() * 1000
s.request("POST", f"/api/v1/sessions/{sid}/messages", {"text": "Run the steps (task-lat)."})
deadline = time.monotonic() + IDEAL * 3 + 60
while not all('"type":"turn/end"' in open(o).read() for o in outs):
    if time.monotonic() > deadline: sys.exit("the latency session did not end")
    time.sleep(0.2)
for c in clients: stop(c, 1)
s.stop(); stop(mock)
lat, per_client, types = [], [], {}
for o in outs:
    n_ev = 0
    for line in open(o):
        kind, t, data = line.split(" ", 2)
        if kind != "E" or float(t) < t_prompt: continue
        ev = json.loads(data)
        if "time" not in ev: continue
        d = float(t) - ev["time"]; lat.append(d); n_ev += 1
        types.setdefault(ev["type"], []).append(d)
    per_client.append(n_ev)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"{len(lat)} receipts ({min(per_client)}-{max(per_client)} events per client): p50 {q(0.5):.2f} ms, p90 {q(0.9):.2f} ms, "
      f"p99 {q(0.99):.2f} ms, max {lat[-1]:.2f} ms (event time is whole ms: figures are high by up to 1 ms)")
for ty, v in sorted(types.items(), key=lambda kv: -len(kv[1]))[:6]:
    v.sort(); print(f"  {ty}: {len(v)} receipts, median {v[len(v)//2]:.2f} ms, max {v[-1]:.2f} ms")
results["latency_ms"] = dict(p50=q(0.5), p99=q(0.99), max=lat[-1], n=len(lat))
json.dump(results, open(os.path.join("bench", "out", "serve.json"), "w"), indent=1)
stop_all()
PY
py_pid=$!
wait "$py_pid"
rc=$?
py_pid=
exit $rc
