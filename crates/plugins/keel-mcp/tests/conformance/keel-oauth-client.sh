#!/bin/sh
# keel as the client of the conformance suite's auth scenarios: the suite appends the MCP
# server's URL. A fresh $KEEL_HOME names it as server `conf`; `keel mcp login conf` runs the
# whole OAuth flow (curl follows the authorization redirect, as a person's browser would);
# `keel mcp test conf` then connects with the stored token and lists the tools.
# Needs KEEL_BIN (the keel binary).
set -u
url="$1"
home=$(mktemp -d)
ws=$(mktemp -d)
trap 'rm -rf "$home" "$ws"' EXIT
printf '[mcp_servers.conf]\nurl = "%s"\nstartup_timeout_sec = 10\n' "$url" > "$home/config.toml"
KEEL_HOME="$home" BROWSER="curl -sS -L --max-time 10 -o /dev/null" \
  "$KEEL_BIN" --cwd "$ws" mcp login conf --timeout 15 || exit 1
KEEL_HOME="$home" "$KEEL_BIN" --cwd "$ws" mcp test conf
