#!/usr/bin/env bash
# The service under a crowd of clients: a real `seed serve` holds 200 idle WebSockets (each must
# answer the service's pings) and 50 signed requests whose bodies dribble in, refuses 50 unsigned
# ones with 401 before their bodies, and answers a client's messages meanwhile, for five seconds.
# Fails unless all of that holds and the service's resident memory stays under the bound the
# README states (128 MiB). The check itself is tests/src/bin/load_check.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
cargo build --locked --quiet -p seed-server --bin seed
cargo build --locked --quiet -p seed-tests --bin load_check
"$target_dir/debug/load_check" "$target_dir/debug/seed" --rss-max-mib 128 --hold-secs 5
