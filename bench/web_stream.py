"""The web app showing an answer as it streams (bench/web_stream.sh).
Usage: web_stream.py URL_WITH_TOKEN WORKSPACE RUNS CHARS [CHROMIUM]

For each of RUNS new sessions: the page records every frame it paints (requestAnimationFrame)
and every long task (PerformanceObserver, over 50 ms) from the prompt sent until the answer is
whole; printed: the rate the answer arrived at in the page (CHARS / 4 tokens, as the mock
streams 4 characters a chunk, over the time from its first text shown to its whole message), the
frames painted, the longest gap between two frames, the frames dropped (a gap of n frame
periods, 16.7 ms at 60 Hz, drops n - 1) and the long tasks."""

import json
import statistics
import sys

from playwright.sync_api import sync_playwright

url, workspace, runs, source_chars = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
chromium = sys.argv[5] if len(sys.argv) > 5 else "/usr/bin/chromium"
base = url.split("/?", 1)[0]
PERIOD = 1000 / 60

RECORD = """() => {
  window.__stop = false;
  window.__frames = [];
  window.__long = [];
  window.__firstText = null;
  const tick = (t) => { window.__frames.push(t); if (!window.__stop) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__long.push(e.duration); })
    .observe({ type: 'longtask', buffered: false });
  new MutationObserver(() => {
    if (window.__firstText === null && document.querySelector('.msg.assistant .text')) window.__firstText = performance.now();
  }).observe(document.getElementById('transcript'), { childList: true, subtree: true });
}"""

results = []
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    for run in range(runs):
        created = page.evaluate(
            """async (cwd) => { const r = await fetch('/api/v1/sessions', {method: 'POST',
               headers: {'Content-Type': 'application/json'}, body: JSON.stringify({cwd})});
               return (await r.json()).id; }""", workspace)
        page.goto(f"{base}/#/s/{created}")
        page.get_by_role("textbox", name="Message").wait_for()
        page.evaluate(RECORD)
        box = page.get_by_role("textbox", name="Message")
        box.fill(f"stream it #{run + 1}.")
        start = page.evaluate("performance.now()")
        box.press("Enter")
        # The answer is whole once its message replaced the streamed text (the Copy button).
        page.locator(".msg.assistant .actions").first.wait_for()
        end = page.evaluate("performance.now()")
        page.evaluate("window.__stop = true")
        frames = page.evaluate("window.__frames")
        longs = page.evaluate("window.__long")
        first = page.evaluate("window.__firstText")
        chars = page.evaluate("document.querySelector('.msg.assistant').textContent.length")
        window = [t for t in frames if t >= (first or start)]
        gaps = [b - a for a, b in zip(window, window[1:])]
        dropped = sum(max(0, round(g / PERIOD) - 1) for g in gaps)
        streamed_ms = end - (first or start)
        results.append({
            "shown_chars": chars, "streamed_ms": round(streamed_ms),
            "tokens_per_s": round(source_chars / 4 / (streamed_ms / 1000), 1),
            "frames": len(window), "max_gap_ms": round(max(gaps), 1) if gaps else None,
            "dropped": dropped, "long_tasks": len(longs),
            "long_task_ms": round(sum(longs)),
        })
        print(json.dumps({"run": run + 1, **results[-1]}), flush=True)
    browser.close()

print(json.dumps({
    "median_tokens_per_s": statistics.median(r["tokens_per_s"] for r in results),
    "median_frames": statistics.median(r["frames"] for r in results),
    "median_dropped": statistics.median(r["dropped"] for r in results),
    "worst_max_gap_ms": max(r["max_gap_ms"] or 0 for r in results),
    "long_tasks": sum(r["long_tasks"] for r in results),
}))
