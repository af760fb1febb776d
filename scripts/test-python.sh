#!/usr/bin/env bash
# The Python package end to end (run by scripts/test.sh): builds the abi3 wheel with maturin,
# installs it into a fresh venv with the pinned test requirements (never PyTorch), and runs
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
rm -rf target/wheels
$VENV/bin/maturin build --release --manifest-path bindings/python/Cargo.toml --out target/wheels
$VENV/bin/python -m pip install -q --force-reinstall --no-deps target/wheels/kin_infer-*.whl
t2=$(date +%s)
# Import the installed wheel, not the source tree.
(cd bindings/python/tests && KIN_REQUIRE_RAY=1 ../../../$VENV/bin/python -m pytest -q -p no:cacheprovider .)
t3=$(date +%s)
echo "test-python: venv $((t1 - t0)) s, wheel $((t2 - t1)) s ($(du -h target/wheels/*.whl | cut -f1)), pytest $((t3 - t2)) s"
