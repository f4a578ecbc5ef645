#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests of the PostgreSQL engine.
#
#   scripts/postgres.sh start      brings one up and prints, as shell lines to eval,
#                                  `export SEED_TEST_DATABASE_URL=postgres://…` and
#                                  `export SEED_TEST_POSTGRES_DIR=…` (the temp dir it lives in)
#   scripts/postgres.sh stop DIR   stops the cluster in DIR and removes DIR
#
# `start` installs Debian's `postgresql` package with apt-get when no initdb is found under
# /usr/lib/postgresql/*/bin (as root, or through sudo), without the package's own cluster. The
# cluster is made by `initdb` in a new temp dir; PostgreSQL refuses to run as root, so as root
# it runs as the unprivileged user $SEED_POSTGRES_USER (default `postgres`, made with
# `useradd --system` when missing). It listens on 127.0.0.1 alone, on a free port, and on a
# socket in the temp dir; local connections are trusted (no password); the superuser is `seed`.
# It keeps nothing worth keeping, so it runs without fsync: a test's commits need not survive a
# power loss, only the tests. With SEED_POSTGRES_DURABLE=1 it syncs every commit, as a host runs
# PostgreSQL (the bench's floors; options given on the command line outrank ALTER SYSTEM).
# Messages go to stderr; stdout has the export lines alone, so `eval "$(scripts/postgres.sh start)"`
# works. scripts/test runs it when SEED_TEST_DATABASE_URL is unset.
set -euo pipefail

pg_user=${SEED_POSTGRES_USER:-postgres}

say() { echo "postgres.sh: $*" >&2; }

# The bin dir of the newest PostgreSQL installed, or nothing.
find_bin() {
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x $dir/initdb && -x $dir/pg_ctl ]]; then
            echo "$dir"
            return
        fi
    done
}

# Runs a command as root: itself when it is root, else through sudo.
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        say "installing PostgreSQL needs root (or sudo): run \`apt-get install postgresql\` first"
        exit 1
    fi
}

install_postgres() {
    command -v apt-get >/dev/null || {
        say "no PostgreSQL under /usr/lib/postgresql and no apt-get to install it with"
        exit 1
    }
    say "installing Debian's postgresql package (apt-get)"
    # The package would make and start a cluster of its own (port 5432) unless told not to.
    if [[ ! -e /etc/postgresql-common/createcluster.conf ]]; then
        as_root mkdir -p /etc/postgresql-common
        echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    # confold: the createcluster.conf written above is kept, without a question.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold postgresql >&2
}

# Runs a command as the cluster's user: as root, the unprivileged $pg_user; else oneself.
as_pg() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u "$pg_user" -- "$@"
    else
        "$@"
    fi
}

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local bin dir port
    bin=$(find_bin)
    if [[ -z $bin ]]; then
        install_postgres
        bin=$(find_bin)
        [[ -n $bin ]] || { say "apt-get installed no initdb under /usr/lib/postgresql"; exit 1; }
    fi
    if [[ $EUID -eq 0 ]] && ! id -u "$pg_user" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$pg_user"
    fi

    # As root, in /tmp: the cluster's user must reach it, and root's TMPDIR may be its own.
    local parent=${TMPDIR:-/tmp}
    [[ $EUID -ne 0 ]] || parent=/tmp
    dir=$(mktemp -d "$parent/seed-postgres.XXXXXX")
    # What `stop` checks before it removes a dir.
    touch "$dir/.seed-postgres"
    if [[ $EUID -eq 0 ]]; then
        chown "$pg_user" "$dir"
    fi
    as_pg "$bin/initdb" --pgdata="$dir/data" --username=seed --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }

    local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    if [[ ${SEED_POSTGRES_DURABLE:-0} == 1 ]]; then
        durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
    fi
    # Another process may take the port between free_port and the start: try a few.
    local attempt
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        if as_pg "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/postgres.log" --wait \
            --options="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir $durability -c max_connections=300" \
            start >/dev/null; then
            echo "export SEED_TEST_DATABASE_URL=postgres://seed@127.0.0.1:$port/postgres"
            echo "export SEED_TEST_POSTGRES_DIR=$dir"
            say "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, in $dir"
            return
        fi
        say "the start on port $port failed (attempt $attempt):"
        tail -n 5 "$dir/postgres.log" >&2 || true
    done
    rm -rf "$dir"
    exit 1
}

stop() {
    local dir=${1:?usage: scripts/postgres.sh stop DIR}
    [[ -e $dir/.seed-postgres ]] || { say "$dir is not a dir postgres.sh start made"; exit 1; }
    local bin
    bin=$(find_bin)
    if [[ -n $bin && -e $dir/data/postmaster.pid ]]; then
        as_pg "$bin/pg_ctl" --pgdata="$dir/data" --mode=immediate --wait stop >/dev/null || true
    fi
    rm -rf "$dir"
}

case ${1:-} in
start) start ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: scripts/postgres.sh start | stop DIR" >&2
    exit 2
    ;;
esac
