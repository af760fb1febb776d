"""Writes the server's test fixtures (tests/server_fixtures/): two tiny models that have
tokenizers, which the server needs and the weight fixtures lack.

- embed_tiny: tests/fixtures/bert_tiny (config, weights, sentence-transformers modules, linked)
  plus a WordPiece tokenizer.json over its 100-token vocabulary.
- chat_tiny: tests/decoder_fixtures/qwen2_bias (config, weights, linked) plus a byte-level BPE
  tokenizer.json over its 128 tokens (ChatML's markers first, so the config's bos 1 / eos 2 are
  <|im_start|> / <|im_end|>) and a tokenizer_config.json with a ChatML chat template.

The weights are random (their parity with transformers is proven by the fixtures they link
to); the server's tests compare the server with `kin-infer embed` / `generate`, not with a
reference. No dependencies beyond the standard library:

    python3 python/gen_server_fixtures.py
"""

import json
import os
import shutil
import string
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "server_fixtures"


def link(dst_dir: Path, src: Path):
    """Relative symlink dst_dir/src.name -> src (files and directories)."""
    target = os.path.relpath(src, dst_dir)
    p = dst_dir / src.name
    if p.is_symlink() or p.exists():
        p.unlink()
    p.symlink_to(target)


def write_json(p: Path, v):
    p.write_text(json.dumps(v, indent=1, ensure_ascii=False) + "\n")


def special(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


def embed_tiny():
    d = OUT / "embed_tiny"
    d.mkdir(parents=True, exist_ok=True)
    src = ROOT / "tests" / "fixtures" / "bert_tiny"
    for name in ["config.json", "model.safetensors", "modules.json",
                 "sentence_bert_config.json", "1_Pooling", "2_Normalize"]:
        link(d, src / name)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = list(string.ascii_lowercase)
    words = ["the", "fn", "code", "parse", "string", "tree", "function", "data", "hello",
             "world", "test", "server", "embed", "graph", "node", "edge", "return", "struct",
             "into", "a", "of"]
    vocab = specials + letters + ["##" + c for c in letters] + list(string.digits)
    vocab += list(".,!?'-:;()\"/&<>=")
    vocab += [w for w in words if w not in vocab]
    vocab = vocab[:100]
    assert len(vocab) == 100, len(vocab)
    ids = {t: i for i, t in enumerate(vocab)}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(i, t) for i, t in enumerate(specials)],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                "[CLS]": {"id": "[CLS]", "ids": [ids["[CLS]"]], "tokens": ["[CLS]"]},
                "[SEP]": {"id": "[SEP]", "ids": [ids["[SEP]"]], "tokens": ["[SEP]"]},
            },
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": ids},
    }
    write_json(d / "tokenizer.json", tok)


CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def chat_tiny():
    d = OUT / "chat_tiny"
    d.mkdir(parents=True, exist_ok=True)
    src = ROOT / "tests" / "decoder_fixtures" / "qwen2_bias"
    for name in ["config.json", "model.safetensors"]:
        link(d, src / name)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    # GPT-2's byte-to-unicode map sends printable ASCII to itself, space to Ġ, newline to Ċ.
    chars = [chr(b) for b in range(0x21, 0x7F)] + ["\u0120", "\u010a"]
    vocab = specials + chars
    merges = []
    for a, b in [("\u0120", "t"), ("h", "e"), ("\u0120", "a"), ("i", "n"), ("e", "r"),
                 ("o", "n"), ("r", "e"), ("a", "n"), ("o", "r"), ("\u0120", "s"),
                 ("a", "t"), ("e", "n"), ("i", "s"), ("i", "t"), ("\u0120", "w"),
                 ("o", "u"), ("e", "d"), ("in", "g"), ("\u0120t", "he"), ("\u0120", "h"),
                 ("l", "l"), ("\u0120", "c"), ("e", "s"), ("\u0120", "o"), ("l", "o"),
                 ("\u0120", "i"), ("a", "r"), ("\u0120", "b"), ("\u0120", "m")]:
        if len(vocab) >= 128:
            break
        merges.append(f"{a} {b}")
        vocab.append(a + b)
    assert len(vocab) == 128, len(vocab)
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(i, t) for i, t in enumerate(specials)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges},
    }
    write_json(d / "tokenizer.json", tok)
    write_json(d / "tokenizer_config.json", {
        "chat_template": CHATML,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "model_max_length": 64,
    })


if __name__ == "__main__":
    if OUT.exists():
        shutil.rmtree(OUT)
    embed_tiny()
    chat_tiny()
    print(f"wrote {OUT.relative_to(ROOT)}")
