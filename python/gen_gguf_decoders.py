#!/usr/bin/env python3
"""Regenerate tests/fixtures/gguf/decoders/: GGUF twins of decoder fixtures, written by the
`gguf` package (GGUFWriter, and gguf.quants' reference quantizers and dequantizers) the way
llama.cpp's convert_hf_to_gguf.py writes them.

    pip install gguf==0.19.0 numpy==2.4.6 safetensors==0.8.0   # no torch
    python python/gen_gguf_decoders.py

For each fixture checkpoint (tests/decoder_fixtures/<name>: llama_gqa untied, llama_mqa tied,
qwen2_bias with q/k/v biases; and gpt2_small as `gpt2_small.f32.gguf`, its Conv1D weights
transposed and the tied head written out as `output`, as GPT2Model converts it):

- `<name>.f32.gguf`: every tensor F32, named as llama.cpp names them (`blk.N.attn_q.weight`,
  ...), LLaMA's q/k rows permuted as `LlamaModel.permute` does (qwen2's are not), metadata
  as the converter writes it (`<arch>.context_length`, `.attention.head_count_kv`, ...) and
  a small GPT-2-style tokenizer (`tokenizer.ggml.*`). Loaded by the engine it must give the
  safetensors checkpoint's logits bit for bit (same f32 weights, the permutation undone).
- `<name>.<q>.gguf` for q in q8_0, q4_0, q4_1 (llama_gqa and qwen2_bias): every 2-D weight quantized by `gguf.quants`
  (`quantize_row_*_ref`'s rounding), norms and biases F32, as llama.cpp's quantizer leaves
  them (a matrix whose rows are not whole blocks would stay F32 too); and `<name>.<q>.twin.gguf`: the same file with each quantized tensor replaced by its
  `gguf.quants.dequantize` (F32). The engine must give the two bit-identical logits: the
  quantized kernels multiply exactly the dequantized values.

Gemma (`gemma_tied`) and Gemma 2 (`gemma2_hd`) as GemmaModel / Gemma2Model convert them:
every `*norm.weight` stored as `1 + w` (in f32), no lm_head (llama.cpp ties Gemma's head),
head_dim as `attention.key_length`, Gemma 2's `attn_logit_softcapping`,
`final_logit_softcapping` and `attention.sliding_window`, Gemma 2's four norms as
`attn_norm`, `post_attention_norm`, `ffn_norm` (pre-feed-forward) and `post_ffw_norm`; no
rope permutation (llama.cpp ropes Gemma in NeoX order) and no rope base (its default, 10000,
the fixtures'). gemma_tied also gets a q8_0 file and twin (its quantized tied table is the
head and, scaled, the embedding).

Phi-3 (`phi3_longrope`) as Phi3MiniModel converts it: the fused `qkv_proj` and
`gate_up_proj` stored as they are (`attn_qkv`, `ffn_up`), `rope.scaling.original_context_length`,
`attention.sliding_window`, `rope.scaling.attn_factor` and the longrope factors as the F32
tensors `rope_factors_long.weight` / `rope_factors_short.weight`. Phi-2 (`phi_partial`) as
Phi2Model converts it (separate q/k/v with biases, `rope.dimension_count` for the partial
rotary, `attention.layernorm_epsilon`), except that `feed_forward_length` and
`attention.head_count_kv` are the model's own (the converter writes `4 · hidden` and the head
count, true of microsoft/phi-2 only; the loader reads the fc1 rows anyway).

Fixed inputs, no randomness: reruns are byte-identical.
"""

import math

import json
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from safetensors.numpy import load_file
from gguf_out import finish

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "decoder_fixtures")
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf", "decoders")

MODELS = ["llama_gqa", "llama_mqa", "qwen2_bias", "gemma_tied", "gemma2_hd", "phi3_longrope",
          "phi_partial"]
# llama_mqa's 48-wide rows are not whole blocks: its quantized files would be F32 throughout.
QUANTIZED = ["llama_gqa", "qwen2_bias", "gemma_tied", "phi3_longrope"]
# One format is enough for these (the kernels are tested per type elsewhere).
ONLY_Q8 = ["gemma_tied", "phi3_longrope"]
QUANTS = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1}


