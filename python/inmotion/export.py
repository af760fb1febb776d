"""Writing and reading inmotion-artifact/1 directories (meta.json, model.safetensors,
golden.json), as /work/shared/specs/inmotion-artifact.md specifies."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform

import numpy as np
import torch
from torch import nn

from . import __version__, jsonfmt, models, quant
from .data import CLASSES

ARTIFACT_FORMAT = "inmotion-artifact/1"
GOLDEN_FORMAT = "kin-infer-golden/1"
DEFAULT_TOL = 1e-4
PRODUCER = "in-house"


def quantizable_names(model):
    """Every Linear / Conv1d weight (and attention in_proj_weight), in state_dict order."""
    names = set()
    for mname, m in model.named_modules():
        pre = mname + "." if mname else ""
        if isinstance(m, (nn.Linear, nn.Conv1d)):
            names.add(pre + "weight")
        elif isinstance(m, nn.MultiheadAttention):
            names.add(pre + "in_proj_weight")
    return [k for k in model.state_dict() if k in names]


def _np_state(model):
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def _round_cast(a, scheme_name):
    """The value a runtime sees after widening the stored F16/BF16 tensor to f32."""
    t = torch.from_numpy(np.asarray(a, np.float32))
    if scheme_name == "fp16":
        s = t.to(torch.float16)
    else:
        s = t.to(torch.bfloat16)
    return s, s.to(torch.float32).numpy()


def quantize_state(model, scheme: quant.Scheme, keep_num_batches_tracked=True, producer=PRODUCER):
    """-> (stored: name -> torch tensor, deq: name -> np f32 (what the runtime computes with),
    quantized tensor names). `producer`: see producers.py."""
    from . import producers
    prod = producers.get(producer)
    sd = _np_state(model)
    stored, deq, qnames = {}, {}, []
    qset = set(quantizable_names(model)) if not scheme.is_cast and scheme.name != "fp32" else set()
    for k, a in sd.items():
        if k.endswith("num_batches_tracked"):
            if keep_num_batches_tracked:
                stored[k] = torch.from_numpy(np.asarray(a, np.int64).reshape(()))
            continue
        a = np.asarray(a, np.float32)
        if scheme.name in ("fp16", "bf16"):
            s, d = _round_cast(a, scheme.name)
            stored[k] = s
            deq[k] = d
        elif k in qset:
            producers.require(prod, scheme, int(np.prod(a.shape[1:])), k)
            st, d = quant.quantize_tensor(a, scheme, prod.matrix)
            stored[k + ".__q"] = torch.from_numpy(st["q"])
            stored[k + ".__scale"] = torch.from_numpy(st["scale"])
            stored[k + ".__zero"] = torch.from_numpy(st["zero"])
            deq[k] = d
            qnames.append(k)
        else:
            stored[k] = torch.from_numpy(a.copy())
            deq[k] = a
    return stored, deq, qnames


def model_with_weights(model, deq):
    m = copy.deepcopy(model)
    sd = m.state_dict()
    new = {}
    for k, v in sd.items():
        new[k] = torch.from_numpy(np.asarray(deq[k], np.float32)).reshape(v.shape) if k in deq else v
    m.load_state_dict(new)
    m.eval()
    return m


def logits(model, windows):
    """PyTorch forward in eval mode, no grad, batch of windows [N, T, C] -> np f32 [N, K]."""
    model.eval()
    prev = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)  # the textbook path: exactly the spec's graph
    try:
        with torch.no_grad():
            return model(torch.from_numpy(np.asarray(windows, np.float32))).numpy()
    finally:
        torch.backends.mha.set_fastpath_enabled(prev)


def quantization_meta(scheme: quant.Scheme, qnames, producer=PRODUCER):
    if scheme.is_cast:
        return {"scheme": scheme.name, "producer": PRODUCER}  # casts are the in-house producer's
    return {"scheme": scheme.name, "bits": scheme.bits, "granularity": scheme.granularity,
            "group_size": scheme.group_size if scheme.granularity == "per_group" else 0,
            "axis": 0, "symmetric": False, "producer": producer, "tensors": list(qnames)}


def provenance(extra=None, minimal=False):
    import safetensors
    p = {"exporter": f"inmotion {__version__} (python/inmotion)", "torch_version": torch.__version__.split("+")[0]}
    if minimal:
        return p
    p.update({"numpy_version": np.__version__, "safetensors_version": safetensors.__version__,
              "python_version": platform.python_version()})
    if extra:
        p.update(extra)
    return p


def save_safetensors(path, stored):
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in stored.items()}, path)


def export(model, out_dir, scheme="fp32", *, tol=DEFAULT_TOL, windows=None, case_names=None,
           preprocess=None, classes=True, sha=True, prov_extra=None, minimal_provenance=False,
           keep_num_batches_tracked=True, golden=True, producer=PRODUCER):
    """Write ART/{meta.json, model.safetensors[, golden.json]}. `windows` [N, T, C] are the
    golden inputs. Returns a summary dict."""
    if isinstance(scheme, str):
        scheme = quant.parse_scheme(scheme)
    stored, deq, qnames = quantize_state(model, scheme, keep_num_batches_tracked, producer)
    os.makedirs(out_dir, exist_ok=True)  # after quantizing: a refused combination leaves nothing
    st_path = os.path.join(out_dir, "model.safetensors")
    save_safetensors(st_path, stored)
    with open(st_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    T, C, K = model.seq_len, model.in_channels, model.num_classes
    meta = {"format": ARTIFACT_FORMAT, "model": model.family, "seq_len": T, "in_channels": C, "num_classes": K}
    if classes:
        meta["classes"] = list(CLASSES[:K]) if K == len(CLASSES) else [f"class{i}" for i in range(K)]
    meta["hparams"] = dict(model.hp)
    meta["quantization"] = quantization_meta(scheme, qnames, producer)
    meta["provenance"] = provenance(prov_extra, minimal_provenance)
    if sha:
        meta["weights_sha256"] = digest
    if preprocess is not None:
        meta["preprocess"] = preprocess
    jsonfmt.write(os.path.join(out_dir, "meta.json"), meta)
    gpath = os.path.join(out_dir, "golden.json")
    max_err = None
    if golden:
        if windows is None:
            raise ValueError("golden windows required")
        m = model_with_weights(model, deq)
        out = logits(m, windows)
        names = case_names or [f"window{i}" for i in range(len(windows))]
        cases = [{"kind": "classify", "name": n,
                  "input": np.asarray(w, np.float32).astype(np.float64).tolist(),
                  "expected": o.astype(np.float64).tolist()} for n, w, o in zip(names, windows, out)]
        jsonfmt.write(gpath, {"format": GOLDEN_FORMAT, "tol": float(tol), "cases": cases})
    elif os.path.exists(gpath):
        os.remove(gpath)
    return {"dir": out_dir, "bytes": os.path.getsize(st_path), "sha256": digest, "quantized": len(qnames)}


# ------------------------------------------------------------------ reading

def _dtype_ok(t, name, where):
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"{where}: tensor {name} has dtype {t.dtype}")


def read_artifact(art_dir):
    """-> (meta, deq: name -> np f32 of the logical tensors). Verifies sha256 when declared."""
    from safetensors.torch import load_file
    with open(os.path.join(art_dir, "meta.json")) as f:
        meta = json.load(f)
    if meta.get("format") != ARTIFACT_FORMAT:
        raise ValueError(f"{art_dir}/meta.json: format {meta.get('format')!r}")
    st_path = os.path.join(art_dir, "model.safetensors")
    if "weights_sha256" in meta:
        with open(st_path, "rb") as f:
            d = hashlib.sha256(f.read()).hexdigest()
        if d != meta["weights_sha256"]:
            raise ValueError(f"{st_path}: sha256 {d} != weights_sha256 {meta['weights_sha256']}")
    raw = load_file(st_path)
    q = meta.get("quantization", {})
    deq = {}
    for name in q.get("tensors", []) if "bits" in q else []:
        codes = raw.pop(name + ".__q").numpy()
        scale = raw.pop(name + ".__scale").numpy()
        zero = raw.pop(name + ".__zero").numpy()
        deq[name] = (codes, scale, zero)
    out = {}
    for k, t in raw.items():
        if k.endswith("num_batches_tracked"):
            continue
        _dtype_ok(t, k, art_dir)
        out[k] = t.to(torch.float32).numpy()
    return meta, out, deq


def load_artifact(art_dir):
    """-> the fp32 PyTorch module carrying the artifact's (dequantized / widened) weights."""
    meta, dense, packed = read_artifact(art_dir)
    model = models.build(meta["model"], meta["hparams"], meta["seq_len"], meta["in_channels"], meta["num_classes"])
    sd = model.state_dict()
    q = meta.get("quantization", {})
    weights = {}
    for k, v in sd.items():
        if k.endswith("num_batches_tracked"):
            weights[k] = v
        elif k in packed:
            codes, scale, zero = packed[k]
            weights[k] = torch.from_numpy(quant.dequantize_stored(
                codes, scale, zero, q["bits"], q["granularity"], q.get("group_size", 0), tuple(v.shape)))
        elif k in dense:
            if tuple(dense[k].shape) != tuple(v.shape):
                raise ValueError(f"{art_dir}: tensor {k} shape {dense[k].shape} != {tuple(v.shape)}")
            weights[k] = torch.from_numpy(dense[k])
        else:
            raise ValueError(f"{art_dir}: tensor {k} missing")
    extra = set(dense) - set(sd)
    if extra:
        raise ValueError(f"{art_dir}: extra tensors {sorted(extra)}")
    model.load_state_dict(weights)
    model.eval()
    return model, meta


def check_golden(art_dir, golden_path=None):
    """Recompute the golden with PyTorch from the artifact itself -> (max |diff|, tol, n cases)."""
    model, meta = load_artifact(art_dir)
    with open(golden_path or os.path.join(art_dir, "golden.json")) as f:
        g = json.load(f)
    X = np.array([c["input"] for c in g["cases"]], np.float32)
    E = np.array([c["expected"] for c in g["cases"]], np.float32)
    out = logits(model, X)
    return float(np.abs(out - E).max()), g["tol"], len(g["cases"])
