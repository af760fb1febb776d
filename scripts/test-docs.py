#!/usr/bin/env python3
"""Runs the commands of a Markdown page, so that a page a newcomer follows is a page that works.

    python3 scripts/test-docs.py docs/tutorial.md ["README.md#Quick start" ...] [--keep DIR]

`PAGE#HEADING` runs only the blocks under that heading (up to the next heading of the same or
a higher level): a README whose other blocks are synopses, not commands.

Every fenced block whose info string is `sh` or `python` runs, in page order, in ONE bash
session started at the repository root (so `cd`, exported variables, an activated venv and a
server started with `&` carry over from block to block, as they do for a reader typing them):

- ```sh            runs as written.
- ```python        runs with the session's `python` (the reader's venv, once they made one).
- ```sh no-run     (or ```python no-run) is shown, never run: for what CI cannot do
                   (a Docker engine, a GPU). Keep these few; each should say why in the page.
- ```text expect   output the block before it must print: each non-empty line must appear,
                   in order, as a substring of that block's stdout (so the output a page shows
                   is the output the engine gives, not a copy typed in once).

Any other block (```rust, ```json, plain ```) is not run. A block that fails stops the page
(bash -e), and the script prints the block, its line number and its output.

What a reader's machine has and CI's may not, the runner provides without changing a command:
- the port `8080` in a block is replaced by a free port (CI runs several servers);
- `cargo install` reuses the workspace's build (`CARGO_TARGET_DIR=target`) and installs into a
  scratch root put first on PATH (CARGO_INSTALL_ROOT), not into ~/.cargo;
- models fetched by scripts/fetch-model.sh land in `target/docs-home` (KIN_INFER_HOME), kept
  between runs like a reader's data dir, and pip's cache makes a second fetch offline;
- background jobs still running when the page ends are killed, and a page still running after
  KIN_DOCS_TIMEOUT seconds (1500) is killed with them and fails.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Longer than a cold page needs (cargo install reuses the build; pip builds the wheel once).
PAGE_TIMEOUT_S = int(os.environ.get("KIN_DOCS_TIMEOUT", "1500"))
FENCE = re.compile(r"^```([^\n`]*)$")


HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")


def blocks(page: Path, section: str | None):
    """(line, info, text) for every fenced block of `page` (under `section`, if given)."""
    lines = page.read_text().splitlines()
    i, inside, level, seen = 0, section is None, 0, False
    while i < len(lines):
        h = HEADING.match(lines[i])
        if h and section is not None:
            if h.group(2) == section:
                inside, level, seen = True, len(h.group(1)), True
            elif inside and len(h.group(1)) <= level:
                inside = False
        m = FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        info, start, body = m.group(1).strip(), i + 1, []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            sys.exit(f"test-docs: {page}:{start}: a fenced block is never closed")
        i += 1
        if inside:
            yield start, info, "\n".join(body) + "\n"
    if section is not None and not seen:
        sys.exit(f"test-docs: {page}: no heading `{section}`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    args = sys.argv[1:]
    keep = None
    if "--keep" in args:
        k = args.index("--keep")
        keep = Path(args[k + 1])
        del args[k : k + 2]
    if not args:
        sys.exit(__doc__)
    work = Path(keep or tempfile.mkdtemp(prefix="kin-docs-"))
    work.mkdir(parents=True, exist_ok=True)
    port = str(free_port())
    env = dict(os.environ)
    env.update(
        CARGO_TARGET_DIR=str(REPO / "target"),
        CARGO_INSTALL_ROOT=str(work / "cargo-root"),
        KIN_INFER_HOME=os.environ.get("KIN_INFER_HOME", str(REPO / "target" / "docs-home")),
        PATH=f"{work / 'cargo-root' / 'bin'}:{os.environ['PATH']}",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    failed = 0
    for arg in args:
        page, _, section = arg.partition("#")
        page = Path(page)
        failed += run_page(page, section or None, work / page.stem, env, port)
    if keep is None and not failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def run_page(page: Path, section: str | None, out: Path, env: dict, port: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    script = ["set -euo pipefail", f"cd {sh_quote(str(REPO))}",
              # Background jobs (a server) end with the page, as when a reader closes the terminal.
              "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    runs, expects = [], {}
    for line, info, text in blocks(page, section):
        words = info.split()
        lang = words[0] if words else ""
        if lang == "text" and "expect" in words[1:]:
            if not runs:
                sys.exit(f"test-docs: {page}:{line}: an expect block with no block before it")
            expects.setdefault(len(runs) - 1, []).append((line, text))
            continue
        if lang not in ("sh", "bash", "python") or "no-run" in words[1:]:
            continue
        text = text.replace("8080", port)
        n = len(runs)
        runs.append((line, lang, text))
        body = text if lang != "python" else f"python - <<'KIN_DOCS_PY'\n{text}KIN_DOCS_PY\n"
        o, e = out / f"{n}.out", out / f"{n}.err"
        script += [
            f"echo {sh_quote(f'--- {page}:{line}')} >&2",
            f"{{\n{body}\n}} > {sh_quote(str(o))} 2> >(tee {sh_quote(str(e))} >&2)",
            f"cat {sh_quote(str(o))}",
            f"echo {n} > {sh_quote(str(out / 'last-ok'))}",
        ]
    if not runs:
        print(f"test-docs: {page}: no runnable block", file=sys.stderr)
        return 1
    (out / "page.sh").write_text("\n".join(script) + "\n")
    # A page that hangs (a server that never answers /health) fails instead of eating CI's
    # time: its whole process group, background jobs included, is killed at the limit.
    p = subprocess.Popen(["bash", str(out / "page.sh")], env=env, start_new_session=True)
    try:
        rc = p.wait(timeout=PAGE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        rc = f"killed after {PAGE_TIMEOUT_S} s"
    r = subprocess.CompletedProcess(p.args, rc)
    last = int((out / "last-ok").read_text()) if (out / "last-ok").exists() else -1
    if r.returncode != 0:
        # (a string when the page was killed at the limit)
        line, lang, text = runs[last + 1] if last + 1 < len(runs) else runs[-1]
        print(f"\ntest-docs: {page}:{line}: this {lang} block failed (exit {r.returncode}):\n{text}",
              file=sys.stderr)
        return 1
    for n, exp in expects.items():
        got = (out / f"{n}.out").read_text()
        for line, text in exp:
            pos = 0
            for want in (w.strip() for w in text.splitlines()):
                if not want:
                    continue
                at = got.find(want, pos)
                if at < 0:
                    print(f"test-docs: {page}:{line}: expected output line not printed by the block "
                          f"at line {runs[n][0]}:\n  {want}\nit printed:\n{got}", file=sys.stderr)
                    return 1
                pos = at + len(want)
    print(f"test-docs: {page}: {len(runs)} blocks ran, "
          f"{sum(len(v) for v in expects.values())} outputs checked")
    return 0


def sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main())
