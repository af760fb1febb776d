#!/usr/bin/env bash
# CI: no build product in git. Fails when a tracked file is larger than 5 MB (the largest
# committed fixture is well under 1 MB; a native library, wheel or binary is not) or is a
# shared library, wheel or object file of any size.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=$((5 * 1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
    [[ -f "$f" ]] || continue
    size=$(stat -c %s "$f")
    if (( size > limit )); then
        echo "check-tracked-files: $f is tracked and $size bytes (limit 5 MB): build products and large data stay out of git" >&2
        bad=1
    fi
    case "$f" in
        *.so|*.so.*|*.pyd|*.dylib|*.whl|*.o|*.a|*.rlib)
            echo "check-tracked-files: $f is a build product and must not be tracked" >&2
            bad=1 ;;
    esac
done < <(git ls-files -z)
if (( bad )); then exit 1; fi
echo "check-tracked-files: $(git ls-files | wc -l) tracked files, none a build product or over 5 MB"
