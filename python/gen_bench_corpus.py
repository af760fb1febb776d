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
import re
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


# One row per language: (head, statements, tail), each a template whose `@` fields are drawn
# left to right as written: @v a variable, @v0 a variable's first letter, @n a number, @i an
# identifier (@c camelCase, @p PascalCase), @x a hex byte, @d a digit 1..9, @ext a file
# extension, @ty a TypeScript type; @t1 and @t2 are table names drawn before the head (SQL).
LANGS = [
    ("def @i(@v, @v=@n):",
     ["@v = @v.@i(@v)", "if @v > @n: return @v", "for @v in range(@n): @v += @v", "@v.append(@v[@n])",
      "raise ValueError(f\"bad @v: {@v!r}\")"],
     "return @v"),
    ("pub fn @i(@v: &[f32], @v: usize) -> Option<usize> {",
     ["let @v = @v.iter().map(|x| x * @n.0).sum::<f32>();", "if @v >= @n { return None; }",
      "for i in 0..@v.len() { @v[i] += @v; }", "let mut @v = Vec::with_capacity(@n);", "@v.push(@v.@i()?);"],
     "Some(@v) }"),
    ("export async function @c(@v, @v) {",
     ["const @v = await fetch(`/api/@v/${@v}`);", "if (!@v) throw new Error('missing @v');",
      "@v.forEach((@v) => { @v += @n; });", "let @v = { ...@v, @v: @n };", "console.log(`@v=${@v}`);"],
     "return @v; }"),
    ("func (@v0 *@p) @p(@v int) (int, error) {",
     ["@v, err := @c(@v)", "if err != nil { return 0, err }", "for i := 0; i < @n; i++ { @v += i }",
      "@v = append(@v, @n)", "defer @v.Close()"],
     "return @v, nil }"),
    ("public static int @c(List<String> @v, int @v) {",
     ["int @v = @v.size() * @n;", "for (String s : @v) { @v += s.length(); }",
      "if (@v == null) { throw new IllegalArgumentException(\"@v\"); }", "Map<String, Integer> @v = new HashMap<>();",
      "@v.put(\"@v\", @n);"],
     "return @v; }"),
    ("static int @i(const char *@v, size_t @v) {",
     ["size_t @v = strlen(@v);", "for (size_t i = 0; i < @v; ++i) @v[i] ^= 0x@x;", "if (@v == NULL) return -@d;",
      "memcpy(@v, @v, sizeof(*@v) * @n);", "printf(\"%zu\\n\", @v);"],
     "return (int)@v; }"),
    ("SELECT a.@v, COUNT(b.@v) AS @v_count FROM @t1 a WHERE 1 = 1",
     ["JOIN @t2 b ON b.@v_id = a.id", "AND b.@v > @n", "OR a.@v LIKE '%@v%'", "AND a.@v IN (@n, @n, @n)"],
     "GROUP BY a.@v ORDER BY 2 DESC LIMIT @n;"),
    ("@i() {",
     ["local @v=\"${1:-@v}\";", "grep -rn '@v' \"$@v\" | head -n @n;", "for f in *.@ext; do wc -l \"$f\"; done;",
      "[ -d \"$@v\" ] || mkdir -p \"$@v\";"],
     "}"),
    ("interface @p { @v: number; @v?: string }",
     ["type @p = Record<string, @ty>;", "const @v: @p[] = [];", "function @c<T>(@v: T[]): T | undefined { return @v[0]; }",
      "export const @v = @n as const;"],
     ""),
    ("def @i(@v, @v = @n)",
     ["@v.each { |x| @v += x }", "return nil if @v.empty?", "@v = @v.map(&:to_s).join(', ')",
      "puts \"#{@v} items\""],
     "end"),
]

FIELD = re.compile(r"@(v0|v|n|i|c|p|x|d|ext|ty|t1|t2)")


def draw(rng, lang):
    """`lang`'s head, statements and tail with every field drawn, in the order written."""
    head, stmts, tail = lang
    tables = [var(rng) + "s", var(rng) + "s"] if "@t1" in head else []
    fields = {
        "v": lambda: var(rng), "v0": lambda: var(rng)[0], "n": lambda: num(rng), "i": lambda: ident(rng),
        "c": lambda: ident(rng, "camel"), "p": lambda: ident(rng, "pascal"),
        "x": lambda: f"{rng.randint(0, 255):02x}", "d": lambda: str(rng.randint(1, 9)),
        "ext": lambda: rng.choice(["rs", "py", "go", "txt"]),
        "ty": lambda: rng.choice(["number", "string", "boolean"]),
        "t1": lambda: tables[0], "t2": lambda: tables[1],
    }

    def fill(t):
        return FIELD.sub(lambda m: fields[m.group(1)](), t)

    return fill(head), [fill(t) for t in stmts], fill(tail)


def build(rng, target, count_tokens):
    """One snippet of about `target` tokens (within MIN..MAX), on one line."""
    lang = rng.choice(LANGS)
    head, stmts, tail = draw(rng, lang)
    sep = rng.choice([" ", " ", "\t", "  "])
    if target < 24:
        # short snippets: a bare statement or two, no function frame
        head, tail = "", ""
        if rng.random() < 0.5:
            head = rng.choice(stmts)
            _, stmts, _ = draw(rng, lang)
    if not head:
        head = rng.choice(stmts)
        _, stmts, _ = draw(rng, lang)
    parts = [head]
    snippet = " ".join(p for p in [head, tail] if p)
    while True:
        cand_parts = parts + [rng.choice(stmts)]
        # refresh the statement pool so repeated statements get new identifiers
        _, stmts, _ = draw(rng, lang)
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
