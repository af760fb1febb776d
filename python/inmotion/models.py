"""Reference PyTorch modules for the five inMotion families. Their state_dict() names and their
forward are exactly /work/shared/specs/inmotion-artifact.md (copied in docs/inmotion-mcc.md's
neighbour, the spec). Input x [batch, seq_len, in_channels] -> logits [batch, num_classes]."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .names import FAMILIES, TRANSFORMERS  # noqa: F401 (re-exported)

# Small configurations of the committed fixtures (trained on the real dataset).
SMALL = {
    "lejepa": dict(d_model=32, n_heads=4, num_layers=2, dim_feedforward=64, head_hidden=32),
    "t_jepa": dict(d_model=32, n_heads=4, num_layers=1, dim_feedforward=64, head_hidden=32, n_reg=2),
    "ts_jepa": dict(d_model=48, n_heads=4, num_layers=2, dim_feedforward=96, head_hidden=32, patch_size=2),
    "cf_jepa": dict(d_model=48, n_heads=4, num_layers=2, dim_feedforward=96, head_hidden=32),
    "sigreg": dict(num_filters=36, num_blocks=2, latent_dim=32),
}

# Published sizes (issue 5's speed table; unstated values chosen here and documented in
# docs/inmotion-mcc.md): used by scripts/bench-inmotion.py and `inmotion export-random --published`.
PUBLISHED = {
    family: {**SMALL[family], **wider}
    for family, wider in {
        "lejepa": dict(d_model=128, num_layers=4, dim_feedforward=512, head_hidden=128),
        "t_jepa": dict(d_model=128, num_layers=4, dim_feedforward=256, head_hidden=128),
        "ts_jepa": dict(d_model=256, n_heads=8, num_layers=4, dim_feedforward=512, head_hidden=128),
        "cf_jepa": dict(d_model=256, n_heads=8, num_layers=3, dim_feedforward=512, head_hidden=128),
        "sigreg": dict(num_filters=192, num_blocks=3, latent_dim=64),
    }.items()
}

TAIL = {"lejepa": "proj_gelu_batchnorm", "cf_jepa": "proj_gelu_batchnorm", "t_jepa": "mlp", "ts_jepa": "mlp"}


def full_hparams(family, hp):
    hp = dict(hp)
    hp.setdefault("layer_norm_eps", 1e-5)
    hp.setdefault("batch_norm_eps", 1e-5)
    return hp


# ------------------------------------------------------------------ tokenizers

class LinearTokenizer(nn.Module):  # lejepa: token t = proj(x[t])
    def __init__(self, C, d):
        super().__init__()
        self.proj = nn.Linear(C, d)

    def forward(self, x):
        return self.proj(x)


class ChannelTokenizer(nn.Module):  # cf_jepa: token c = proj(x[:, c])
    def __init__(self, T, d):
        super().__init__()
        self.proj = nn.Linear(T, d)

    def forward(self, x):
        return self.proj(x.transpose(1, 2))


class PatchTokenizer(nn.Module):  # ts_jepa: Conv1d over time, kernel = stride = patch
    def __init__(self, C, d, p):
        super().__init__()
        self.proj = nn.Conv1d(C, d, kernel_size=p, stride=p)

    def forward(self, x):
        return self.proj(x.transpose(1, 2)).transpose(1, 2)


class RegTokens(nn.Module):
    def __init__(self, n_reg, d):
        super().__init__()
        self.tokens = nn.Parameter(torch.randn(n_reg, d) * 0.02)


class FeatureTokenizer(nn.Module):  # t_jepa: one token per scalar feature, n_reg registers first
    def __init__(self, T, C, d, n_reg):
        super().__init__()
        n = T * C
        self.n_reg = n_reg
        self.weight = nn.Parameter(torch.randn(n_reg + n, d) * 0.5)
        self.bias = nn.Parameter(torch.randn(n, d) * 0.02)
        self.feat_idx_embed = nn.Embedding(n, d)
        with torch.no_grad():
            self.feat_idx_embed.weight.mul_(0.1)
        self.reg_tokens = RegTokens(n_reg, d)  # present in checkpoints, unused

    def forward(self, x):
        B = x.shape[0]
        v = torch.cat([torch.ones(B, self.n_reg, dtype=x.dtype), x.reshape(B, -1)], dim=1)
        z = torch.zeros(self.n_reg, self.weight.shape[1], dtype=x.dtype)
        bias = torch.cat([z, self.bias], 0)
        emb = torch.cat([z, self.feat_idx_embed.weight], 0)
        return self.weight * v.unsqueeze(-1) + bias + emb


class AttnPool(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.Linear(d, 1)

    def forward(self, x):
        w = torch.softmax(self.attn(x), dim=1)
        return (w * x).sum(dim=1)


class Encoder(nn.Module):
    def __init__(self, family, T, C, hp):
        super().__init__()
        d = hp["d_model"]
        self.family = family
        if family == "lejepa":
            self.tokenizer = LinearTokenizer(C, d)
            n_tok = T
        elif family == "cf_jepa":
            self.tokenizer = ChannelTokenizer(T, d)
            n_tok = C
        elif family == "ts_jepa":
            p = hp["patch_size"]
            if T % p:
                raise ValueError(f"patch_size {p} does not divide seq_len {T}")
            self.tokenizer = PatchTokenizer(C, d, p)
            n_tok = T // p
        elif family == "t_jepa":
            self.tokenizer = FeatureTokenizer(T, C, d, hp["n_reg"])
            self.input_proj = nn.Linear(d, d)
            n_tok = None
        else:
            raise ValueError(family)
        if n_tok is not None:
            self.pos_embed = nn.Parameter(torch.randn(1, n_tok, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, hp["n_heads"], hp["dim_feedforward"], dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True,
                                           layer_norm_eps=hp["layer_norm_eps"])
        self.transformer = nn.TransformerEncoder(layer, hp["num_layers"], enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d, eps=hp["layer_norm_eps"])

    def forward(self, x):
        h = self.tokenizer(x)
        if self.family == "t_jepa":
            h = self.input_proj(h)
        else:
            h = h + self.pos_embed
        return self.norm(self.transformer(h))


class Classifier(nn.Module):
    """What every family's classifier records: its family, full hyperparameters and shapes
    (the exporter reads them back)."""

    def __init__(self, family, seq_len, in_channels, num_classes, hp):
        super().__init__()
        self.family = family
        self.hp = full_hparams(family, hp)
        self.seq_len, self.in_channels, self.num_classes = seq_len, in_channels, num_classes


class TransformerClassifier(Classifier):
    def __init__(self, family, seq_len, in_channels, num_classes, hp):
        super().__init__(family, seq_len, in_channels, num_classes, hp)
        hp = self.hp
        d, hh = hp["d_model"], hp["head_hidden"]
        self.encoder = Encoder(family, seq_len, in_channels, hp)
        if family == "lejepa":
            self.pool = AttnPool(d)
        if TAIL[family] == "mlp":
            self.head = nn.Sequential(nn.Linear(d, hh), nn.GELU(), nn.Dropout(0.1), nn.Linear(hh, num_classes))
        else:
            self.head = nn.Sequential(nn.Linear(d, hh), nn.GELU(),
                                      nn.BatchNorm1d(hh, eps=hp["batch_norm_eps"]), nn.Linear(hh, num_classes))
        self.n_reg = hp.get("n_reg", 0) if family == "t_jepa" else 0

    def forward(self, x):
        h = self.encoder(x)
        if self.family == "lejepa":
            p = self.pool(h)
        else:
            p = h[:, self.n_reg:].mean(dim=1)
        return self.head(p)


class ResBlock(nn.Module):
    def __init__(self, F_, eps):
        super().__init__()
        self.block = nn.Sequential(nn.Conv1d(F_, F_, 3, padding=1), nn.BatchNorm1d(F_, eps=eps), nn.GELU(),
                                   nn.Conv1d(F_, F_, 3, padding=1), nn.BatchNorm1d(F_, eps=eps))

    def forward(self, x):
        return F.gelu(x + self.block(x))


class SigregEncoder(nn.Module):
    def __init__(self, C, hp):
        super().__init__()
        F_ = hp["num_filters"]
        eps = hp["batch_norm_eps"]
        self.conv3 = nn.Conv1d(C, F_ // 3, 3, padding=1)
        self.conv5 = nn.Conv1d(C, F_ // 3, 5, padding=2)
        self.conv7 = nn.Conv1d(C, F_ - 2 * (F_ // 3), 7, padding=3)
        self.bn = nn.BatchNorm1d(F_, eps=eps)
        self.blocks = nn.ModuleList([ResBlock(F_, eps) for _ in range(hp["num_blocks"])])

    def forward(self, x):
        x = x.transpose(1, 2)
        h = torch.cat([self.conv3(x), self.conv5(x), self.conv7(x)], dim=1)
        h = F.gelu(self.bn(h))
        for b in self.blocks:
            h = b(h)
        return h.mean(dim=2)


class SigregClassifier(Classifier):
    def __init__(self, family, seq_len, in_channels, num_classes, hp):
        super().__init__(family, seq_len, in_channels, num_classes, hp)
        hp = self.hp
        self.encoder = SigregEncoder(in_channels, hp)
        self.latent_proj = nn.Linear(hp["num_filters"], hp["latent_dim"])
        self.latent_norm = nn.LayerNorm(hp["latent_dim"], eps=hp["layer_norm_eps"])
        self.classifier = nn.Linear(hp["latent_dim"], num_classes)

    def forward(self, x):
        return self.classifier(self.latent_norm(self.latent_proj(self.encoder(x))))


def build(family, hp, seq_len=10, in_channels=4, num_classes=4):
    if family == "sigreg":
        return SigregClassifier(family, seq_len, in_channels, num_classes, hp)
    if family in TRANSFORMERS:
        return TransformerClassifier(family, seq_len, in_channels, num_classes, hp)
    raise ValueError(f"unknown family {family!r} (one of {', '.join(FAMILIES)})")


def randomize_bn(model, gen):
    """Non-trivial BatchNorm statistics/affine for untrained models (so the golden exercises them)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm1d):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(1 + torch.randn(n, generator=gen) * 0.1)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                m.num_batches_tracked.fill_(0)


def random_model(family, hp, seed=0, seq_len=10, in_channels=4, num_classes=4):
    torch.manual_seed(seed)
    m = build(family, hp, seq_len, in_channels, num_classes)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        # perturb LayerNorm affine so it is not the identity
        for mod in m.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.copy_(1 + torch.randn(mod.weight.shape, generator=g) * 0.1)
                mod.bias.copy_(torch.randn(mod.bias.shape, generator=g) * 0.1)
        for name, p in m.named_parameters():
            if name.endswith("pos_embed") or name.endswith("bias") and p.abs().max() == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    randomize_bn(m, g)
    m.eval()
    return m