# llama.cpp's general.file_type (enum llama_ftype): not the ggml type code.
FILE_TYPE = {None: 0, T.Q4_0: 2, T.Q4_1: 3, T.Q8_0: 7}


def permute(w, n_head, n_head_kv):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


GEMMA2_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
}

HF_LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


PHI3_LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.qkv_proj": "attn_qkv",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm",
    "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}

PHI2_LAYER = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.dense": "attn_output",
    "mlp.fc1": "ffn_up",
    "mlp.fc2": "ffn_down",
}


def arch_of(cfg):
    return {"phi": "phi2"}.get(cfg["model_type"], cfg["model_type"])


def gguf_tensors(cfg, st):
    """(name, f32 array) in llama.cpp's names and order."""
    arch = arch_of(cfg)
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    layer = {"phi3": PHI3_LAYER, "phi2": PHI2_LAYER}.get(arch, HF_LAYER)
    if arch == "gemma2":
        layer = dict(layer)
        del layer["post_attention_layernorm"]
        layer.update(GEMMA2_LAYER)
    out = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for i in range(cfg["num_hidden_layers"]):
        for hf, name in layer.items():
            for kind in ["weight", "bias"]:
                key = f"model.layers.{i}.{hf}.{kind}"
                if key not in st:
                    continue
                t = st[key]
                if arch == "llama" and name == "attn_q":
                    t = permute(t, heads, heads)
                if arch == "llama" and name == "attn_k":
                    t = permute(t, heads, kv)
                out.append((f"blk.{i}.{name}.{kind}", t))
    final = "model.final_layernorm" if arch == "phi2" else "model.norm"
    for kind in ["weight", "bias"]:
        if f"{final}.{kind}" in st:
            out.append((f"output_norm.{kind}", st[f"{final}.{kind}"]))
    gemma = arch.startswith("gemma")
    if "lm_head.weight" in st and not cfg.get("tie_word_embeddings", False) and not gemma:
        out.append(("output.weight", st["lm_head.weight"]))
        if "lm_head.bias" in st:
            out.append(("output.bias", st["lm_head.bias"]))
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if arch == "phi3" and rp.get("rope_type") in ("longrope", "su"):
        # Phi3MiniModel.generate_extra_tensors
        out.append(("rope_factors_long.weight", np.array(rp["long_factor"], dtype=np.float32)))
        out.append(("rope_factors_short.weight", np.array(rp["short_factor"], dtype=np.float32)))
    out = [(n, np.ascontiguousarray(t, dtype=np.float32)) for n, t in out]
    if gemma:
        # GemmaModel.modify_tensors: `data_torch + 1` for every norm weight (f32 here).
        out = [(n, t + np.float32(1.0) if n.endswith("norm.weight") else t) for n, t in out]
    return out


