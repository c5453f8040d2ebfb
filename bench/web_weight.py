"""What a web app makes the browser load: the JavaScript and CSS a page pulls in (every script
and stylesheet response, raw and gzip-compressed here), loaded in Chromium by Playwright.
Usage: web_weight.py URL_WITH_TOKEN [CHROMIUM]   (bench/README.md, "The web app")"""

import gzip
import sys

from playwright.sync_api import sync_playwright

url = sys.argv[1]
chromium = sys.argv[2] if len(sys.argv) > 2 else "/usr/bin/chromium"
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    page = browser.new_page()
    bodies = []

    def on_response(response):
        if response.request.resource_type in ("script", "stylesheet"):
            try:
                bodies.append((response.url, response.request.resource_type, response.body()))
            except Exception:
                pass

    page.on("response", on_response)
    page.goto(url, wait_until="networkidle")
    page.wait_for_timeout(2000)
    browser.close()

raw = sum(len(b) for _, _, b in bodies)
packed = sum(len(gzip.compress(b)) for _, _, b in bodies)
for kind in ("script", "stylesheet"):
    n = [b for _, k, b in bodies if k == kind]
    print(f"{kind}: {len(n)} responses, {sum(map(len, n)):,} B raw, "
          f"{sum(len(gzip.compress(b)) for b in n):,} B gzip")
print(f"total JS+CSS: {raw:,} B raw, {packed:,} B gzip")
