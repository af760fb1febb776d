"""kin_infer.Generator: the CLI's tokens (greedy and seeded sampling), whole and streamed,
prompts as text, token ids or chat messages; typed exceptions for bad requests."""

import json
import subprocess

import pytest

import kin_infer
from conftest import ROOT


def cli(bin_, model, *args):
    out = subprocess.run(
        [str(bin_), "generate", "--model", str(model), "--json", *args],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def test_greedy_text_prompt_equals_the_cli(chat_tiny, kin_infer_bin):
    want = cli(kin_infer_bin, chat_tiny, "--prompt", "Hello there", "--max-tokens", "24")
    g = kin_infer.Generator(str(chat_tiny))
    r = g.generate("Hello there", max_tokens=24)
    assert r.token_ids == want["ids"] and r.text == want["text"]
    assert r.stop_reason == want["stop_reason"] and r.prompt_tokens == want["prompt_tokens"]
    s = g.stream("Hello there", max_tokens=24)
    chunks = list(s)
    assert [c.token_id for c in chunks] == want["ids"]
    assert "".join(c.text for c in chunks) == want["text"]
    assert s.result is not None and s.result.token_ids == want["ids"]


def test_seeded_sampling_and_chat_equal_the_cli(chat_tiny, kin_infer_bin):
    args = ["--max-tokens", "16", "--temperature", "0.8", "--top-p", "0.9", "--seed", "7"]
    want = cli(kin_infer_bin, chat_tiny, "--prompt", "Hi", "--chat", "--system", "Be brief.", *args)
    g = kin_infer.Generator(str(chat_tiny))
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    r = g.chat(msgs, max_tokens=16, temperature=0.8, top_p=0.9, seed=7)
    assert r.token_ids == want["ids"] and r.prompt_tokens == want["prompt_tokens"]
    streamed = [c.token_id for c in g.stream(msgs, max_tokens=16, temperature=0.8, top_p=0.9, seed=7)]
    assert streamed == want["ids"]


def test_token_id_prompts_stop_strings_and_early_close(chat_tiny, kin_infer_bin):
    g = kin_infer.Generator(str(chat_tiny))
    ids = g.encode("Hello there")
    want = cli(kin_infer_bin, chat_tiny, "--prompt-ids", " ".join(map(str, ids)), "--max-tokens", "12")
    assert g.generate(ids, max_tokens=12).token_ids == want["ids"]
    full = g.generate("Hello there", max_tokens=24).text
    stop = full[3:5]
    r = g.generate("Hello there", max_tokens=24, stop=stop)
    assert r.stop_reason == "stop_string" and r.text == full[: full.index(stop)]
    s = g.stream("Hello there", max_tokens=24)
    first = next(s)
    s.close()
    assert s.result.stop_reason == "cancelled" and s.result.token_ids == [first.token_id]
    assert list(s) == []


def test_decoder_fixture_without_tokenizer_takes_token_ids(kin_infer_bin):
    model = ROOT / "tests" / "decoder_fixtures" / "llama_gqa"
    want = cli(kin_infer_bin, model, "--prompt-ids", "1 5 9 13", "--max-tokens", "10")
    g = kin_infer.Generator(str(model), threads=1)
    assert g.generate([1, 5, 9, 13], max_tokens=10).token_ids == want["ids"]
    with pytest.raises(kin_infer.InvalidInputError, match="tokenizer"):
        g.generate("text needs a tokenizer")


def test_activation_modes_are_chosen_reported_and_match_the_cli(kin_infer_bin):
    model = ROOT / "tests" / "fixtures" / "gguf" / "decoders" / "llama_gqa.q4_0.gguf"
    for mode, runs in [(None, "f32"), ("auto", "f32"), ("q8", "q8"), ("f32", "f32")]:
        g = kin_infer.Generator(str(model), threads=1, activations=mode)
        assert g.activations == runs
        want = {"q8": kin_infer.Q8_NUMERICS_VERSION, "f32": kin_infer.NUMERICS_VERSION}[runs]
        assert g.numerics_version == want
        args = ["--prompt-ids", "1 5 9 13", "--max-tokens", "10", "--activations", runs]
        assert g.generate([1, 5, 9, 13], max_tokens=10).token_ids == cli(kin_infer_bin, model, *args)["ids"]
    with pytest.raises(kin_infer.InvalidInputError, match="activation mode"):
        kin_infer.Generator(str(model), activations="int8")
    f32_file = ROOT / "tests" / "fixtures" / "gguf" / "decoders" / "llama_gqa.f32.gguf"
    with pytest.raises(kin_infer.KinInferError, match="no ggml-quantized weight"):
        kin_infer.Generator(str(f32_file), activations="q8")


def test_bad_requests_raise_typed_exceptions(chat_tiny, tmp_path):
    g = kin_infer.Generator(str(chat_tiny))
    with pytest.raises(kin_infer.ContextExceededError):
        g.generate("Hello", max_tokens=10**6)
    with pytest.raises(kin_infer.InvalidInputError, match="temperature"):
        g.generate("Hello", temperature=-1.0)
    with pytest.raises(kin_infer.InvalidInputError, match="top_p"):
        g.generate("Hello", top_p=0.0)
    with pytest.raises(kin_infer.InvalidInputError):
        g.generate([g.vocab_size + 5])
    with pytest.raises(kin_infer.InvalidInputError):
        g.generate([-1])
    with pytest.raises(kin_infer.InvalidInputError):
        g.generate([])
    with pytest.raises(kin_infer.InvalidInputError):
        g.generate(3.5)
    with pytest.raises(kin_infer.InvalidInputError, match="messages is empty"):
        g.chat([])
    with pytest.raises(kin_infer.InvalidInputError, match="role"):
        g.generate([{"content": "no role"}])
    with pytest.raises(kin_infer.ModelNotFoundError):
        kin_infer.Generator(str(tmp_path / "missing"))
    assert g.context_length == 64 and g.family == "qwen2" and g.eos_token_ids
