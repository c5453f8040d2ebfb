#!/usr/bin/env bash
# Where keel's resident memory goes while `keel run` waits on its first response (see
# bench/README.md, "Peak RSS"). Usage: bench/rss.sh [KEEL_BINARY]   (default: the release build)
# A loopback server accepts the request and never answers; after 2 s keel's /proc/PID/smaps is
# summed by mapping, and its resident code is counted in 64 KiB windows (the kernel maps a whole
# window, or a whole large folio, around each page keel executes).
set -euo pipefail
cd "$(dirname "$0")/.."
KEEL=${1:-$PWD/target/release/keel}
[ -x "$KEEL" ] || cargo build --release -q -p keel-cli
work=$(mktemp -d)
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(f"http://127.0.0.1:{s.getsockname()[1]}/v1", flush=True)
conns = []
while True: conns.append(s.accept()[0])
' > "$work/url" &
hold=$!
trap 'kill $hold ${pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
mkdir -p "$work/cwd" "$work/home"
KEEL_HOME=$work/home DEEPSEEK_API_KEY=sk-bench "$KEEL" --cwd "$work/cwd" --base-url "$(cat "$work/url")" \
  --approval auto ${KEEL_FLAGS:-} run "wait" > /dev/null 2>&1 &
pid=$!
sleep 2
python3 - "$pid" "$KEEL" <<'PY'
import collections, os, re, struct, sys
pid, exe = sys.argv[1], os.path.realpath(sys.argv[2])
rss = collections.Counter(); cur = None; text = []
for line in open(f"/proc/{pid}/smaps"):
    if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
        p = line.split(); path = p[5] if len(p) > 5 else "[anon]"
        cur = (os.path.basename(path), p[1])
        if os.path.realpath(path) == exe and "x" in p[1]:
            a, b = (int(x, 16) for x in p[0].split("-")); text.append((a, b))
    elif line.startswith("Rss:"):
        rss[cur] += int(line.split()[1])
print(f"RSS {sum(rss.values())} kB, by mapping:")
for (name, perm), kb in rss.most_common(8):
    print(f"  {kb:7d} kB  {name} {perm}")
with open(f"/proc/{pid}/pagemap", "rb") as pm:
    for a, b in text:
        pm.seek(a // 4096 * 8); data = pm.read((b - a) // 4096 * 8)
        pages = [i for i in range((b - a) // 4096) if struct.unpack_from("<Q", data, i * 8)[0] >> 63]
        windows = {(a + i * 4096) >> 16 for i in pages}
        print(f"code: {len(pages) * 4} kB resident of {(b - a) >> 10} kB, in {len(windows)} of {(b - a) >> 16} 64 KiB windows")
PY
