#!/usr/bin/env python3
"""Bytes of one MCP tool result as keel hands it to the model, for the real servers of issue 33.

    python3 result_bytes.py KEEL_BINARY LABEL NPM_BIN_DIR PY_BIN_DIR

NPM_BIN_DIR holds mcp-server-filesystem, -memory, -everything and -sequential-thinking
(npm @modelcontextprotocol/server-* 2026.8.31); PY_BIN_DIR holds mcp-server-time and
mcp-server-git (PyPI 2026.10.19). A scripted `keel run` (no model) calls one tool of each and
prints, per call: the result's full size (the spill file when spilled), the bytes the model
gets, the bytes of its tool/result log line, whether it failed, and its meta keys. Run it with
an old and a new keel binary to compare (docs/mcp.md, Figures).
"""
import json, os, subprocess, sys, shutil, pathlib, glob
keel, label, npm_bin, py_bin = sys.argv[1:5]
root = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"keel-result-bytes-{label}"
shutil.rmtree(root, ignore_errors=True)
ws = root/"ws"; home = root/"home"; ws.mkdir(parents=True); home.mkdir()
(ws/"small.txt").write_text("alpha beta gamma\n")
(ws/"big.txt").write_text("".join(f"line {i} of a five megabyte file, padded to about fifty bytes\n" for i in range(5*1024*1024//62)))
subprocess.run(["git","init","-q",str(ws)]); subprocess.run(["git","-C",str(ws),"add","small.txt"])
N = npm_bin.rstrip("/") + "/"; V = py_bin.rstrip("/") + "/"
(home/"config.toml").write_text(f'''
[mcp_servers.fs]
command = "{N}mcp-server-filesystem"
args = ["{ws}"]
[mcp_servers.memory]
command = "{N}mcp-server-memory"
env = {{ MEMORY_FILE_PATH = "{root}/memory.jsonl" }}
[mcp_servers.everything]
command = "{N}mcp-server-everything"
args = ["stdio"]
[mcp_servers.thinking]
command = "{N}mcp-server-sequential-thinking"
[mcp_servers.time]
command = "{V}mcp-server-time"
[mcp_servers.git]
command = "{V}mcp-server-git"
''')
calls = [
 ("fs_small","mcp__fs__read_text_file",{"path":str(ws/"small.txt")}),
 ("fs_big","mcp__fs__read_text_file",{"path":str(ws/"big.txt")}),
 ("fs_list","mcp__fs__list_directory",{"path":str(ws)}),
 ("mem_create","mcp__memory__create_entities",{"entities":[{"name":"keel","entityType":"project","observations":["a Rust agent harness"]}]}),
 ("mem_read","mcp__memory__read_graph",{}),
 ("ev_struct","mcp__everything__get-structured-content",{"location":"New York"}),
 ("ev_echo","mcp__everything__echo",{"message":"hello"}),
 ("think","mcp__thinking__sequentialthinking",{"thought":"consider the bytes","thoughtNumber":1,"totalThoughts":1,"nextThoughtNeeded":False}),
 ("time","mcp__time__get_current_time",{"timezone":"UTC"}),
 ("git","mcp__git__git_status",{"repo_path":str(ws)}),
]
script = {"responses":[{"match":{"last_user_contains":"GO"},"tool_calls":[{"id":i,"name":n,"arguments":a} for i,n,a in calls]},{"text":"DONE"}]}
(root/"script.json").write_text(json.dumps(script))
env = dict(os.environ, KEEL_HOME=str(home), HOME=str(root), DEEPSEEK_API_KEY="sk-test")
out = subprocess.run([keel,"--cwd",str(ws),"--sandbox","full-access","--approval","auto","run","--script",str(root/"script.json"),"GO"],env=env,capture_output=True,text=True,timeout=300)
if out.returncode: print(out.stderr[-3000:])
sess = glob.glob(str(home)+"/**/*.jsonl",recursive=True)
sess = max(sess, key=os.path.getsize)
res = {}
for line in open(sess):
    e = json.loads(line)
    if e.get("type") == "tool/result":
        b = e["data"]["message"]["content"][0]
        text = "".join(p.get("text","") for p in b.get("content",[]))
        meta = e["data"].get("meta") or {}
        sp = meta.get("spilled") or meta.get("spill")
        sp = sp[0] if isinstance(sp, list) else sp
        full = os.path.getsize(sp) if isinstance(sp, str) and os.path.exists(sp) else len(text.encode())
        res[b["toolCallId"]] = (full, len(text.encode()), len(line.encode()), b.get("isError",False), sorted(meta))
for i,_,_ in calls:
    print(label, i, *res.get(i,("missing",)))
