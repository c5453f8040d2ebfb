"""The web app opening a long session, and the server's memory with tabs open (bench/web.sh).
Usage: web_paint.py URL_WITH_TOKEN SESSION_ID LAST_SEQ SERVER_PID RUNS [CHROMIUM]

For each of RUNS fresh browser contexts: the time from navigation to the first rendered event
of the session (first paint) and to the last one (LAST_SEQ rendered: the whole session shown).
Then 5 tabs on the session: the server's private memory (Private_Clean + Private_Dirty of
/proc/PID/smaps_rollup) before they open and once all of them show the session."""

import statistics
import sys
import time

from playwright.sync_api import sync_playwright

url, session, last, pid, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
chromium = sys.argv[6] if len(sys.argv) > 6 else "/usr/bin/chromium"
base = url.split("/?", 1)[0]


def private_kib():
    total = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1])
    return total


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    first, whole = [], []
    for _ in range(runs):
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)  # the cookie, then the app
        page.wait_for_selector("#transcript")
        t0 = time.perf_counter()
        page.goto(f"{base}/#/s/{session}")
        page.wait_for_selector("#transcript [data-seq]", state="attached", timeout=60_000)
        first.append(time.perf_counter() - t0)
        page.wait_for_function(
            f"() => Number(document.getElementById('transcript').dataset.last) >= {last}",
            timeout=60_000,
        )
        whole.append(time.perf_counter() - t0)
        context.close()
    print(f"first paint: median {statistics.median(first) * 1000:.0f} ms (best {min(first) * 1000:.0f})")
    print(f"whole session shown: median {statistics.median(whole) * 1000:.0f} ms (best {min(whole) * 1000:.0f})")

    before = private_kib()
    context = browser.new_context()
    tabs = []
    for _ in range(5):
        page = context.new_page()
        page.goto(url)
        page.goto(f"{base}/#/s/{session}")
        tabs.append(page)
    for page in tabs:
        page.wait_for_function(
            f"() => Number(document.getElementById('transcript').dataset.last) >= {last}",
            timeout=60_000,
        )
    time.sleep(2)
    after = private_kib()
    print(f"server private memory: {before / 1024:.1f} MiB, with 5 tabs on the session {after / 1024:.1f} MiB")
    browser.close()
