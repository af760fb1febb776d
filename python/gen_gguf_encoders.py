#!/usr/bin/env python3
"""Regenerate tests/fixtures/gguf/encoders/: a GGUF twin of the bert_tiny encoder fixture, written
with the `gguf` package the way llama.cpp's convert_hf_to_gguf.py (BertModel) writes one, and
golden.json, the ids Hugging Face's BERT WordPiece tokenizer gives for its vocabulary.

    pip install gguf==0.19.0 numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.3   # no torch
    python python/gen_gguf_encoders.py

`bert_tiny.f32.gguf`: architecture `bert`; `bert.context_length`, `.embedding_length`,
`.feed_forward_length`, `.block_count`, `.attention.head_count`,
`.attention.layer_norm_epsilon`, `.attention.causal` false, `.pooling_type` (1, mean: the
fixture's sentence-transformers pooling); tensors under llama.cpp's BERT names (`token_embd`,
`position_embd`, `token_types`, `token_embd_norm`, `blk.N.attn_q|k|v|output|output_norm`,
`blk.N.ffn_up|down`, `blk.N.layer_output_norm`; the `bert.` prefix and the pooler dropped).
bert_tiny's checkpoint has no tokenizer (its goldens are token ids), so a 100-token uncased
WordPiece vocabulary is written here, in the converter's "phantom space" spelling
(`tokenizer.ggml.model` "bert": a word-initial piece `x` is stored as `▁x`, a continuation
`##x` as `x`, bracketed specials as they are), with its special token ids
(`unknown`, `seperator` (sic, gguf's key), `padding`, `mask`; [CLS] as `bos`, [SEP] as `eos`,
with `add_bos_token` and `add_sep_token`, as gguf's SpecialVocab writes them).

golden.json: for each text, the ids of `tokenizers`' BertWordPieceTokenizer over the same
vocabulary (lowercasing, as llama.cpp's WPM tokenizer does), with and without [CLS]/[SEP]:
the tokenizer a BERT GGUF must reproduce. Fixed inputs: reruns are byte-identical.
"""

import json
import os

import gguf
import numpy as np
from safetensors.numpy import load_file
from gguf_out import finish, write_golden

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "bert_tiny")
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf", "encoders")

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["the", "quick", "brown", "fox", "code", "fn", "main", "hello", "world", "embed",
         "token", "graph", "un", "##able", "##s", "##ing", "##ed", "##er", ".", ",", "!", "(",
         ")", "{", "}", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "é", "東"]
CASES = [
    "hello world",
    "The quick brown fox.",
    "Unable embedding graphs!",
    "fn main() { 42 }",
    "  spaced   out\ttabs\nand lines  ",
    "Café 東京 naïve",
    "HELLO, World... tokens",
    "xyzzy unknownword",
    "",
]


def vocabulary(n):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = SPECIAL + letters + ["##" + c for c in letters] + WORDS
    assert len(tokens) <= n, len(tokens)
    tokens += [f"[unused{i}]" for i in range(n - len(tokens))]
    return tokens


def phantom(tok):
    """convert_hf_to_gguf.py BertModel.set_vocab's spelling."""
    if tok.startswith("[") and tok.endswith("]"):
        return tok
    if tok.startswith("##"):
        return tok[2:]
    return "\u2581" + tok


LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
GLOBAL = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
}


def tensors(cfg, st):
    out = []
    for hf, name in GLOBAL.items():
        for kind in ["weight", "bias"]:
            if f"bert.{hf}.{kind}" in st:
                out.append((f"{name}.{kind}", st[f"bert.{hf}.{kind}"]))
    for i in range(cfg["num_hidden_layers"]):
        for hf, name in LAYER.items():
            for kind in ["weight", "bias"]:
                out.append((f"blk.{i}.{name}.{kind}", st[f"bert.encoder.layer.{i}.{hf}.{kind}"]))
    return [(n, np.ascontiguousarray(t, dtype=np.float32)) for n, t in out]


def main():
    from tokenizers import BertWordPieceTokenizer

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(FIXTURE, "config.json")) as f:
        cfg = json.load(f)
    tokens = vocabulary(cfg["vocab_size"])
    path = os.path.join(OUT, "bert_tiny.f32.gguf")
    w = gguf.GGUFWriter(path, arch="bert")
    w.add_name("bert_tiny")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType.MEAN)
    w.add_file_type(0)
    w.add_tokenizer_model("bert")
    w.add_token_list([phantom(t) for t in tokens])
    w.add_token_types([3 if t in SPECIAL and t != "[UNK]" else 2 if t == "[UNK]" else 1
                       for t in tokens])
    w.add_token_type_count(cfg["type_vocab_size"])
    w.add_unk_token_id(tokens.index("[UNK]"))
    w.add_sep_token_id(tokens.index("[SEP]"))
    w.add_pad_token_id(tokens.index("[PAD]"))
    w.add_mask_token_id(tokens.index("[MASK]"))
    # gguf's SpecialVocab writes a BERT tokenizer's [CLS] as BOS and [SEP] as EOS (there is no
    # CLS key), and its TemplateProcessing as add_bos / add_sep.
    w.add_bos_token_id(tokens.index("[CLS]"))
    w.add_eos_token_id(tokens.index("[SEP]"))
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    for name, t in tensors(cfg, load_file(os.path.join(FIXTURE, "model.safetensors"))):
        w.add_tensor(name, t)
    finish(w)

    ref = BertWordPieceTokenizer({t: i for i, t in enumerate(tokens)}, lowercase=True)
    golden = {
        "generator": "python/gen_gguf_encoders.py",
        "reference": "tokenizers BertWordPieceTokenizer (lowercase) over the file's vocabulary",
        "file": "bert_tiny.f32.gguf",
        "cases": [{"text": c, "ids": ref.encode(c, add_special_tokens=False).ids,
                   "ids_with_special": ref.encode(c).ids} for c in CASES],
    }
    write_golden(OUT, golden)


if __name__ == "__main__":
    main()
