#!/usr/bin/env bash
# Makes sure the `sqlite3` shell is installed: the service tests plant damage in a database
# with it for `seed fsck` to find (the tests themselves may not link SQLite outside the store).
# Installs Debian's `sqlite3` package with apt-get when it is missing (as root, or through sudo).
set -euo pipefail

say() { echo "sqlite3-shell.sh: $*" >&2; }

command -v sqlite3 >/dev/null && exit 0
command -v apt-get >/dev/null || {
    say "no sqlite3 shell and no apt-get to install it with: install sqlite3"
    exit 1
}
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        say "installing the sqlite3 shell needs root (or sudo): run \`apt-get install sqlite3\` first"
        exit 1
    fi
}
say "installing Debian's sqlite3 package (apt-get)"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sqlite3 >&2
