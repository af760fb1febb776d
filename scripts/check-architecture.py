#!/usr/bin/env python3
"""Fails when ARCHITECTURE.md stops naming the code: every Rust source file under a crate's
src/ (and bindings/python/src/) must be named there by its file name, so a new file cannot land
without a line saying what it is for. `mod.rs`, `lib.rs` and `main.rs` are named by their
directory instead (the crate map's tree gives them). Run from the repository root; stdlib only.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
text = (root / "ARCHITECTURE.md").read_text(encoding="utf-8")
# Every word that looks like a file or directory name in the document.
named = set(re.findall(r"[A-Za-z0-9_\-]+(?:\.rs|/)", text))
missing = []
for src in sorted(list(root.glob("crates/*/src/**/*.rs")) + list(root.glob("bindings/*/src/**/*.rs"))):
    rel = src.relative_to(root)
    name = src.name
    if name in ("mod.rs", "lib.rs", "main.rs"):
        # A crate root or a module directory: its directory must be named.
        if src.parent.name == "src":
            continue
        if f"{src.parent.name}/" not in named:
            missing.append(f"{rel} (directory {src.parent.name}/)")
    elif name not in named:
        missing.append(str(rel))
if missing:
    print("check-architecture: ARCHITECTURE.md does not name these source files:", file=sys.stderr)
    for m in missing:
        print(f"  {m}", file=sys.stderr)
    sys.exit(1)
print("check-architecture: every source file is named in ARCHITECTURE.md")
