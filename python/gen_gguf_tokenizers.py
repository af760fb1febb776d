#!/usr/bin/env python3
"""Regenerate tests/fixtures/gguf/tokenizers/: GGUF files holding only a byte-level BPE
tokenizer (`tokenizer.ggml.*`, as llama.cpp's converter writes it), and golden.json, the ids
transformers' GGUF tokenizer loader gives for a set of texts.

    pip install gguf==0.19.0 numpy==2.4.6 tokenizers==0.23.3 transformers==5.24.0 torch==2.15.0
    python python/gen_gguf_tokenizers.py

The vocabulary is trained here (tokenizers' BpeTrainer, byte-level, 600 tokens) on the fixed
corpus below, with three control tokens (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`) and a
chat template. It is written three times, with `tokenizer.ggml.pre` "gpt-2", "llama-bpe" and
"qwen2": the pre-tokenizers for which transformers (`integrations/gguf/
gguf_tokenizer_mapping.py`) splits text with the same expression as llama.cpp
(`llama-vocab.cpp`), so its ids are the reference. Each case is encoded without special tokens
(`add_special_tokens=False`); the files set `add_bos_token` false.

SentencePiece vocabularies (`tokenizer.ggml.model` "llama"): a BPE model trained here with the
`sentencepiece` package (500 pieces, byte fallback, `<|im_start|>`/`<|im_end|>` as control and
`<think>` as a user-defined symbol) and written with tokens, scores and token types exactly as
llama.cpp's converter does (`_create_vocab_sentencepiece`: control 3, unknown 2, byte 6,
user-defined 4, normal 1), no merges. Three files with that vocabulary: architecture "llama"
(transformers' plain sentencepiece builder), "phi3" (its prefix-space variant) and "gemma"
(its "gemma2": merges in file order; transformers reads no "gemma" GGUF). Their cases are encoded both without and with special tokens (the
files leave `add_bos_token` unset: true, as llama.cpp assumes for sentencepiece). For the
"llama" file golden.json also records `sentencepiece`'s own ids, the tokenizer llama.cpp
reimplements, and how many cases agree with transformers.

    pip install sentencepiece==0.2.3
"""

import json
import os

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from gguf_out import finish, write_golden

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "gguf", "tokenizers")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 2026, and we've got 12345 reasons.",
    "fn main() { println!(\"hello, world\"); let x = vec![1, 2, 3]; }",
    "def embed(texts):\n    return [model(t) for t in texts]  # batch of 32\n",
    "Élan vital — naïve café, 東京 and Москва; emojis 🙂🙃 too.",
    "I'm sure they'll say you'd DONE it, but we're not.   Tabs\tand\r\nnewlines.",
] * 20

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

CASES = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's 2026 and 1234567 numbers: 3.14159, 42!",
    "fn main() {\n    println!(\"hi\");\n}\n",
    "  leading spaces and trailing   ",
    "I'M SURE THEY'LL SAY YOU'D DONE IT",
    "naïve café 東京 Москва 🙂",
    "tabs\tand\r\nwindows newlines\n\n\nthree",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "unseen ☃ ß <think> x",
    "",
]


def train():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    return tokens, merges


def write(path, tokens, merges, pre):
    w = gguf.GGUFWriter(path, arch="llama")
    w.add_name(f"tokenizer-{pre}")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    finish(w)


def train_spm():
    import io
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=model, model_type="bpe", vocab_size=500,
        byte_fallback=True, character_coverage=1.0, control_symbols=["<|im_start|>", "<|im_end|>"],
        user_defined_symbols=["<think>"], split_digits=True, allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity", num_threads=1,
        minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        types.append(3 if sp.is_control(i) else 2 if sp.is_unknown(i) else 6 if sp.is_byte(i)
                     else 5 if sp.is_unused(i) else 4 if tokens[-1] == "<think>" else 1)
    return sp, tokens, scores, types


def write_spm(path, arch, tokens, scores, types):
    w = gguf.GGUFWriter(path, arch=arch)
    w.add_name(f"tokenizer-spm-{arch}")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(tokens.index("<s>"))
    w.add_eos_token_id(tokens.index("</s>"))
    w.add_unk_token_id(tokens.index("<unk>"))
    w.add_chat_template(TEMPLATE)
    finish(w)


def main():
    from transformers import AutoTokenizer
    import transformers

    os.makedirs(OUT, exist_ok=True)
    tokens, merges = train()
    golden = {"generator": "python/gen_gguf_tokenizers.py",
              "reference": f"transformers {transformers.__version__} GGUF tokenizer",
              "files": {}}
    for pre in ["gpt-2", "llama-bpe", "qwen2"]:
        name = f"bpe_{pre}.gguf"
        write(os.path.join(OUT, name), tokens, merges, pre)
        t = AutoTokenizer.from_pretrained(OUT, gguf_file=name)
        golden["files"][name] = [
            {"text": c, "ids": t(c, add_special_tokens=False)["input_ids"]} for c in CASES
        ]
    sp, stokens, scores, types = train_spm()
    golden["spm"] = {}
    for arch in ["llama", "phi3", "gemma2"]:
        name = f"spm_{arch}.gguf"
        write_spm(os.path.join(OUT, name), arch, stokens, scores, types)
        t = AutoTokenizer.from_pretrained(OUT, gguf_file=name)
        golden["spm"][name] = [
            {"text": c, "ids": t(c, add_special_tokens=False)["input_ids"],
             "ids_with_special": t(c)["input_ids"]} for c in CASES
        ]
    ref = [sp.encode(c) for c in CASES]
    agree = sum(r == g["ids"] for r, g in zip(ref, golden["spm"]["spm_llama.gguf"]))
    golden["sentencepiece"] = {"file": "spm_llama.gguf", "ids": ref,
                               "agree_with_transformers": f"{agree}/{len(CASES)}"}
    write_golden(OUT, golden)


if __name__ == "__main__":
    main()
