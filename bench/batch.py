#!/usr/bin/env python3
"""`keel batch` figures against the loopback mock model (see bench/batch.sh, which builds and
calls this). Usage: bench/batch.py KEEL MOCK TASKS CONCURRENCY STEPS OUTDIR [DSH_NODE DSH_BIN]

keel: TASKS tasks of STEPS bash steps each (bench/task.py's task, one response list per task
matched by its id) through `keel batch --concurrency CONCURRENCY`, one mock for all.
Figures: wall, sessions completed per minute, and keel's scheduling overhead per task: the
time from a session's process exiting to the next session's process starting in the slot it
freed (results.jsonl's started_at_ms + wall_ms, matched in order).
dsh (when DSH_NODE/DSH_BIN are given): the same tasks as dsh processes, CONCURRENCY at a time
(a thread pool; dsh has no batch mode), each against a mock of its own."""
import json, os, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

keel, mock_bin, n, conc, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
dsh = sys.argv[7:9] if len(sys.argv) >= 9 else None
os.makedirs(out, exist_ok=True)

def responses(tid, dsh_args=False):
    out = []
    for i in range(1, steps + 1):
        args = {"command": f"echo step {i} >> log.txt && wc -l < log.txt"}
        if dsh_args:
            args["description"] = f"step {i}"
        r = {"text": f"Step {i}.", "tool_calls": [{"name": "bash", "arguments": args}]}
        if tid:
            r["match"] = {"last_user_contains": tid}
        out.append(r)
    r = {"text": "All steps done."}
    if tid:
        r["match"] = {"last_user_contains": tid}
    out.append(r)
    return out

def start_mock(script_path):
    url_file = script_path + ".url"
    p = subprocess.Popen([mock_bin, "--script", script_path], stdout=open(url_file, "w"))
    for _ in range(100):
        if os.path.getsize(url_file) > 0:
            break
        time.sleep(0.05)
    return p, open(url_file).readline().strip()

ids = [f"task-{i:03d}" for i in range(1, n + 1)]
root = tempfile.mkdtemp(prefix="keel-batch-bench-")
tpl = os.path.join(root, "template"); os.makedirs(tpl)
open(os.path.join(tpl, "README"), "w").write("bench\n")
script = os.path.join(root, "script.json")
json.dump({"responses": [r for t in ids for r in responses(t)]}, open(script, "w"))
tasks = os.path.join(root, "tasks.jsonl")
with open(tasks, "w") as f:
    for t in ids:
        f.write(json.dumps({"id": t, "prompt": f"Run the steps ({t}).", "workspace": tpl,
                            "check": f"test $(wc -l < log.txt) -eq {steps}"}) + "\n")
mock, url = start_mock(script)
home = os.path.join(root, "home"); os.makedirs(home)
env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench", KEEL_REPORT_RUSAGE="1")
t0 = time.monotonic()
rc = subprocess.run(["/usr/bin/time", "-f", "time: %e s wall, %U s user, %S s sys, %M KiB largest peak RSS (keel batch and all its sessions)",
                     keel, "--base-url", url, "--approval", "auto", "batch", tasks,
                     "--concurrency", str(conc), "--out", os.path.join(root, "out")],
                    env=env, stdout=open(os.path.join(out, "batch.stdout"), "w"),
                    stderr=open(os.path.join(out, "batch.stderr"), "w")).returncode
wall = time.monotonic() - t0
mock.terminate(); mock.wait()
results = [json.loads(l) for l in open(os.path.join(root, "out", "results.jsonl"))]
ok = sum(1 for r in results if r["outcome"] == "completed" and r["check"] == "passed")
print(f"== keel batch: {n} tasks x {steps} steps, --concurrency {conc}: exit {rc}, {ok}/{n} completed and passed")
print(f"wall {wall:.2f} s -> {ok / wall * 60:.1f} sessions per minute")
err = open(os.path.join(out, "batch.stderr")).read()
print(err.strip().splitlines()[-1])
import re
m = re.search(r"self_user_s=([\d.]+) self_sys_s=([\d.]+) self_maxrss_kib=(\d+)", err)
if m:
    own = float(m.group(1)) + float(m.group(2))
    print(f"keel batch's own CPU (sessions excluded): {own*1000:.0f} ms, {own*1000/n:.1f} ms per task; "
          f"its peak RSS {int(m.group(3))/1024:.1f} MiB")
sess = [r["wall_ms"] for r in results]
print(f"session process wall: mean {sum(sess)/len(sess):.0f} ms, min {min(sess)} ms, max {max(sess)} ms; "
      f"sum/concurrency {sum(sess)/conc/1000:.2f} s vs batch wall {wall:.2f} s")
# A slot is free once the session's process exited and its check ran (check_ms).
exits = sorted(r["started_at_ms"] + r["wall_ms"] + r.get("check_ms", 0) for r in results)
starts = sorted(r["started_at_ms"] for r in results)
gaps = [s - e for s, e in zip(starts[conc:], exits)]
if gaps:
    gaps.sort()
    print(f"scheduling overhead per task (process exit + check -> next process start, {len(gaps)} hand-overs): "
          f"mean {sum(gaps)/len(gaps):.1f} ms, median {gaps[len(gaps)//2]} ms, max {gaps[-1]} ms")
json.dump({"tasks": n, "steps": steps, "concurrency": conc, "wall_s": wall, "ok": ok,
           "per_minute": ok / wall * 60, "gaps_ms": gaps}, open(os.path.join(out, "keel.json"), "w"))

if dsh:
    node, bin_js = dsh
    def one(t):
        d = os.path.join(root, "dsh", t); os.makedirs(d)
        sp = os.path.join(d, "script.json")
        # dsh asks for a session title first (a request of its own).
        title = {"match": {"last_user_contains": "Generate the session title"}, "text": "Steps"}
        json.dump({"responses": [title] + responses(None, dsh_args=True)}, open(sp, "w"))
        ws = os.path.join(d, "ws"); os.makedirs(ws)
        m, u = start_mock(sp)
        dhome = os.path.join(d, "home"); os.makedirs(dhome)
        e = dict(os.environ, DSH_HOME=dhome, DEEPSEEK_BASE_URL=u, DEEPSEEK_API_KEY="sk-test",
                 DSH_PERMISSION_MODE="workspace-write", DSH_TELEMETRY_DISABLED="1")
        s = time.monotonic()
        r = subprocess.run([node, bin_js, "--profile", "headless", f"Run the steps ({t})."], cwd=ws, env=e,
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"), stdin=subprocess.DEVNULL)
        w = time.monotonic() - s
        m.terminate(); m.wait()
        lines = open(os.path.join(ws, "log.txt")).read().count("\n") if os.path.exists(os.path.join(ws, "log.txt")) else 0
        return r.returncode == 0 and lines == steps, w
    t0 = time.monotonic()
    with ThreadPoolExecutor(conc) as pool:
        res = list(pool.map(one, ids))
    dwall = time.monotonic() - t0
    dok = sum(1 for good, _ in res if good)
    print(f"== dsh: {n} tasks x {steps} steps, {conc} processes at a time: {dok}/{n} completed all steps")
    print(f"wall {dwall:.2f} s -> {dok / dwall * 60:.1f} sessions per minute; "
          f"session wall mean {sum(w for _, w in res)/len(res):.2f} s")
    if dok:
        print(f"keel/dsh sessions per minute: {(ok / wall) / (dok / dwall):.1f}x")
if not os.environ.get("KEEP"):
    subprocess.run(["rm", "-rf", root])
else:
    print("kept", root)
