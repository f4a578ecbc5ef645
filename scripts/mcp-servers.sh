#!/usr/bin/env bash
# Installs, when missing, the MCP servers seed-mcp's tests run against, pinned, into
# $CARGO_TARGET_DIR (default target/)/mcp-servers:
# - node/: the npm reference servers @modelcontextprotocol/server-everything and
#   server-filesystem (exact versions in tests/mcp/package.json, every dependency in
#   tests/mcp/package-lock.json), with `npm ci`;
# - venv/: the Python MCP SDK `mcp` and its dependencies (tests/mcp/requirements.txt), which
#   tests/mcp/test_server.py runs on.
# Idempotent: quiet when both are installed from the current pins; prints what it installs.
# The tests (mcp/tests/it) run it once, under a lock, when a server is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pins=tests/mcp
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
root=$target_dir/mcp-servers

node_dir=$root/node
if ! cmp -s "$pins/package-lock.json" "$node_dir/package-lock.json" \
    || [[ ! -x $node_dir/node_modules/.bin/mcp-server-everything ]] \
    || [[ ! -x $node_dir/node_modules/.bin/mcp-server-filesystem ]]; then
    command -v npm >/dev/null || { echo "mcp-servers.sh: npm is needed (Node 20 or later)" >&2; exit 1; }
    echo "installing @modelcontextprotocol/server-everything and server-filesystem (npm, $pins/package-lock.json) into $node_dir"
    mkdir -p "$node_dir"
    cp "$pins/package.json" "$pins/package-lock.json" "$node_dir/"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

venv=$root/venv
if ! cmp -s "$pins/requirements.txt" "$venv/requirements.txt" || [[ ! -x $venv/bin/python ]]; then
    python=$(command -v python3.11 || command -v python3)
    echo "installing the Python MCP SDK (PyPI, $pins/requirements.txt) into $venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$pins/requirements.txt"
    cp "$pins/requirements.txt" "$venv/requirements.txt"
fi
