#!/usr/bin/env bash
# Fuzzes a running `seed serve` from its own OpenAPI document with schemathesis (from PyPI,
# installed into $CARGO_TARGET_DIR (default target/)/schemathesis-venv when missing). Requests go through a signing proxy
# (scripts/signing_proxy.py) that signs, with the service's local key as the CLI does, each request
# carrying the document's `signature` credential (the `Signature` header) set to a marker value.
# Needs the seed binary built (cargo build -p seed-server --bin seed).
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
CRYPTOGRAPHY_VERSION=50.0.2
# Pinned too: later releases describe their filters by parsing schemathesis's own source with
# `ast`, which this machine's CPython 3.11.7 refuses on that file ("AST constructor recursion
# depth mismatch"), failing the run with an error of the fuzzer's own.
HYPOTHESIS_VERSION=6.160.0
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
venv=$target_dir/schemathesis-venv
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$SCHEMATHESIS_VERSION" \
    || ! "$venv/bin/python" -c "import hypothesis; assert hypothesis.__version__ == '$HYPOTHESIS_VERSION'" 2>/dev/null; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "schemathesis==$SCHEMATHESIS_VERSION" \
        "hypothesis==$HYPOTHESIS_VERSION" "cryptography==$CRYPTOGRAPHY_VERSION"
fi

work=$(mktemp -d)
cleanup() {
    [[ -n "${proxy_pid:-}" ]] && kill "$proxy_pid" 2>/dev/null || true
    [[ -n "${seed_pid:-}" ]] && kill -TERM "$seed_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

SEED_PROVIDER=scripted "$target_dir/debug/seed" serve --data-dir "$work/data" --listen 127.0.0.1:0 >"$work/serve.out" 2>"$work/serve.err" &
seed_pid=$!
for _ in $(seq 1 200); do
    grep -q "^seed: listening on " "$work/serve.out" 2>/dev/null && break
    sleep 0.05
done
url=$(sed -n 's/^seed: listening on //p' "$work/serve.out")
[[ -n "$url" ]] || { cat "$work/serve.err"; echo "seed serve did not start"; exit 1; }

# The credential schemathesis is given: the proxy replaces it with a real signature, and sends a
# request without it (or with a made-up one) unsigned, so the server must answer 401.
marker=seed-signing-proxy-signs-this
"$venv/bin/python" scripts/signing_proxy.py "$work/data/local.key" "$url" "$work/proxy.port" "$marker" &
proxy_pid=$!
for _ in $(seq 1 200); do
    [[ -s "$work/proxy.port" ]] && break
    sleep 0.05
done
proxy="http://127.0.0.1:$(cat "$work/proxy.port")"

# `-H Signature: …` is the auth schemathesis knows as explicit (the document's `signature` apiKey
# scheme names that header), so ignored_auth checks each operation that declares auth by sending it
# again without the header, then with a made-up Signature, then with a made-up bearer token (the
# proxy passes these on unsigned), and expects 401 or 403.
# Run from the scratch dir, so schemathesis keeps its cache there and not in the work tree.
schemathesis="$venv/bin/schemathesis"
repo=$PWD
cd "$work"
"$schemathesis" --config-file "$repo/scripts/schemathesis.toml" run "$url/v1/openapi.json" \
    --url "$proxy" \
    -H "Signature: $marker" \
    --checks all \
    --max-examples "${SEED_SCHEMATHESIS_EXAMPLES:-30}" \
    --generation-deterministic \
    --phases examples,coverage,fuzzing,stateful \
    --request-timeout 30 \
    --workers 2 \
    --exclude-path /v1/subscribe \
    --exclude-path /login \
    --no-color
