#!/usr/bin/env python3
"""Finds import cycles between modules, per crate: the layering check of `.ci/run`.

Each Rust file under a crate's `src/` is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`). An
edge runs from a module to every module it names: `use crate::x::y`, `use super::z`, `pub use`,
and fully qualified `crate::x::y::` paths in code. A name resolves to the deepest module that
exists (`crate::kernels::gemm::Foo` is the module `kernels::gemm`). Two deliberate choices:
- A parent may name its own descendants freely (a `mod.rs` declares, re-exports and composes
  them: it is their facade), so parent -> child is not an edge; child -> parent is (the child
  depends on what the parent defines), and so is every edge between siblings or across trees.
- Test modules (`#[cfg(test)] mod tests { ... }` after that line) are skipped: tests may reach
  anywhere.
Prints every strongly connected component with one file:line per edge; exits 1 if any.
Run from the repository root; stdlib only. `--verbose` prints each crate's edge count too.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
verbose = "--verbose" in sys.argv


def module_of(src: pathlib.Path, f: pathlib.Path):
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


USE_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+|::\{)")


def strip(line):
    i = line.find("//")
    return line if i < 0 else line[:i]


def paths_in_use(stmt):
    """Expands `a::{b, c::{d, e}}` into a::b, a::c::d, a::c::e (names only)."""
    out = []

    def expand(prefix, body):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(body):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(body[start:i])
                start = i + 1
        items.append(body[start:])
        for it in items:
            it = it.strip()
            if not it:
                continue
            if "{" in it:
                head, rest = it.split("{", 1)
                expand(prefix + [p for p in head.strip().strip(":").split("::") if p], rest.rsplit("}", 1)[0])
            else:
                it = it.split(" as ")[0].strip()
                out.append(prefix + [p for p in it.split("::") if p])

    expand([], stmt)
    return out


def crate_edges(src: pathlib.Path):
    files = sorted(src.rglob("*.rs"))
    mods = {module_of(src, f): f for f in files}
    edges = {}
    for f in files:
        me = module_of(src, f)
        text = f.read_text(encoding="utf-8")
        # Join `use` statements onto one line each; keep line numbers of their starts.
        lines = text.split("\n")
        stmts = []
        i = 0
        while i < len(lines):
            line = strip(lines[i])
            if re.match(r"\s*#\[cfg\(test\)\]", line):
                # Everything after a test module's attribute belongs to tests.
                break
            m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?use\s+(.*)", line)
            if m:
                start = i
                body = m.group(1)
                while ";" not in body and i + 1 < len(lines):
                    i += 1
                    body += " " + strip(lines[i])
                stmts.append((start + 1, body.split(";")[0], True))
            else:
                stmts.append((i + 1, line, False))
            i += 1
        for lineno, body, is_use in stmts:
            cands = paths_in_use(body) if is_use else [
                [m.group(1)] + [p for p in m.group(2).split("::") if p]
                for m in USE_RE.finditer(body)
            ]
            for path in cands:
                if not path or path[0] not in ("crate", "super", "self"):
                    continue
                if path[0] == "crate":
                    cur, k = [], 1
                else:
                    # `self` is this module; each `super` climbs one level (the same for
                    # `a/b.rs` and `a/b/mod.rs`: both are `a::b`).
                    cur, k = list(me), 0
                    while k < len(path) and path[k] in ("super", "self"):
                        if path[k] == "super":
                            cur = cur[:-1]
                        k += 1
                # Deepest existing module along the path.
                target = tuple(cur)
                for p in path[k:]:
                    if tuple(cur + [p]) in mods:
                        cur = cur + [p]
                        target = tuple(cur)
                    else:
                        break
                if target == me or target not in mods:
                    continue
                # A parent naming its own descendant is declaration, not a dependency.
                if target[: len(me)] == me:
                    continue
                edges.setdefault(me, {}).setdefault(target, f"{f.relative_to(root)}:{lineno}")
    return mods, edges


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(m) or "crate"


failed = 0
srcs = sorted(root.glob("crates/*/src")) + sorted(root.glob("bindings/*/src"))
for src in srcs:
    crate = src.parent.name
    mods, edges = crate_edges(src)
    comps = sccs(list(mods), edges)
    if verbose:
        print(f"{crate}: {len(mods)} modules, {sum(len(v) for v in edges.values())} edges")
    for comp in comps:
        failed += 1
        members = set(comp)
        print(f"{crate}: cycle between {', '.join(name(m) for m in comp)}")
        for a in comp:
            for b, where in sorted(edges.get(a, {}).items()):
                if b in members:
                    print(f"    {name(a)} -> {name(b)}   ({where})")
if failed:
    print(f"check-layering: {failed} import cycle(s)", file=sys.stderr)
    sys.exit(1)
print("check-layering: no import cycle between modules")
