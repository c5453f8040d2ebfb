#!/usr/bin/env python3
"""The symbols of the `keel` binary that a page-fault profile of one run touched (bench/link-order.sh).

Usage: faults.py PERF_DATA KEEL > names

PERF_DATA is `perf record -e page-faults -c 1 -d` of one `keel run`, made with madv.so preloaded
(keel's own mappings advised MADV_RANDOM: no read-ahead, so every page keel touches faults on its
own). Each fault of the keel process itself (children are left out: their pages are not keel's
RSS) inside the binary's mappings names the symbol (function or data object) at that address.
"""
import bisect
import re
import subprocess
import sys

data, keel = sys.argv[1], sys.argv[2]


def perf(*args):
    return subprocess.run(["perf", "script", "-i", data, *args], capture_output=True, text=True,
                          check=True).stdout


# The keel process and where its binary starts: the first mapping of the binary at offset 0.
pid = base = None
for line in perf("--show-mmap-events").splitlines():
    m = re.search(r"PERF_RECORD_MMAP2 (\d+)/\d+: \[0x([0-9a-f]+)\(0x[0-9a-f]+\) @ 0 .* (\S+)$", line)
    if m and m.group(3).endswith("/keel"):
        pid, base = m.group(1), int(m.group(2), 16)
        break
if pid is None:
    sys.exit("faults.py: no mapping of a binary named keel in " + data)

symbols = []
nm = subprocess.run(["nm", "-S", "--defined-only", keel], capture_output=True, text=True, check=True)
for line in nm.stdout.splitlines():
    parts = line.split()
    if len(parts) == 4:
        symbols.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
symbols.sort()
starts = [s[0] for s in symbols]

names = set()
for line in perf("-F", "pid,addr").splitlines():
    parts = line.split()
    if len(parts) != 2 or parts[0] != pid:
        continue
    at = int(parts[1], 16) - base
    i = bisect.bisect_right(starts, at) - 1
    if i >= 0 and symbols[i][0] <= at < symbols[i][0] + max(symbols[i][1], 1):
        names.add(symbols[i][2])
print("\n".join(sorted(names)))
