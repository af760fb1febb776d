#!/usr/bin/env bash
# The Python package end to end (run by scripts/test.sh): installs it the way docs/install.md
# tells a user to, `pip install ./bindings/python` (PEP 517: pip fetches maturin, the build
# backend of pyproject.toml, into an isolated build env, and maturin builds the abi3 wheel),
# into a fresh venv with the pinned test requirements (never PyTorch), and runs
# bindings/python/tests against the release CLI binaries (built here if missing). Ray runs
# locally with usage statistics off. Prints the time each part took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
export RAY_USAGE_STATS_ENABLED=0
VENV=target/py-venv
if [[ ! -x $VENV/bin/python ]] || ! cmp -s bindings/python/test-requirements.txt $VENV/.requirements; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    $VENV/bin/python -m pip install -q --upgrade pip
    $VENV/bin/python -m pip install -q -r bindings/python/test-requirements.txt
    cp bindings/python/test-requirements.txt $VENV/.requirements
fi
t1=$(date +%s)
cargo build --release -p kin-infer-cli -p inmotion-cli
# The user's command (pip rebuilds and reinstalls a local directory every time), with two
# things only CI needs, both from the environment: the workspace's target dir, named so that
# maturin's cargo reuses the previous run's artifacts whatever the caller's environment says
# (pip builds in the tree, so cargo finds it anyway; an unchanged tree rebuilds in seconds),
# and the build env's maturin pinned to the version test-requirements.txt names (pyproject.toml
# allows any 1.x from 1.16).
grep -E '^maturin==' bindings/python/test-requirements.txt >$VENV/build-constraints.txt
CARGO_TARGET_DIR=$PWD/target PIP_BUILD_CONSTRAINT=$PWD/$VENV/build-constraints.txt \
    $VENV/bin/python -m pip install -q ./bindings/python
t2=$(date +%s)
# Import the installed wheel, not the source tree.
(cd bindings/python/tests && KIN_REQUIRE_RAY=1 ../../../$VENV/bin/python -m pytest -q -p no:cacheprovider .)
t3=$(date +%s)
native=$(echo $VENV/lib/python3*/site-packages/kin_infer/_native*.so)
echo "test-python: venv $((t1 - t0)) s, pip install $((t2 - t1)) s (native module $(du -h "$native" | cut -f1)), pytest $((t3 - t2)) s"
