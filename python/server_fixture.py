"""A decoder slow enough to watch (written at test time, never committed): a llama with random
weights, 4 layers of width 512 and a 4096-token context (~54 MB of f32), so that a long
generation runs for seconds and a disconnect, a full queue or a shutdown can be seen while it
runs. Its tokenizer and chat template are chat_tiny's (same 128-token vocabulary)."""

import json
import shutil
from pathlib import Path

import numpy as np


def _write_safetensors(path: Path, tensors: dict):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_slow_decoder(out: Path, tokenizer_from: Path, layers=4, hidden=512, ffn=1536,
                       ctx=4096, vocab=128) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    heads = hidden // 64
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": heads, "head_dim": 64,
        "max_position_embeddings": ctx, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "vocab_size": vocab, "tie_word_embeddings": True, "bos_token_id": 1,
        "eos_token_id": 2, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
    t = {"model.embed_tokens.weight": w(vocab, hidden),
         "model.norm.weight": np.ones(hidden, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ["q", "k", "v", "o"]:
            t[p + f"self_attn.{n}_proj.weight"] = w(hidden, hidden)
        t[p + "mlp.gate_proj.weight"] = w(ffn, hidden)
        t[p + "mlp.up_proj.weight"] = w(ffn, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, ffn)
        t[p + "input_layernorm.weight"] = np.ones(hidden, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(hidden, np.float32)
    _write_safetensors(out / "model.safetensors", t)
    for name in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(tokenizer_from / name, out / name)
    return out