def tokenizer_metadata(w, vocab):
    """A byte-level BPE vocabulary of `vocab` tokens: <s>, </s>, <unk>, the printable ASCII
    bytes in GPT-2's byte-to-unicode spelling, then merges of the first letters."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    for c in range(0x21, 0x7F):
        if len(tokens) >= vocab:
            break
        tokens.append(chr(c))
        types.append(1)
    merges = []
    for a in letters:
        for b in letters:
            if len(tokens) >= vocab:
                break
            if a + b not in tokens:
                tokens.append(a + b)
                types.append(1)
                merges.append(f"{a} {b}")
    while len(tokens) < vocab:
        tokens.append(f"<extra_{len(tokens)}>")
        types.append(4)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)


GPT2_LAYER = {
    "ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
    "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
}


def gpt2_tensors(cfg, st):
    """convert_hf_to_gguf.py's GPT2Model: Conv1D weights transposed to [out, in], the tied
    head written out as `output` too."""
    p = "transformer." if "transformer.wte.weight" in st else ""
    out = [("token_embd.weight", st[p + "wte.weight"]), ("position_embd.weight", st[p + "wpe.weight"])]
    for i in range(cfg["n_layer"]):
        for hf, name in GPT2_LAYER.items():
            for kind in ["weight", "bias"]:
                t = st[f"{p}h.{i}.{hf}.{kind}"]
                if kind == "weight" and hf.startswith(("attn.", "mlp.")):
                    t = t.T
                out.append((f"blk.{i}.{name}.{kind}", t))
    out += [("output_norm.weight", st[p + "ln_f.weight"]), ("output_norm.bias", st[p + "ln_f.bias"]),
            ("output.weight", st[p + "wte.weight"])]
    return [(n, np.ascontiguousarray(t, dtype=np.float32)) for n, t in out]


def write_gpt2(path, cfg, tensors):
    w = gguf.GGUFWriter(path, arch="gpt2")
    w.add_name(os.path.basename(path))
    w.add_context_length(cfg["n_positions"])
    w.add_embedding_length(cfg["n_embd"])
    w.add_feed_forward_length(cfg.get("n_inner") or 4 * cfg["n_embd"])
    w.add_block_count(cfg["n_layer"])
    w.add_head_count(cfg["n_head"])
    w.add_layer_norm_eps(cfg["layer_norm_epsilon"])
    w.add_file_type(0)
    tokenizer_metadata(w, cfg["vocab_size"])
    for name, t in tensors:
        w.add_tensor(name, t)
    finish(w)


def write(path, cfg, tensors, qtype=None, twin=False):
    arch = arch_of(cfg)
    w = gguf.GGUFWriter(path, arch=arch)
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    rp = cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta") or rp.get("rope_theta", 10000.0)
    w.add_name(os.path.basename(path))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(cfg.get("num_key_value_heads", heads))
    if arch == "phi2":
        w.add_layer_norm_eps(cfg["layer_norm_eps"])
    else:
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    rot_pct = rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    if arch == "phi2":
        w.add_rope_dimension_count(int(rot_pct * cfg["hidden_size"]) // heads)
    elif arch == "phi3":
        n_embd, max_pos = cfg["hidden_size"], cfg["max_position_embeddings"]
        orig = cfg["original_max_position_embeddings"]
        w.add_rope_scaling_orig_ctx_len(orig)
        w.add_rope_dimension_count(int(rot_pct * n_embd) // heads)
        w.add_rope_freq_base(theta)
        w.add_sliding_window(cfg.get("sliding_window") or 0)
        scale = max_pos / orig
        w.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0)
    elif arch.startswith("gemma"):
        assert theta == 10000.0
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        if arch == "gemma2":
            w.add_attn_logit_softcapping(cfg["attn_logit_softcapping"])
            w.add_final_logit_softcapping(cfg["final_logit_softcapping"])
            w.add_sliding_window(cfg["sliding_window"])
    else:
        w.add_rope_freq_base(theta)
        w.add_rope_dimension_count(head_dim)
        if head_dim != cfg["hidden_size"] // heads:
            w.add_key_length(head_dim)
            w.add_value_length(head_dim)
    w.add_file_type(FILE_TYPE[qtype])
    tokenizer_metadata(w, cfg["vocab_size"])
    for name, t in tensors:
        # A row that is not whole blocks stays F32 (llama.cpp's quantizer falls back to
        # another type for such tensors too).
        if qtype is not None and t.ndim == 2 and t.shape[1] % quants.GGML_QUANT_SIZES[qtype][0] == 0:
            q = quants.quantize(t, qtype)
            if twin:
                w.add_tensor(name, quants.dequantize(q, qtype).astype(np.float32))
            else:
                w.add_tensor(name, q, raw_dtype=qtype)
        else:
            w.add_tensor(name, t)
    finish(w)


def main():
    os.makedirs(OUT, exist_ok=True)
    for model in MODELS:
        d = os.path.join(FIXTURES, model)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        tensors = gguf_tensors(cfg, load_file(os.path.join(d, "model.safetensors")))
        write(os.path.join(OUT, f"{model}.f32.gguf"), cfg, tensors)
        if model not in QUANTIZED:
            continue
        for qname, qtype in QUANTS.items():
            if model in ONLY_Q8 and qname != "q8_0":
                continue
            write(os.path.join(OUT, f"{model}.{qname}.gguf"), cfg, tensors, qtype)
            write(os.path.join(OUT, f"{model}.{qname}.twin.gguf"), cfg, tensors, qtype, twin=True)
    # GPT-2 (no inverse-layer-index attention scale: GGUF has no key for it).
    d = os.path.join(FIXTURES, "gpt2_small")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    write_gpt2(os.path.join(OUT, "gpt2_small.f32.gguf"), cfg,
               gpt2_tensors(cfg, load_file(os.path.join(d, "model.safetensors"))))
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
