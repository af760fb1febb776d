#!/usr/bin/env python3
"""Write a deterministic benchmark corpus of code snippets, one per line.

    python python/gen_bench_corpus.py OUT [--model models/all-MiniLM-L6-v2] [--n 512] [--seed 7]

Snippets are built from seeded templates in ten languages; each is one line (statements joined
by spaces or tabs, never a newline) of 9..130 MiniLM tokens (special tokens included), with
lengths spread evenly over that range. Token counts are checked with the model's own
tokenizer.json (the `tokenizers` package), so the corpus depends only on the seed and that file.
The corpus is generated, not committed. A summary goes to stderr.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

MIN_TOKENS, MAX_TOKENS = 9, 130

WORDS = ["user", "item", "count", "total", "buffer", "node", "value", "index", "cache", "result",
         "config", "path", "name", "size", "offset", "token", "score", "batch", "queue", "state",
         "request", "response", "row", "column", "key", "weight", "limit", "entry", "parent", "child"]
VERBS = ["get", "load", "parse", "read", "write", "update", "compute", "merge", "flush", "find",
         "build", "check", "sort", "encode", "decode", "reset", "apply", "emit", "split", "join"]


def ident(rng, style="snake"):
    parts = [rng.choice(VERBS)] + [rng.choice(WORDS) for _ in range(rng.randint(0, 2))]
    if style == "camel":
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    if style == "pascal":
        return "".join(p.capitalize() for p in parts)
    return "_".join(parts)


def var(rng):
    return rng.choice(WORDS) + (str(rng.randint(0, 9)) if rng.random() < 0.2 else "")


def num(rng):
    return str(rng.choice([0, 1, 2, 8, 16, 32, 64, 100, 255, 1024, rng.randint(0, 9999)]))


def python_snippet(rng, body):
    head = f"def {ident(rng)}({var(rng)}, {var(rng)}={num(rng)}):"
    stmts = [f"{var(rng)} = {var(rng)}.{ident(rng)}({var(rng)})",
             f"if {var(rng)} > {num(rng)}: return {var(rng)}",
             f"for {var(rng)} in range({num(rng)}): {var(rng)} += {var(rng)}",
             f"{var(rng)}.append({var(rng)}[{num(rng)}])",
             f"raise ValueError(f\"bad {var(rng)}: {{{var(rng)}!r}}\")"]
    return head, stmts, f"return {var(rng)}"


def rust_snippet(rng, body):
    head = f"pub fn {ident(rng)}({var(rng)}: &[f32], {var(rng)}: usize) -> Option<usize> {{"
    stmts = [f"let {var(rng)} = {var(rng)}.iter().map(|x| x * {num(rng)}.0).sum::<f32>();",
             f"if {var(rng)} >= {num(rng)} {{ return None; }}",
             f"for i in 0..{var(rng)}.len() {{ {var(rng)}[i] += {var(rng)}; }}",
             f"let mut {var(rng)} = Vec::with_capacity({num(rng)});",
             f"{var(rng)}.push({var(rng)}.{ident(rng)}()?);"]
    return head, stmts, f"Some({var(rng)}) }}"


def js_snippet(rng, body):
    head = f"export async function {ident(rng, 'camel')}({var(rng)}, {var(rng)}) {{"
    stmts = [f"const {var(rng)} = await fetch(`/api/{var(rng)}/${{{var(rng)}}}`);",
             f"if (!{var(rng)}) throw new Error('missing {var(rng)}');",
             f"{var(rng)}.forEach(({var(rng)}) => {{ {var(rng)} += {num(rng)}; }});",
             f"let {var(rng)} = {{ ...{var(rng)}, {var(rng)}: {num(rng)} }};",
             f"console.log(`{var(rng)}=${{{var(rng)}}}`);"]
    return head, stmts, f"return {var(rng)}; }}"


def go_snippet(rng, body):
    head = f"func ({var(rng)[0]} *{ident(rng, 'pascal')}) {ident(rng, 'pascal')}({var(rng)} int) (int, error) {{"
    stmts = [f"{var(rng)}, err := {ident(rng, 'camel')}({var(rng)})",
             "if err != nil { return 0, err }",
             f"for i := 0; i < {num(rng)}; i++ {{ {var(rng)} += i }}",
             f"{var(rng)} = append({var(rng)}, {num(rng)})",
             f"defer {var(rng)}.Close()"]
    return head, stmts, f"return {var(rng)}, nil }}"


def java_snippet(rng, body):
    head = f"public static int {ident(rng, 'camel')}(List<String> {var(rng)}, int {var(rng)}) {{"
    stmts = [f"int {var(rng)} = {var(rng)}.size() * {num(rng)};",
             f"for (String s : {var(rng)}) {{ {var(rng)} += s.length(); }}",
             f"if ({var(rng)} == null) {{ throw new IllegalArgumentException(\"{var(rng)}\"); }}",
             f"Map<String, Integer> {var(rng)} = new HashMap<>();",
             f"{var(rng)}.put(\"{var(rng)}\", {num(rng)});"]
    return head, stmts, f"return {var(rng)}; }}"


def c_snippet(rng, body):
    head = f"static int {ident(rng)}(const char *{var(rng)}, size_t {var(rng)}) {{"
    stmts = [f"size_t {var(rng)} = strlen({var(rng)});",
             f"for (size_t i = 0; i < {var(rng)}; ++i) {var(rng)}[i] ^= 0x{rng.randint(0, 255):02x};",
             f"if ({var(rng)} == NULL) return -{rng.randint(1, 9)};",
             f"memcpy({var(rng)}, {var(rng)}, sizeof(*{var(rng)}) * {num(rng)});",
             f"printf(\"%zu\\n\", {var(rng)});"]
    return head, stmts, f"return (int){var(rng)}; }}"


def sql_snippet(rng, body):
    t1, t2 = var(rng) + "s", var(rng) + "s"
    head = f"SELECT a.{var(rng)}, COUNT(b.{var(rng)}) AS {var(rng)}_count FROM {t1} a"
    stmts = [f"JOIN {t2} b ON b.{var(rng)}_id = a.id",
             f"AND b.{var(rng)} > {num(rng)}",
             f"OR a.{var(rng)} LIKE '%{var(rng)}%'",
             f"AND a.{var(rng)} IN ({num(rng)}, {num(rng)}, {num(rng)})"]
    return head + " WHERE 1 = 1", stmts, f"GROUP BY a.{var(rng)} ORDER BY 2 DESC LIMIT {num(rng)};"


def shell_snippet(rng, body):
    head = f"{ident(rng)}() {{"
    stmts = [f"local {var(rng)}=\"${{1:-{var(rng)}}}\";",
             f"grep -rn '{var(rng)}' \"${var(rng)}\" | head -n {num(rng)};",
             f"for f in *.{rng.choice(['rs', 'py', 'go', 'txt'])}; do wc -l \"$f\"; done;",
             f"[ -d \"${var(rng)}\" ] || mkdir -p \"${var(rng)}\";"]
    return head, stmts, "}"


def ts_snippet(rng, body):
    head = f"interface {ident(rng, 'pascal')} {{ {var(rng)}: number; {var(rng)}?: string }}"
    stmts = [f"type {ident(rng, 'pascal')} = Record<string, {rng.choice(['number', 'string', 'boolean'])}>;",
             f"const {var(rng)}: {ident(rng, 'pascal')}[] = [];",
             f"function {ident(rng, 'camel')}<T>({var(rng)}: T[]): T | undefined {{ return {var(rng)}[0]; }}",
             f"export const {var(rng)} = {num(rng)} as const;"]
    return head, stmts, ""


def ruby_snippet(rng, body):
    head = f"def {ident(rng)}({var(rng)}, {var(rng)} = {num(rng)})"
    stmts = [f"{var(rng)}.each {{ |x| {var(rng)} += x }}",
             f"return nil if {var(rng)}.empty?",
             f"{var(rng)} = {var(rng)}.map(&:to_s).join(', ')",
             f"puts \"#{{{var(rng)}}} items\""]
    return head, stmts, "end"


LANGS = [python_snippet, rust_snippet, js_snippet, go_snippet, java_snippet, c_snippet,
         sql_snippet, shell_snippet, ts_snippet, ruby_snippet]


def build(rng, target, count_tokens):
    """One snippet of about `target` tokens (within MIN..MAX), on one line."""
    lang = rng.choice(LANGS)
    head, stmts, tail = lang(rng, None)
    sep = rng.choice([" ", " ", "\t", "  "])
    if target < 24:
        # short snippets: a bare statement or two, no function frame
        head, tail = "", ""
        if rng.random() < 0.5:
            head = rng.choice(stmts)
            _, stmts, _ = lang(rng, None)
    if not head:
        head = rng.choice(stmts)
        _, stmts, _ = lang(rng, None)
    parts = [head]
    snippet = " ".join(p for p in [head, tail] if p)
    while True:
        cand_parts = parts + [rng.choice(stmts)]
        # refresh the statement pool so repeated statements get new identifiers
        _, stmts, _ = lang(rng, None)
        cand = sep.join(cand_parts + ([tail] if tail else []))
        n = count_tokens(cand)
        if n > MAX_TOKENS or n > target + 12:
            break
        parts, snippet = cand_parts, cand
        if n >= target:
            break
    if count_tokens(snippet) < MIN_TOKENS:
        return None
    return snippet


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="output file (one snippet per line)")
    ap.add_argument("--model", default=os.path.join(REPO, "models", "all-MiniLM-L6-v2"),
                    help="model dir with tokenizer.json (for token counts)")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def count_tokens(s):
        return len(tok.encode(s, add_special_tokens=True).ids)

    rng = random.Random(args.seed)
    out, lengths = [], []
    while len(out) < args.n:
        target = MIN_TOKENS + (len(out) * (MAX_TOKENS - MIN_TOKENS)) // max(args.n - 1, 1)
        s = build(rng, target, count_tokens)
        if s is None or "\n" in s or "\r" in s:
            continue
        n = count_tokens(s)
        assert MIN_TOKENS <= n <= MAX_TOKENS, (n, s)
        out.append(s)
        lengths.append(n)
    # interleave lengths so batches in file order are mixed, as in real traffic
    order = list(range(len(out)))
    rng.shuffle(order)
    out = [out[i] for i in order]
    lengths = [lengths[i] for i in order]

    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for s in out:
            f.write(s + "\n")
    print(f"{args.out}: {len(out)} snippets, tokens min {min(lengths)} max {max(lengths)} "
          f"mean {sum(lengths) / len(lengths):.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
