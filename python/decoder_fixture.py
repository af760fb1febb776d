"""What every decoder fixture generator (python/gen_fixtures_{llama,llama_rope,mistral_qwen2,
gpt2,phi,gemma}.py) does the same way: build the tiny model from a seed, save it, draw the
prompts, build `logits` and greedy `generate` cases with transformers, write the golden, and
the command line.

The committed fixtures must stay byte-identical, so the random streams here are the ones the
generators always used: `torch.manual_seed(seed)` before the model is built, then one
`torch.randn` per parameter in sorted-name order from a `torch.Generator` seeded the same, and
the prompts from `random.Random(seed)`."""

from __future__ import annotations

import argparse
import os

from fixture_common import TOL, fresh_dir
from golden_json import f32_list, package_versions, write_golden

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NEW_TOKENS = 8
# Prompt ids start above the special ids (pad 0 and the bos / eos pair at 1 and 2).
FIRST_PROMPT_ID = 3


def sizes(vocab, hidden, inter, layers, heads, kv_heads, max_pos, head_dim=None, **rest):
    """A decoder config's size keys in the order the fixtures write them (vocab, hidden,
    intermediate, layers, heads, kv heads, [head_dim,] max positions), then `rest`."""
    cfg = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
               num_attention_heads=heads, num_key_value_heads=kv_heads)
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    return dict(cfg, max_position_embeddings=max_pos, **rest)


def random_decoder(torch, model_cls, config, seed, init):
    """`model_cls(config)` in float32 eval mode with eager attention (the reference the engine
    is held to), every parameter set to `init(name, param, r)` for a fresh `r = randn` of its
    shape; a tied head is re-tied to the embedding table afterwards."""
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = model_cls(config).float().eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            p.copy_(init(pname, p, r))
        if config.tie_word_embeddings:
            model.tie_weights()
    return model


def rms_decoder_init(tied, bias_scale=None):
    """The `random_decoder` init of an RMSNorm decoder: norm scales near 1, projections
    `randn / sqrt(fan_in)`, biases (with `bias_scale`) `bias_scale * randn`, the embedding
    table `randn` (`0.2 * randn` when `tied`)."""
    def init(pname, p, r):
        if "norm" in pname:
            return 1.0 + 0.2 * r
        if "embed_tokens" in pname:
            # A tied table is also the head: a small scale keeps the residual stream from
            # being dominated by the input token (greedy would just repeat it).
            return 0.2 * r if tied else r
        if bias_scale is not None and pname.endswith(".bias"):
            return bias_scale * r
        return r / (p.shape[-1] ** 0.5)
    return init


def save_decoder(model, out_root, name, **save_kwargs):
    """`out_root/name`, emptied, with the model's safetensors and config.json; returns it."""
    d = fresh_dir(out_root, name)
    model.save_pretrained(d, safe_serialization=True, **save_kwargs)
    drop_generation_config(d)
    return d


def random_prompts(rng, vocab, lengths):
    """One prompt of random non-special ids per length, drawn from `rng` in order."""
    return [[rng.randrange(FIRST_PROMPT_ID, vocab) for _ in range(n)] for n in lengths]


def decoder_cases(torch, model, prompts, gen_prompts=None, before_each=None, **generate_kw):
    """The `logits` case of every prompt, then the `generate` case of every `gen_prompts`
    (default: the same prompts); `before_each()` runs before each case (a model with state
    across calls is reset by it)."""
    cases = []
    with torch.no_grad():
        for kind, ids_list in (("logits", prompts), ("generate", prompts if gen_prompts is None else gen_prompts)):
            for ids in ids_list:
                if before_each is not None:
                    before_each()
                if kind == "logits":
                    cases.append(logits_case(torch, model, ids))
                else:
                    cases.append(generate_case(torch, model, ids, **generate_kw))
    return cases


def drop_generation_config(d):
    """generation_config.json carries a transformers version and sampling defaults that are not
    part of the fixtures."""
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)


def logits_case(torch, model, ids):
    """One row of vocab logits per prompt position (call under torch.no_grad())."""
    logits = model(torch.tensor([ids])).logits[0]
    return dict(name=f"logits_{len(ids)}", kind="logits", input_ids=[ids],
                expected=[f32_list(logits)])


def generate_case(torch, model, ids, min_gap=None, label=None):
    """Greedy NEW_TOKENS tokens, no stop on EOS (call under torch.no_grad()). With `min_gap`,
    every step's top two logits must differ by more than it (greedy must not hinge on a tie)."""
    out = model.generate(
        torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
        eos_token_id=None, pad_token_id=0, use_cache=True, output_scores=min_gap is not None,
        return_dict_in_generate=True,
    )
    new = out.sequences[0, len(ids):].tolist()
    assert len(new) == NEW_TOKENS, new
    if min_gap is not None:
        for step in out.scores:
            top = step[0].topk(2).values
            assert (top[0] - top[1]).item() > min_gap, (label, ids, new)
    return dict(name=f"generate_{len(ids)}", kind="generate", input_ids=[ids],
                max_new_tokens=NEW_TOKENS, expected_tokens=[new])


def write_decoder_golden(d, cases, script, name):
    write_golden(os.path.join(d, "golden.json"), TOL, cases,
                 extra=dict(generator=f"python/{script}", fixture=name,
                            versions=package_versions()))
    print(f"wrote {d}")


def main(fixtures, build, argv=None):
    """`--out DIR` (default tests/decoder_fixtures), `--only NAME...`; deterministic torch on
    one thread, then `build(torch, name, fx, out)` per fixture."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "decoder_fixtures"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args(argv)
    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, fx in fixtures.items():
        if a.only and name not in a.only:
            continue
        build(torch, name, fx, a.out)
