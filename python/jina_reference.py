"""A small PyTorch reference of the JinaBERT v2 encoder (jina-embeddings-v2-*, the
`jinaai/jina-bert-implementation` remote code), written from the published architecture because
transformers has no class for it. Used by python/gen_fixtures_nomic_jina.py to compute goldens.

Architecture (names are the checkpoint's tensor names):

- embeddings: `word_embeddings` + `token_type_embeddings` (no position embeddings: ALiBi),
  then `LayerNorm`;
- per layer `encoder.layer.N`: BERT self-attention (`attention.self.query/key/value`, biased)
  with scores `q.k / sqrt(d) + mask + alibi`, alibi = `-slope_h * |i - j|` (symmetric), slopes
  from the ALiBi paper (geometric for a power-of-two head count, interpolated otherwise);
  `attention.output.dense` + residual + `attention.output.LayerNorm` (post-norm);
- gated feed-forward `mlp.gated_layers` (`[2 * intermediate, hidden]`, no bias):
  `gated, non_gated = h[..., :I], h[..., I:]`; `act(gated) * non_gated` (act: exact GELU for
  `feed_forward_type: geglu`, ReLU for `reglu`); `mlp.wo` (biased); `mlp.layernorm` over
  `wo(...) + residual`;
- `pooler.dense` exists in the checkpoints (unused by embeddings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class JinaConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    feed_forward_type: str = "geglu"

    def to_hub_json(self) -> dict:
        """config.json as the published jina-embeddings-v2 checkpoints write it."""
        return {
            "architectures": ["JinaBertModel"],
            "attention_probs_dropout_prob": 0.0,
            "classifier_dropout": None,
            "emb_pooler": "mean",
            "feed_forward_type": self.feed_forward_type,
            "gradient_checkpointing": False,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "hidden_size": self.hidden_size,
            "initializer_range": 0.02,
            "intermediate_size": self.intermediate_size,
            "layer_norm_eps": self.layer_norm_eps,
            "max_position_embeddings": self.max_position_embeddings,
            "model_max_length": self.max_position_embeddings,
            "model_type": "bert",
            "num_attention_heads": self.num_attention_heads,
            "num_hidden_layers": self.num_hidden_layers,
            "pad_token_id": self.pad_token_id,
            "position_embedding_type": "alibi",
            "torch_dtype": "float32",
            "transformers_version": "4.26.0",
            "type_vocab_size": self.type_vocab_size,
            "use_cache": True,
            "vocab_size": self.vocab_size,
        }


def alibi_slopes(n_heads: int) -> list[float]:
    """The ALiBi paper's head slopes (and its rule for a head count that is not a power of 2)."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n_heads).is_integer():
        return power_of_2(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: n_heads - closest]


def alibi_bias(n_heads: int, size: int) -> torch.Tensor:
    """`[1, heads, size, size]`: `-slope_h * |i - j|`, as JinaBertEncoder.rebuild_alibi_tensor."""
    ctx = torch.arange(size)[:, None]
    mem = torch.arange(size)[None, :]
    rel = torch.abs(mem - ctx).unsqueeze(0).expand(n_heads, -1, -1)
    slopes = torch.tensor(alibi_slopes(n_heads), dtype=torch.float32) * -1
    return (slopes.unsqueeze(1).unsqueeze(1) * rel).unsqueeze(0)


class Embeddings(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, ids, types):
        return self.LayerNorm(self.word_embeddings(ids) + self.token_type_embeddings(types))


class SelfAttention(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.heads = c.num_attention_heads
        self.head_dim = c.hidden_size // c.num_attention_heads
        self.query = nn.Linear(c.hidden_size, c.hidden_size)
        self.key = nn.Linear(c.hidden_size, c.hidden_size)
        self.value = nn.Linear(c.hidden_size, c.hidden_size)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask, bias):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores + mask
        probs = torch.softmax(scores + bias, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(x.shape)


class SelfOutput(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class Attention(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.self = SelfAttention(c)
        self.output = SelfOutput(c)

    def forward(self, x, mask, bias):
        return self.output(self.self(x, mask, bias), x)


class GLUMLP(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.intermediate = c.intermediate_size
        self.gated_layers = nn.Linear(c.hidden_size, 2 * c.intermediate_size, bias=False)
        if c.feed_forward_type == "geglu":
            self.act = nn.GELU()
        elif c.feed_forward_type == "reglu":
            self.act = nn.ReLU()
        else:
            raise ValueError(f"feed_forward_type {c.feed_forward_type}")
        self.wo = nn.Linear(c.intermediate_size, c.hidden_size)
        self.layernorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def forward(self, x):
        h = self.gated_layers(x)
        gated, non_gated = h[..., : self.intermediate], h[..., self.intermediate :]
        return self.layernorm(self.wo(self.act(gated) * non_gated) + x)


class Layer(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.attention = Attention(c)
        self.mlp = GLUMLP(c)

    def forward(self, x, mask, bias):
        return self.mlp(self.attention(x, mask, bias))


class Encoder(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.layer = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])


class Pooler(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)


class JinaBertModel(nn.Module):
    def __init__(self, c: JinaConfig):
        super().__init__()
        self.config = c
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)
        self.pooler = Pooler(c)  # in the checkpoints; not used for embeddings

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        bias = alibi_bias(self.config.num_attention_heads, input_ids.shape[1])
        for layer in self.encoder.layer:
            x = layer(x, mask, bias)
        return x
