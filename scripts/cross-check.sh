#!/usr/bin/env bash
# Proves the portable builds of inmotion-infer on this machine:
#   - x86_64-unknown-linux-musl (static) under `qemu-x86_64 -cpu Westmere` (no AVX, AVX2, FMA),
#   - aarch64-unknown-linux-gnu under `qemu-aarch64`,
# each running `check` on every fixture artifact under tests/fixtures/inmotion (conformance/
# included); fails unless every one prints PARITY OK. Then kin-infer-core's quant_matvec
# example under qemu-aarch64 (the NEON tier's block-quantized products, bit for bit). Installs what is missing (Debian packages
# qemu-user, musl-tools, gcc-aarch64-linux-gnu; rustup targets). No RUSTFLAGS / target-cpu:
# the binaries pick their SIMD tier at run time.
#
# Usage: scripts/cross-check.sh [FIXTURES_DIR]   (env: QEMU_X86_CPU, default Westmere)
set -euo pipefail
cd "$(dirname "$0")/.."
FIX="${1:-tests/fixtures/inmotion}"
CPU="${QEMU_X86_CPU:-Westmere}"
MUSL=x86_64-unknown-linux-musl
ARM=aarch64-unknown-linux-gnu
TARGET_DIR="${CARGO_TARGET_DIR:-target}"

need_apt=()
command -v qemu-x86_64 >/dev/null || need_apt+=(qemu-user)
command -v musl-gcc >/dev/null || need_apt+=(musl-tools)
command -v aarch64-linux-gnu-gcc >/dev/null || need_apt+=(gcc-aarch64-linux-gnu)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "cross-check: installing ${need_apt[*]}" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user musl-tools gcc-aarch64-linux-gnu >&2
fi
installed="$(rustup target list --installed)"
for t in $MUSL $ARM; do
    grep -qx "$t" <<<"$installed" || rustup target add "$t" >&2
done

unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
cargo build --release -p inmotion-cli --target $MUSL >&2
cargo build --release -p inmotion-cli --target $ARM >&2
MUSL_BIN="$TARGET_DIR/$MUSL/release/inmotion-infer"
ARM_BIN="$TARGET_DIR/$ARM/release/inmotion-infer"
file "$MUSL_BIN" | grep -q "static" || { echo "cross-check: $MUSL_BIN is not static" >&2; exit 1; }
# The edge binary's budget (issue 12): static, stripped, under 3 MB, linking no tokenizer and
# no template engine (it depends on kin-infer-core only).
MUSL_BYTES=$(stat -c %s "$MUSL_BIN")
echo "cross-check: $MUSL_BIN is $MUSL_BYTES bytes ($(file -b "$MUSL_BIN" | grep -o 'not stripped\|stripped'))"
[ "$MUSL_BYTES" -lt 3000000 ] || { echo "cross-check: $MUSL_BIN is $MUSL_BYTES bytes, over the 3 MB budget" >&2; exit 1; }
file "$MUSL_BIN" | grep -q ", stripped" || { echo "cross-check: $MUSL_BIN is not stripped" >&2; exit 1; }
if cargo tree -p inmotion-cli -e normal --prefix none 2>/dev/null | grep -qE '^(tokenizers|minijinja) '; then
    echo "cross-check: inmotion-infer depends on a tokenizer or template engine" >&2; exit 1
fi

mapfile -t ARTS < <(find "$FIX" -name golden.json -printf '%h\n' | sort)
[ ${#ARTS[@]} -gt 0 ] || { echo "cross-check: no artifacts under $FIX" >&2; exit 1; }

fail=0
run_all() {  # label, runner...
    local label="$1"; shift
    local ok=0
    for a in "${ARTS[@]}"; do
        local out
        out="$("$@" check --artifact "$a" --golden "$a" 2>&1)" || true
        if grep -qx "PARITY OK" <<<"$out"; then
            ok=$((ok + 1))
            printf '%-12s %-45s %s\n' "$label" "${a#"$FIX"/}" "$(grep 'max |diff|' <<<"$out")"
        else
            printf '%-12s %-45s FAILED\n%s\n' "$label" "${a#"$FIX"/}" "$out"
            fail=1
        fi
    done
    echo "$label: $ok / ${#ARTS[@]} PARITY OK ($("$@" describe --artifact "${ARTS[0]}" | grep kernel_tier))"
}
run_all "musl/$CPU" qemu-x86_64 -cpu "$CPU" "$MUSL_BIN"
run_all "aarch64" qemu-aarch64 -L /usr/aarch64-linux-gnu "$ARM_BIN"
# The NEON tier's block-quantized products (kernels/neon_quant.rs staging, the scalar path for
# the rest) against its f32 products over the dequantized matrices: bits equal, or exit 1.
cargo build --release -p kin-infer-core --example quant_matvec --target $ARM >&2
qm="$(qemu-aarch64 -L /usr/aarch64-linux-gnu "$TARGET_DIR/$ARM/release/examples/quant_matvec" 96 512 1 2>&1)" \
    || { echo "$qm"; echo "aarch64: quant_matvec FAILED (bits differ)" >&2; fail=1; }
echo "$qm"
if [ "$(grep -c 'neon .*bits equal: true' <<<"$qm")" -ne 6 ]; then
    echo "aarch64: quant_matvec did not check the NEON tier on all six types" >&2
    fail=1
else
    echo "aarch64: quantized products on the NEON tier equal their f32 twins"
fi
# The q8 activation mode's NEON kernel (kernels/neon_q8.rs) against the generic twin, bit for
# bit, every type, thread count and batch row (kin-infer-core/tests/q8_kernels.rs).
q8_test="$(cargo test --release -p kin-infer-core --target $ARM --test q8_kernels --no-run \
    --message-format=json 2>/dev/null | grep -o '"executable":"[^"]*q8_kernels[^"]*"' | cut -d'"' -f4 | tail -1)"
if [ -z "$q8_test" ]; then
    echo "aarch64: could not build the q8 kernel tests" >&2
    fail=1
elif q8="$(qemu-aarch64 -L /usr/aarch64-linux-gnu "$q8_test" --nocapture 2>&1)" \
    && grep -q 'tiers tested: \["generic", "neon"\]' <<<"$q8"; then
    echo "aarch64: q8 products on the NEON tier equal the generic twin's ($(grep 'test result' <<<"$q8"))"
else
    echo "$q8"
    echo "aarch64: q8 kernel tests FAILED on the NEON tier" >&2
    fail=1
fi
if [ $fail -ne 0 ]; then
    echo "cross-check: FAILED" >&2
    exit 1
fi
echo "cross-check: every artifact PARITY OK on both targets"
