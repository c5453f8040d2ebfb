#!/usr/bin/env python3
"""`keel batch --engine ray` against `--engine local`: the same TASKS tasks of STEPS bash steps
(the loopback mock model, one response list per task matched by its id), CONCURRENCY at a time,
first as local child processes, then as jobs on a one-node Ray cluster started here (`ray start
--head` with CONCURRENCY CPUs, loopback dashboard). See bench/batch_ray.sh, which builds and
calls this. Usage: bench/batch_ray.py KEEL MOCK RAY TASKS CONCURRENCY STEPS OUTDIR

Figures: each engine's wall and sessions per minute, their ratio, and Ray's submission +
collection overhead per task: the mean of a task's wall under Ray (from packaging and
submitting its job to its output read, the session rebuilt here and the workspace back) less
its wall under the local engine (the `keel run` process alone)."""
import json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.request

keel, mock_bin, ray = sys.argv[1], sys.argv[2], sys.argv[3]
n, conc, steps, out = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
os.makedirs(out, exist_ok=True)

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def responses(tid):
    rs = [{"match": {"last_user_contains": tid}, "text": f"Step {i}.",
           "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step {i} >> log.txt && wc -l < log.txt"}}]}
          for i in range(1, steps + 1)]
    return rs + [{"match": {"last_user_contains": tid}, "text": "All steps done."}]

root = tempfile.mkdtemp(prefix="keel-ray-bench-")
tpl = os.path.join(root, "template"); os.makedirs(tpl)
open(os.path.join(tpl, "README"), "w").write("bench\n")
ids = [f"task-{i:03d}" for i in range(1, n + 1)]
tasks = os.path.join(root, "tasks.jsonl")
with open(tasks, "w") as f:
    for t in ids:
        f.write(json.dumps({"id": t, "prompt": f"Run the steps ({t}).", "workspace": tpl,
                            "check": f"test $(wc -l < log.txt) -eq {steps}"}) + "\n")

def run(engine, extra):
    script = os.path.join(root, f"script-{engine}.json")
    json.dump({"responses": [r for t in ids for r in responses(t)]}, open(script, "w"))
    url_file = script + ".url"
    mock = subprocess.Popen([mock_bin, "--script", script], stdout=open(url_file, "w"))
    while os.path.getsize(url_file) == 0:
        time.sleep(0.05)
    url = open(url_file).readline().strip()
    home = os.path.join(root, f"home-{engine}"); os.makedirs(home)
    env = dict(os.environ, KEEL_HOME=home, DEEPSEEK_API_KEY="sk-bench")
    outdir = os.path.join(root, f"out-{engine}")
    t0 = time.monotonic()
    rc = subprocess.run([keel, "--base-url", url, "--approval", "auto", "batch", tasks,
                         "--engine", engine, "--concurrency", str(conc), "--out", outdir] + extra,
                        env=env, stdout=open(os.path.join(out, f"{engine}.stdout"), "w"),
                        stderr=open(os.path.join(out, f"{engine}.stderr"), "w")).returncode
    wall = time.monotonic() - t0
    mock.terminate(); mock.wait()
    results = [json.loads(l) for l in open(os.path.join(outdir, "results.jsonl"))]
    ok = sum(1 for r in results if r["outcome"] == "completed" and r["check"] == "passed")
    print(f"== --engine {engine}: {n} tasks x {steps} steps, --concurrency {conc}: exit {rc}, "
          f"{ok}/{n} completed and passed; wall {wall:.2f} s -> {ok / wall * 60:.1f} sessions per minute")
    return wall, {r["id"]: r["wall_ms"] for r in results}

local_wall, local_ms = run("local", [])

temp = f"/tmp/keel-ray-bench-{os.getpid()}"
shutil.rmtree(temp, ignore_errors=True)
dash = free_port()
t0 = time.monotonic()
subprocess.run([ray, "start", "--head", "--port", str(free_port()), "--dashboard-host", "127.0.0.1",
                "--dashboard-port", str(dash), "--include-dashboard", "true", "--num-cpus", str(conc),
                "--object-store-memory", "100000000", "--disable-usage-stats", "--temp-dir", temp,
                "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port())],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
address = f"http://127.0.0.1:{dash}"
while True:
    try:
        urllib.request.urlopen(address + "/api/jobs/", timeout=5).read(); break
    except Exception:
        time.sleep(0.25)
print(f"(ray head started in {time.monotonic() - t0:.1f} s; not counted)")
try:
    # A first batch ships the binary (once per cluster, content-addressed): not counted either.
    warm = os.path.join(root, "warm.jsonl")
    open(warm, "w").write(json.dumps({"id": "warm", "prompt": "x", "workspace": tpl}) + "\n")
    t0 = time.monotonic()
    subprocess.run([keel, "--base-url", "http://127.0.0.1:9", "batch", warm, "--engine", "ray",
                    "--address", address, "--out", os.path.join(root, "out-warm")],
                   env=dict(os.environ, KEEL_HOME=os.path.join(root, "home-warm")),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"(binary shipped and a first job run in {time.monotonic() - t0:.1f} s; not counted)")
    ray_wall, ray_ms = run("ray", ["--address", address])
    jobs = json.loads(urllib.request.urlopen(address + "/api/jobs/", timeout=30).read())
    life = {}
    for j in jobs:
        task = (j.get("metadata") or {}).get("keel_task")
        if task in ray_ms and j.get("end_time") and j.get("start_time"):
            life[task] = j["end_time"] - j["start_time"]
finally:
    subprocess.run([ray, "stop", "--force"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(temp, ignore_errors=True)

over = [ray_ms[t] - local_ms[t] for t in ids if t in ray_ms and t in local_ms]
mean_local = sum(local_ms.values()) / len(local_ms)
mean_ray = sum(ray_ms.values()) / len(ray_ms)
print(f"task wall: local mean {mean_local:.0f} ms, ray mean {mean_ray:.0f} ms")
print(f"ray submission + collection overhead per task: mean {sum(over)/len(over):.0f} ms "
      f"(min {min(over)} ms, max {max(over)} ms)")
if life:
    keel_side = [ray_ms[t] - life[t] for t in life]
    ray_side = [life[t] - local_ms[t] for t in life if t in local_ms]
    print(f"  of which Ray's (a job's life, submission to end, as Ray records it, less the local "
          f"session's wall): mean {sum(ray_side)/len(ray_side):.0f} ms")
    print(f"  of which keel's (packaging, upload, submission, reading the output, the session "
          f"rebuilt, the workspace back): mean {sum(keel_side)/len(keel_side):.0f} ms")
print(f"batch wall ray/local: {ray_wall:.2f} s / {local_wall:.2f} s = {ray_wall / local_wall:.2f}x")
shutil.rmtree(root, ignore_errors=True)
