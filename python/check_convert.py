"""Checks a directory written by `kin-infer convert` against transformers (a manual check,
not run in CI: it needs torch and transformers, which CI does not install).

    python python/check_convert.py --dir /tmp/smol-hf [--kin target/release/kin-infer]

1. transformers loads the directory (AutoModelForCausalLM, AutoTokenizer, the chat template);
2. its logits for a chat-rendered prompt, and its greedy tokens, are written as a kin-infer
   golden (docs/golden-format.md) and replayed with `kin-infer check`, which prints the
   largest |difference| (transformers and kin-infer order their sums differently, so the
   logits agree within a tolerance, not bit for bit);
3. the chat prompt tokenized by transformers is the one kin-infer renders and tokenizes, and
   greedy decoding gives the same text (`kin-infer generate --chat`).
Exit 0 when all hold, 1 otherwise.
"""

import argparse
import json
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

QUESTION = "What is the capital of France?"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="a directory kin-infer convert wrote")
    ap.add_argument("--kin", default="target/release/kin-infer")
    ap.add_argument("--tol", type=float, default=2e-3)
    ap.add_argument("--max-tokens", type=int, default=30)
    a = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(a.dir)
    model = AutoModelForCausalLM.from_pretrained(a.dir, dtype=torch.float32)
    model.eval()
    messages = [{"role": "user", "content": QUESTION}]
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    # The template writes its own special tokens: encode without adding more, as kin-infer does.
    ids = tok(rendered, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].tolist()
        out = model.generate(
            torch.tensor([ids]),
            max_new_tokens=a.max_tokens,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id or tok.eos_token_id,
        )[0][len(ids):].tolist()
    hf_text = tok.decode(out, skip_special_tokens=True)
    print(f"transformers: {len(ids)} prompt tokens; generated {hf_text!r}")

    # A greedy `generate` case compares every token and does not stop on EOS: keep the
    # tokens up to the EOS transformers stopped at.
    if tok.eos_token_id in out:
        out = out[: out.index(tok.eos_token_id) + 1]
    golden = {
        "format": "kin-infer-golden/1",
        "tol": a.tol,
        "cases": [
            {"name": "chat logits", "kind": "logits", "input_ids": [ids], "expected": [logits]},
            {
                "name": "chat greedy",
                "kind": "generate",
                "input_ids": [ids],
                "max_new_tokens": len(out),
                "expected_tokens": [out],
            },
        ],
    }
    ok = True
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(golden, f)
        f.flush()
        r = subprocess.run(
            [a.kin, "check", "--model", a.dir, "--golden", f.name], capture_output=True, text=True
        )
        print(r.stdout.strip())
        if r.returncode != 0:
            print(r.stderr.strip())
            ok = False

    r = subprocess.run(
        [a.kin, "generate", "--model", a.dir, "--chat", "--prompt", QUESTION,
         "--max-tokens", str(a.max_tokens), "--json"],
        capture_output=True, text=True,
    )
    if r.returncode != 0:
        print(r.stderr.strip())
        return 1
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"kin-infer:    {summary['prompt_tokens']} prompt tokens; generated {summary['text']!r}")
    if summary["prompt_tokens"] != len(ids):
        print("prompt token counts differ")
        ok = False
    if summary["text"].strip() != hf_text.strip():
        print("generated text differs")
        ok = False
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
