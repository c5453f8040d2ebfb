"""keel's web app in a real browser: Playwright (pinned in requirements.txt) driving Debian's
Chromium by its path, against the real `keel serve` that tests/serve/web_app.rs started (with
the loopback mock model). Every step finds controls by their accessible names, as a person
using a screen reader would. Exits non-zero with what failed; screenshots go to ARTIFACTS.

Usage: app_test.py main|trust|open|damaged|rough|plugins|automation URL_WITH_TOKEN WORKSPACE ARTIFACTS
"""

import json
import os
import re
import sys
import urllib.parse

from playwright.sync_api import expect, sync_playwright

SCENARIO, URL, WORKSPACE, ARTIFACTS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
CHROMIUM = os.environ.get("KEEL_TEST_CHROMIUM", "/usr/bin/chromium")
TIMEOUT = 30_000
# Assertions wait as long as actions do: CI runs this beside other tests on 2 cores.
expect.set_options(timeout=TIMEOUT)

parts = urllib.parse.urlsplit(URL)
BASE = f"{parts.scheme}://{parts.netloc}"


def shot(page, name):
    page.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


def send(page, text):
    box = page.get_by_role("textbox", name="Message")
    box.fill(text)
    box.press("Enter")


def unfold(page):
    """Open every ended turn's fold ("Completed in …"), as a person clicks it.

    A turn folds when it ends, which comes after its answer is on screen: wait for the end
    (no Stop button) or the fold made then would stay closed."""
    expect(page.locator("#stop")).to_be_hidden()
    closed = page.locator("details.work:not([open]) > summary")
    for _ in range(closed.count()):
        closed.first.click()


