#!/usr/bin/env bash
# The web UI's end-to-end tests: headless Chromium (Debian's `chromium`, installed with apt-get
# when /usr/bin/chromium is missing) driven by playwright-core (npm, pinned in
# server/tests/ui/package-lock.json, installed with `npm ci` when missing) against a real
# `seed serve` with the scripted model, on a free loopback port and a scratch data dir (one test
# starts, crashes and restarts a service of its own, from the binary in SEED_BIN).
# Screenshots of the main states go to $CARGO_TARGET_DIR (default target/)/ui-screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
suite=server/tests/ui

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v npm >/dev/null || missing+=(nodejs npm)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "installing ${missing[*]} (Debian packages)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ ! -d $suite/node_modules/playwright-core ]]; then
    echo "installing playwright-core into $suite/node_modules"
    (cd "$suite" && npm ci --no-audit --no-fund --loglevel=error)
fi

cargo build --locked --quiet -p seed-server --bin seed

work=$(mktemp -d)
cleanup() {
    [[ -n "${seed_pid:-}" ]] && kill -TERM "$seed_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

SEED_PROVIDER=scripted RUST_LOG=warn "$target_dir/debug/seed" serve --data-dir "$work/data" \
    --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
seed_pid=$!
for _ in $(seq 1 200); do
    grep -q "^sign in a browser (one time): " "$work/serve.out" 2>/dev/null && break
    sleep 0.05
done
url=$(sed -n 's/^seed: listening on //p' "$work/serve.out")
login=$(sed -n 's/^sign in a browser (one time): //p' "$work/serve.out")
[[ -n "$url" && -n "$login" ]] || { cat "$work/serve.err"; echo "seed serve did not start"; exit 1; }

# A second account, signed in with a token minted by a signed request (`seed token`).
seed=("$target_dir/debug/seed" --data-dir "$work/data")
public_key=$("${seed[@]}" key --new "$work/other.key" | sed -n 's/^public key: //p')
"${seed[@]}" account add "$public_key" >/dev/null
other_token=$("${seed[@]}" --key "$work/other.key" token 2>/dev/null)

screenshots=$target_dir/ui-screenshots
rm -rf "$screenshots"
mkdir -p "$screenshots"
echo "UI tests against $url (screenshots in $screenshots)"
started=$SECONDS
status=0
(cd "$suite" && SEED_URL="$url" SEED_LOGIN_URL="$login" SEED_OTHER_TOKEN="$other_token" \
    SEED_BIN="$target_dir/debug/seed" SEED_UI_SCREENSHOTS="$screenshots" \
    node --test --test-concurrency=1 --test-reporter=spec unit.test.js approvals.test.js ui.test.js) || status=$?
echo "UI suite took $((SECONDS - started)) s"
if [[ $status -ne 0 ]]; then
    echo "--- seed serve's log"
    tail -n 50 "$work/serve.err"
fi
exit $status