def main():
    os.makedirs(ARTIFACTS, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            {"main": run, "trust": trust, "open": opened, "damaged": damaged,
             "rough": rough, "plugins": plugins,
             "automation": automation}[SCENARIO](browser)
        except Exception:
            # What each page showed when it failed.
            for i, page in enumerate(p for c in browser.contexts for p in c.pages):
                try:
                    shot(page, f"failure-{SCENARIO}-{i}")
                except Exception:
                    pass
            raise
        finally:
            browser.close()


def run(browser):
    # Without the token: a page that says where the URL is, and no data.
    stranger = browser.new_context()
    page = stranger.new_page()
    page.set_default_timeout(TIMEOUT)
    response = page.goto(BASE + "/")
    assert response.status == 401, response.status
    expect(page.get_by_role("heading", name="keel serve needs its token")).to_be_visible()
    listed = page.evaluate(
        "async () => { const r = await fetch('/api/v1/sessions'); return [r.status, await r.text()]; }"
    )
    assert listed[0] == 401 and WORKSPACE not in listed[1], listed
    stranger.close()

    # With it: the app, its cookie kept.
    context = browser.new_context(
        viewport={"width": 1200, "height": 800},
        permissions=["clipboard-read", "clipboard-write"],
    )
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    expect(page).to_have_url(BASE + "/")
    assert any(c["name"] == "keel_token" and c["httpOnly"] for c in context.cookies()), context.cookies()

    # A new session in the workspace.
    page.get_by_role("button", name="New session").click()
    page.get_by_role("textbox", name="Workspace").fill(WORKSPACE)
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/s/"))
    session_url = page.url

    # A prompt, its answer streamed in; the sidebar lists the session by its first prompt.
    send(page, "say hello")
    transcript = page.get_by_role("region", name="Conversation")
    expect(transcript.get_by_text("Hello from the browser.")).to_be_visible()
    expect(page.get_by_role("link", name="say hello")).to_be_visible()
    # An answer's text is one click from the clipboard.
    copy = transcript.get_by_role("button", name="Copy: Hello from the browser.")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "Hello from the browser."
    # Link puts a link to the answer on the clipboard; the page opens on it, marked.
    transcript.get_by_role("button", name="Link to: Hello from the browser.").click()
    link = page.evaluate("navigator.clipboard.readText()")
    assert re.search(r"#/s/[^/]+/m/\d+$", link), link
    linked = context.new_page()
    linked.set_default_timeout(TIMEOUT)
    linked.goto(link)
    expect(linked.locator(".target")).to_contain_text("Hello from the browser.")
    linked.close()
    # A thumb under the answer, kept in the session's log.
    good = transcript.get_by_role("button", name="Good answer: Hello from the browser.")
    good.click()
    expect(good).to_have_attribute("aria-pressed", "true")
    bad = transcript.get_by_role("button", name="Bad answer: Hello from the browser.")
    expect(bad).to_have_attribute("aria-pressed", "false")
    shot(page, "answer")

    # A bash call asking to leave the sandbox asks first: approved in the dialog, its card
    # shows the output.
    send(page, "run the check")
    dialog = page.get_by_role("dialog", name="Allow bash?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_text("echo checked-by-keel")).to_be_visible()
    shot(page, "approval")
    dialog.get_by_role("button", name="Approve", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(transcript.get_by_label("bash output")).to_contain_text("checked-by-keel")
    expect(transcript.get_by_text("The check ran.")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_visible()

    # Two tabs on one session stay in step: what one sends, both show.
    other = context.new_page()
    other.set_default_timeout(TIMEOUT)
    other.goto(session_url)
    other_transcript = other.get_by_role("region", name="Conversation")
    expect(other_transcript.get_by_text("The check ran.")).to_be_visible()
    send(other, "from the second tab")
    for view in (transcript, other_transcript):
        expect(view.get_by_text("Answered in both tabs.")).to_be_visible()

    # Reloaded mid-turn (the model pauses mid-answer): the stream goes on where it was.
    send(page, "take your time")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    # Mid-turn, what the server would refuse is not offered: a mode switch, a rewind.
    expect(page.get_by_role("combobox", name="Mode")).to_be_disabled()
    expect(page.get_by_role("button", name="Rewind to before: say hello")).to_be_disabled()
    page.reload()
    expect(page.get_by_role("region", name="Conversation").get_by_text("Slow but complete.")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("combobox", name="Mode")).to_be_enabled()

    # An edit (the default sandbox lets it change the workspace): its card shows a diff.
    send(page, "fix the notes")
    transcript = page.get_by_role("region", name="Conversation")
    diff = transcript.get_by_label(re.compile(r"^diff of .*notes\.txt$"))
    expect(diff.locator("del")).to_have_text("- hello\n")
    expect(diff.locator("ins")).to_have_text("+ hello, world\n")
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    unfold(page)
    expect(diff).to_be_visible()
    # The turn's end line says which files it changed (the rewind points of the checkpoints).
    expect(transcript.locator(".turn-end").last).to_contain_text("It changed: notes.txt")
    shot(page, "session")
    with open(os.path.join(WORKSPACE, "notes.txt")) as f:
        notes = f.read()
    assert notes == "hello, world\n", notes

    # The model's questions, answered in the form that takes the composer's place.
    send(page, "ask me")
    form = page.get_by_role("dialog", name="Questions")
    expect(form.get_by_text("Which language?")).to_be_visible()
    form.get_by_role("radio", name="Go").check()
    form.get_by_role("textbox", name="What is the project called?").fill("keelweb")
    shot(page, "questions")
    form.get_by_role("button", name="Answer").click()
    expect(form).to_be_hidden()
    expect(transcript.get_by_text("Setting up now.")).to_be_visible()

    # An image sent with a message reaches the model; a file that is no image is refused,
    # and the page says why (the message stays in the composer).
    png = os.path.join(ARTIFACTS, "dot.png")
    with open(png, "wb") as f:
        f.write(bytes.fromhex(
            "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
            "0000000d49444154789c6360f8cfc0000003010100c9fe92ef0000000049454e44ae426082"))
    fake = os.path.join(ARTIFACTS, "fake.png")
    with open(fake, "w") as f:
        f.write("this is not an image\n")
    picker = page.get_by_label("Attach images")
    picker.set_input_files(fake)
    send(page, "look at this")
    expect(page.get_by_role("status")).to_contain_text("not sent: images[0]")
    expect(page.get_by_role("textbox", name="Message")).to_have_value("look at this")
    picker.set_input_files(png)
    expect(page.get_by_text("1 image: dot.png")).to_be_visible()
    page.get_by_role("textbox", name="Message").press("Enter")
    # The image shows in the conversation, loaded from the server's attachment store.
    image = transcript.get_by_role("img", name="image 1 of the message")
    expect(image).to_be_visible()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.images img')].some((i) => i.complete && i.naturalWidth === 1)"
    )
    expect(transcript.get_by_text("A small dot.")).to_be_visible()

    # Rewound to before that message: its turn leaves the conversation, the file is as it was,
    # and the prompt is back in the composer.
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    transcript.get_by_role("button", name="Rewind to before: fix the notes").click()
    expect(transcript.get_by_text("Edited.")).to_be_hidden()
    expect(transcript.get_by_text("Slow but complete.")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_have_value("fix the notes")
    with open(os.path.join(WORKSPACE, "notes.txt")) as f:
        notes = f.read()
    assert notes == "hello\n", notes
    page.get_by_role("textbox", name="Message").fill("")

    # Forked from before the check: the fork opens, holding what came before it only.
    first = urllib.parse.unquote(session_url.split("#/s/", 1)[1])
    transcript.get_by_role("button", name="Fork from before: run the check").click()
    expect(page).not_to_have_url(session_url)
    fork = urllib.parse.unquote(page.url.split("#/s/", 1)[1])
    transcript = page.get_by_role("region", name="Conversation")
    expect(transcript.get_by_text("Hello from the browser.")).to_be_visible()
    expect(transcript.get_by_text("The check ran.")).to_have_count(0)

    # Full-text search finds the first session by a word of its answers.
    search = page.get_by_role("searchbox", name="Search every session")
    search.fill("complete")
    search.press("Enter")
    results = page.get_by_role("navigation", name="Search results")
    expect(results.get_by_role("link", name="say hello")).to_have_count(1)
    shot(page, "search")

    # The session's HTML export, one click away (the fork's: what it holds).
    with context.expect_page() as popup:
        page.get_by_role("link", name="HTML export").click()
    exported = popup.value
    expect(exported.get_by_text("Hello from the browser.")).to_be_visible()
    assert "The check ran." not in exported.content()

    # On a phone-sized screen the app stacks: the conversation and the composer still there.
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    small = phone.new_page()
    small.set_default_timeout(TIMEOUT)
    small.goto(URL)
    small.goto(session_url)
    expect(small.get_by_role("region", name="Conversation").get_by_text("Hello from the browser.")).to_be_visible()
    expect(small.get_by_role("textbox", name="Message")).to_be_visible()
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is wider than the screen: {width}px"
    shot(small, "phone")
    phone.close()

    # What the page showed, for the Rust side to check against the server's log.
    print(json.dumps({"session": first, "fork": fork}))


def opened(browser):
    """The URL `keel web DIR` opened: the new-session form, for DIR."""
    page = browser.new_context().new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    expect(page.get_by_role("textbox", name="Workspace")).to_have_value(WORKSPACE)
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/s/"))
    # The session's settings, from the composer's pickers.
    page.get_by_role("combobox", name="Mode").select_option("read-only")
    expect(page.get_by_role("status")).to_have_text("mode read-only set")
    model = page.get_by_role("textbox", name="Model")
    model.fill("deepseek-v4-pro")
    model.press("Enter")
    expect(page.get_by_role("status")).to_have_text("model deepseek-v4-pro set")
    send(page, "say hello")
    expect(page.get_by_text("Hello from the browser.")).to_be_visible()
    expect(page.get_by_label("Session statistics")).to_contain_text("1 turn · 1 step")
    # The last request's share of the model's context window.
    expect(page.get_by_label("Session statistics")).to_contain_text(re.compile(r"context \d+ %"))
    # The turn's end (a mode is not switched mid-turn: the server says so).
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    # Plan mode: the model's todo list shows, and its plan is approved in the page.
    page.get_by_role("combobox", name="Mode").select_option("plan")
    expect(page.get_by_role("status")).to_have_text("mode plan set")
    send(page, "plan the work")
    dialog = page.get_by_role("dialog", name="Approve the plan?")
    expect(dialog.locator("strong")).to_have_text("test")
    expect(page.get_by_role("group").get_by_text("Todo (0/2)")).to_be_visible()
    shot(page, "plan")
    dialog.get_by_role("button", name="Approve plan").click()
    expect(page.get_by_text("Plan approved.")).to_be_visible()
    page.get_by_text("Todo (0/2)").click()
    expect(page.get_by_role("list", name="Todo")).to_contain_text("Write the test (in_progress)")
    # `/` offers the session's commands; /compact runs on the server (once the turn ended).
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    box = page.get_by_role("textbox", name="Message")
    box.fill("/comp")
    box.dispatch_event("input")
    page.get_by_role("list", name="Commands").get_by_role("button", name="/compact").click()
    expect(box).to_have_value("/compact ")
    box.press("Enter")
    expect(page.get_by_role("region", name="Conversation").get_by_text("history compacted")).to_be_visible()
    expect(box).to_have_value("")
    # A command the server refuses (no goal to pause) stays in the box, to fix or send again.
    box.fill("/goal pause")
    box.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("/goal:")
    expect(box).to_have_value("/goal pause")
    print(json.dumps({"session": urllib.parse.unquote(page.url.split("#/s/", 1)[1])}))


def damaged(browser):
    """A session whose log is damaged: the page names the damage; the app goes on."""
    page = browser.new_context().new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    page.goto(BASE + "/#/s/session-damaged")
    status = page.get_by_role("status")
    expect(status).to_contain_text("this session cannot be shown")
    expect(status).to_contain_text("corrupt at line 3")
    shot(page, "damaged")
    # The rest of the app still works: another session opens.
    page.get_by_role("link", name="say hello").click()
    expect(page.get_by_text("Hello from the browser.")).to_be_visible()
    print(json.dumps({"shown": True}))


def rough(browser):
    """A formation graph, a 5 MB tool output, and a tab left open while the server restarts.

    Handshake with tests/serve/web_app.rs: this writes ARTIFACTS/ready once the page is up;
    the test restarts the server (a new token) and writes its new URL to ARTIFACTS/restarted.
    """
    import time

    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    transcript = page.get_by_role("region", name="Conversation")

    # The formation graph of a tool result, drawn by the server, shown under the card.
    page.get_by_role("link", name="fix the notes").click()
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    # The ended turn's calls are folded under its time; opened, the cards are there.
    fold = transcript.locator("details.work > summary")
    expect(fold).to_have_text(re.compile(r"^Completed in \d+(\.\d)? s · 2 tool calls$"))
    expect(page.get_by_role("button", name="Formation graph of read notes.txt")).to_be_hidden()
    # The Trajectory tab: the turn's steps and calls, with how each ended.
    page.get_by_role("tab", name="Trajectory").click()
    trajectory = page.get_by_role("region", name="Trajectory")
    expect(trajectory).to_contain_text("Turn 1 completed in")
    calls = trajectory.locator(".trajectory-calls li")
    expect(calls).to_have_count(2)
    expect(calls.nth(0)).to_contain_text("read notes.txt done")
    expect(calls.nth(1)).to_contain_text("edit notes.txt done")
    expect(transcript).to_be_hidden()
    shot(page, "trajectory")
    page.get_by_role("tab", name="Chat").click()
    expect(trajectory).to_be_hidden()
    unfold(page)
    page.get_by_role("button", name="Formation graph of read notes.txt").click()
    graph = transcript.get_by_role("img", name="Formation graph of the read result")
    expect(graph).to_be_visible()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.graph img')].some((i) => i.complete && i.naturalWidth > 0)"
    )
    shot(page, "provenance")

    # Markdown as models write it: a heading, lists, a safe link (and an unsafe one as text),
    # a table, highlighted code, a quote.
    page.get_by_role("link", name="show markdown").click()
    expect(transcript.get_by_role("heading", name="The plan")).to_be_visible()
    expect(transcript.get_by_role("listitem").filter(has_text="First step")).to_be_visible()
    expect(transcript.locator("li li")).to_have_text("a nested point")
    docs = transcript.get_by_role("link", name="the docs")
    expect(docs).to_have_attribute("href", "https://example.com/docs")
    expect(transcript.get_by_role("link", name="this")).to_have_count(0)
    expect(transcript.get_by_text("not this", exact=False)).to_be_visible()
    expect(transcript.get_by_role("cell", name="keel")).to_be_visible()
    expect(transcript.locator("pre.code .tok-k").first).to_have_text("fn")
    expect(transcript.locator("pre.code .tok-c")).to_have_text("// done")
    expect(transcript.locator("blockquote strong")).to_have_text("words")
    # The turn's time, and the step's tokens under its answer.
    expect(transcript.get_by_text(re.compile(r"^turn 1 completed in \d+(\.\d)? s$"))).to_be_visible()
    expect(transcript.locator(".usage").first).to_have_text(re.compile(r"^[\d,]+ in · 61 out"))
    shot(page, "markdown")

    # A subagent's conversation, from its call's card; back to the parent from its head.
    page.get_by_role("link", name="delegate this").click()
    expect(transcript.get_by_text("The subagent counted.")).to_be_visible()
    unfold(page)
    transcript.get_by_role("link", name="Conversation of count files").click()
    expect(transcript.get_by_text("There are 3 files.")).to_be_visible()
    expect(transcript.locator(".plugin-message summary").filter(has_text="keel/subagent")).to_have_text("context from keel/subagent: count the files please")
    lineage = page.locator("#lineage")
    expect(lineage).to_contain_text("a subagent of")
    lineage.get_by_role("link").click()
    expect(transcript.get_by_text("The subagent counted.")).to_be_visible()

    # A stored session with a 5 MB tool output: the card shows its head and tail.
    page.get_by_role("link", name="the huge one").click()
    output = transcript.get_by_label("bash output")
    expect(output).to_contain_text("END-OF-BIG")
    expect(output).to_contain_text("characters not shown here")
    shown = output.evaluate("(n) => n.textContent.length")
    assert shown < 300_000, shown
    expect(transcript.get_by_text("turn 1 completed")).to_be_visible()

    # Back to the first session; the server restarts under the open tab.
    page.get_by_role("link", name="fix the notes").click()
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    open(os.path.join(ARTIFACTS, "ready"), "w").close()
    restarted = os.path.join(ARTIFACTS, "restarted")
    deadline = time.time() + 60
    while not os.path.exists(restarted):
        assert time.time() < deadline, "the server was not restarted"
        time.sleep(0.1)
    new_url = open(restarted).read().strip()
    status = page.get_by_role("status").first
    expect(status).to_have_text(re.compile("restarted with a new token"), timeout=60_000)
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    shot(page, "stale")
    # The URL the new server printed: the same sessions, nothing lost.
    page.goto(new_url)
    page.get_by_role("link", name="fix the notes").click()
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    print(json.dumps({"shown": True}))


def plugins(browser):
    """The plugins page: provenance turned on and an MCP server off for the workspace; a new
    session there records provenance (its tool cards offer their formation graph)."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    page.get_by_role("link", name="Plugins").click()
    region = page.get_by_role("region", name="Plugins")
    region.get_by_role("textbox", name="Workspace").fill(WORKSPACE)
    region.get_by_role("button", name="Show").click()
    rows = region.get_by_role("list", name="Plugins")
    provenance = rows.get_by_role("checkbox", name="provenance", exact=True)
    expect(provenance).not_to_be_checked()
    provenance.click()
    status = page.get_by_role("status").first
    expect(status).to_contain_text("provenance on in")
    expect(rows.get_by_role("checkbox", name="provenance", exact=True)).to_be_checked()
    docs = region.get_by_role("list", name="MCP servers").get_by_role("checkbox", name="docs")
    expect(docs).to_be_checked()
    docs.click()
    expect(status).to_contain_text("docs off in")
    expect(region.get_by_role("list", name="MCP servers").get_by_role("checkbox", name="docs")).not_to_be_checked()
    skills = region.get_by_role("list", name="Skills")
    expect(skills).to_contain_text("tidy")
    expect(skills).to_contain_text("Tidy the notes.")
    shot(page, "plugins")

    # A new session in the workspace runs with the switches.
    page.get_by_role("button", name="New session").click()
    page.get_by_role("textbox", name="Workspace", exact=True).first.fill(WORKSPACE)
    page.get_by_role("button", name="Create").click()
    expect(page).to_have_url(re.compile(r"#/s/"))
    expect(region).to_be_hidden()
    send(page, "fix the notes")
    transcript = page.get_by_role("region", name="Conversation")
    expect(transcript.get_by_text("Edited.")).to_be_visible()
    unfold(page)
    page.get_by_role("button", name="Formation graph of read notes.txt").click()
    expect(transcript.get_by_role("img", name="Formation graph of the read result")).to_be_visible()
    session = urllib.parse.unquote(page.url.split("#/s/", 1)[1])

    # `@` offers the workspace's paths, one level at a time; Tab takes the first.
    box = page.get_by_role("textbox", name="Message")
    box.press_sequentially("compare @no")
    paths = page.get_by_role("list", name="Paths")
    expect(paths.get_by_role("button", name="@notes.txt")).to_be_visible()
    box.press("Tab")
    expect(box).to_have_value("compare @notes.txt ")
    expect(paths).to_be_hidden()
    box.press_sequentially("and @../")
    page.wait_for_timeout(300)
    expect(paths).to_be_hidden()
    box.fill("")

    # Settings: the models and the endpoint's key as the server sees them (never the key), the
    # theme and the language, kept across a reload.
    page.get_by_role("link", name="Settings").click()
    settings = page.get_by_role("region", name="Settings")
    expect(settings.get_by_role("list", name="Models")).to_contain_text("deepseek-v4-flash (configured)")
    expect(settings).to_contain_text("127.0.0.1")
    expect(settings.get_by_role("table", name="Shortcuts")).to_contain_text("Stop the running turn")
    settings.get_by_role("combobox", name="Theme").select_option("dark")
    background = "getComputedStyle(document.body).backgroundColor"
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert page.evaluate(background) == "rgb(21, 23, 27)", page.evaluate(background)
    settings.get_by_role("combobox", name="Language").select_option("zh")
    expect(page.get_by_role("button", name="新会话")).to_be_visible()
    shot(page, "settings")
    page.reload()
    expect(page.get_by_role("button", name="新会话")).to_be_visible()
    assert page.evaluate(background) == "rgb(21, 23, 27)"
    # Chinese follows the page as it changes: a session's controls too.
    page.get_by_role("link", name="fix the notes").first.click()
    expect(page.get_by_role("button", name="发送")).to_be_visible()
    page.get_by_role("link", name="设置").click()
    page.get_by_role("combobox", name="语言").select_option("en")
    expect(page.get_by_role("button", name="New session")).to_be_visible()
    page.get_by_role("combobox", name="Theme").select_option("system")
    expect(page.locator("html")).not_to_have_attribute("data-theme", "dark")
    print(json.dumps({"session": session}))


def automation(browser):
    """The automation page: a repeating schedule made and deleted, a one-shot that fires."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    page.get_by_role("link", name="Automation").click()
    region = page.get_by_role("region", name="Automation")
    listed = region.get_by_role("list", name="Schedules")
    expect(listed).to_contain_text("No schedules.")
    form = region.get_by_role("form", name="New schedule")
    form.get_by_role("combobox", name="Session").select_option(label="say hello")
    form.get_by_role("textbox", name="Prompt").fill("check the build")
    form.get_by_role("spinbutton", name="In").fill("10")
    form.get_by_role("checkbox", name="Repeat").check()
    form.get_by_role("button", name="Schedule").click()
    status = page.get_by_role("status").first
    expect(status).to_contain_text("scheduled sched-1 (every 10 min")
    expect(listed).to_contain_text("check the build")
    expect(listed).to_contain_text("every 10 min")
    shot(page, "automation")
    listed.get_by_role("button", name="Delete sched-1 of say hello").click()
    expect(status).to_contain_text("deleted sched-1")
    expect(listed).to_contain_text("No schedules.")
    # A one-shot two seconds away fires into the session: its answer shows there.
    form.get_by_role("textbox", name="Prompt").fill("run the scheduled check")
    form.get_by_role("spinbutton", name="In").fill("2")
    form.get_by_role("combobox", name="Unit").select_option(label="seconds")
    form.get_by_role("checkbox", name="Repeat").uncheck()
    form.get_by_role("button", name="Schedule").click()
    expect(status).to_contain_text("scheduled sched-2 (once")
    listed.get_by_role("link", name="say hello").click()
    transcript = page.get_by_role("region", name="Conversation")
    expect(transcript.get_by_text("Scheduled check done.")).to_be_visible()
    # The schedule plugin's own item: a marker where the prompt came in.
    expect(transcript.get_by_text("scheduled prompt sched-2")).to_be_visible()

    # A goal: its bar shows while the round runs; paused, then cleared, from the bar.
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    send(page, "/goal --max-rounds 3 tidy the notes")
    goal = page.get_by_role("region", name="Goal")
    expect(goal).to_contain_text("round 1/3")
    shot(page, "goal")
    goal.get_by_role("button", name="Pause goal").click()
    expect(goal).to_contain_text("paused")
    expect(transcript.get_by_text("Tidying.")).to_be_visible()
    goal.get_by_role("button", name="Clear goal").click()
    expect(goal).to_be_hidden()
    print(json.dumps({"shown": True}))


def trust(browser):
    """An undecided workspace: the page asks, and the answer is the server's."""
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.goto(URL)
    page.get_by_role("button", name="New session").click()
    page.get_by_role("textbox", name="Workspace").fill(WORKSPACE)
    page.get_by_role("button", name="Create").click()
    dialog = page.get_by_role("dialog", name="Trust this workspace?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(".claude/settings.json: hooks.UserPromptSubmit")
    shot(page, "trust")
    dialog.get_by_role("button", name="Trust", exact=True).click()
    expect(dialog).to_be_hidden()
    trust_box = page.get_by_role("region", name="Workspace trust")
    expect(trust_box.get_by_role("status")).to_contain_text("is now trusted")
    print(json.dumps({"session": urllib.parse.unquote(page.url.split("#/s/", 1)[1])}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the failure, named, for the Rust test's message
        import traceback

        traceback.print_exc()
        print(f"web app test failed: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
