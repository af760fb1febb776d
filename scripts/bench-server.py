#!/usr/bin/env python3
"""`kin-infer serve` against its peers, in one run on one machine (issue 15, "How fast"):

1. Embedding throughput: the same texts through `kin-infer embed` (one process, whole file)
   and through the server at concurrency 16, with all-MiniLM-L6-v2; the ratio server / CLI.
   One text per request is driven by `wrk` (Debian's package; a Python client costs as much
   CPU as the server's own overhead on two cores) when it is installed, else by the `openai`
   client; 16 texts per request by the `openai` client. The CLI's time includes loading the
   model (tens of ms), the server's does not.
2. Latency of single short embedding requests, one at a time: p50 and p99.
3. Streamed completion tokens/s against llama.cpp's server (the `xllamacpp` wheel's, on its
   own port, driven through HTTP by the same `openai` client) on the same GGUF file (the random
   100M LLaMA of scripts/bench-gguf.py, Q4_0 by default): a prompt of random token ids,
   `max_tokens` tokens, greedy; decode tokens/s measured by the client between the first and
   the last streamed token, at concurrency 1 and 4 (both servers with 4 slots). llama.cpp is
   told to ignore EOS; with random weights kin-infer's run reaching EOS early shows as fewer
   tokens and is reported.

Needs the release binary, `pip install openai==3.57.0 numpy==2.4.6 gguf==0.19.0 xllamacpp`,
MiniLM (KIN_MINILM_DIR, else models/all-MiniLM-L6-v2 from scripts/fetch-minilm.sh):

    python3 scripts/bench-server.py [--threads 2] [--repeat 3] [--texts 4000] [--json]
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import openai

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, "target", "release", "kin-infer")
sys.path.insert(0, os.path.join(REPO, "scripts"))


def corpus(n):
    """Code-entity-like texts of varied length (deterministic)."""
    rng = np.random.default_rng(3)
    words = ("fn struct impl parse token graph node edge return self value error result "
             "match async await iterator buffer index cache writer reader config").split()
    out = []
    for i in range(n):
        k = int(rng.integers(4, 60))
        out.append(f"fn item_{i}(" + " ".join(rng.choice(words, k)) + ")")
    return out


class Serve:
    def __init__(self, args, *models):
        cmd = [BIN, "serve", "--port", "0", "--threads", str(args.threads)]
        for m in models:
            cmd += ["--model", m]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.url = json.loads(self.p.stdout.readline())["url"]

    def close(self):
        self.p.terminate()
        self.p.wait()


def cli_embed_s(model, path, threads):
    t0 = time.perf_counter()
    subprocess.run([BIN, "embed", "--model", model, "--input", path, "--threads", str(threads),
                    "--output", path + ".out"], check=True, capture_output=True)
    return time.perf_counter() - t0


async def server_embed_s(url, texts, per_request, concurrency):
    c = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)
    chunks = [texts[i:i + per_request] for i in range(0, len(texts), per_request)]
    sem = asyncio.Semaphore(concurrency)

    async def one(ch):
        async with sem:
            r = await c.embeddings.create(model="minilm", input=ch)
            assert len(r.data) == len(ch)
    await one(chunks[0])  # warm
    t0 = time.perf_counter()
    await asyncio.gather(*[one(ch) for ch in chunks])
    dt = time.perf_counter() - t0
    await c.close()
    return dt


WRK_LUA = """
-- One embedding request per line of a file of JSON bodies, cycling; each thread starts at
-- its own offset.
local bodies = {}
local i = 0
local counter = 0
function setup(thread)
  thread:set("offset", counter * 997)
  counter = counter + 1
end
function init(args)
  for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
  i = offset or 0
end
function request()
  i = i % #bodies + 1
  return wrk.format("POST", "/v1/embeddings", {["Content-Type"] = "application/json"}, bodies[i])
end
"""


def wrk_texts_per_s(url, texts, concurrency, seconds, tmp):
    """Single-text requests driven by wrk (C, so the client does not compete with the server
    for the two cores the way a Python client does): requests/s, cycling through the texts."""
    bodies = os.path.join(tmp, "bodies.txt")
    with open(bodies, "w") as f:
        f.write("\n".join(json.dumps({"model": "minilm", "input": t}) for t in texts) + "\n")
    lua = os.path.join(tmp, "embed.lua")
    with open(lua, "w") as f:
        f.write(WRK_LUA)
    out = subprocess.run(["wrk", "-t2", f"-c{concurrency}", f"-d{seconds:.0f}s", "-s", lua, url,
                          "--", bodies], check=True, capture_output=True, text=True).stdout
    assert "Non-2xx" not in out and "Socket errors" not in out, out
    return float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))


def latency_ms(url, n=300):
    c = openai.OpenAI(base_url=url + "/v1", api_key="x")
    for _ in range(20):
        c.embeddings.create(model="minilm", input="fn warm()")
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        c.embeddings.create(model="minilm", input=f"fn short_{i}(x: u32) -> u32")
        lat.append((time.perf_counter() - t0) * 1e3)
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 99))


async def stream_tps(url, model, prompt, max_tokens, concurrency, extra):
    c = openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)

    async def one():
        t_first = t_last = None
        n = 0
        usage = None
        s = await c.completions.create(model=model, prompt=prompt, max_tokens=max_tokens,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True},
                                       extra_body=extra)
        async for ch in s:
            if ch.usage:
                usage = ch.usage.completion_tokens
            if ch.choices and ch.choices[0].text:
                now = time.perf_counter()
                t_first = t_first or now
                t_last = now
                n += 1
        toks = usage or n
        return toks, (toks - 1) / (t_last - t_first) if t_last and t_last > t_first else 0.0
    await one()  # warm
    t0 = time.perf_counter()
    rs = await asyncio.gather(*[one() for _ in range(concurrency)])
    wall = time.perf_counter() - t0
    await c.close()
    return dict(tokens=[r[0] for r in rs], per_stream=float(np.mean([r[1] for r in rs])),
                aggregate=sum(r[0] for r in rs) / wall)


def llama_server(path, threads, ctx, parallel):
    import xllamacpp
    p = xllamacpp.CommonParams()
    p.model.path = path
    p.n_ctx = ctx * parallel
    p.n_parallel = parallel
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    s = xllamacpp.Server(p)
    return s, s.listening_address


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--texts", type=int, default=4000)
    ap.add_argument("--gguf", default="q4_0")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    minilm = os.environ.get("KIN_MINILM_DIR", os.path.join(REPO, "models", "all-MiniLM-L6-v2"))
    texts = corpus(args.texts)
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "texts.txt")
    with open(path, "w") as f:
        f.write("\n".join(texts) + "\n")
    res = {"threads": args.threads, "texts": len(texts)}

    srv = Serve(args, f"minilm={minilm}")
    cli, one, batched = [], [], []
    n = len(texts)
    client = "wrk" if shutil.which("wrk") else "openai"
    for r in range(args.repeat):
        cli.append(n / cli_embed_s(minilm, path, args.threads))
        if client == "wrk":
            one.append(wrk_texts_per_s(srv.url, texts, 16, max(10, 1.5 * n / cli[-1]), tmp))
        else:
            one.append(n / asyncio.run(server_embed_s(srv.url, texts, 1, 16)))
        batched.append(n / asyncio.run(server_embed_s(srv.url, texts, 16, 16)))
        print(f"round {r + 1}: embed CLI {cli[-1]:.1f} texts/s, server 1/request "
              f"({client}) {one[-1]:.1f}, 16/request {batched[-1]:.1f}", file=sys.stderr)
    res["embed"] = dict(cli_texts_per_s=max(cli), server_1_texts_per_s=max(one),
                        server_16_texts_per_s=max(batched), client_1=client,
                        ratio_1=max(one) / max(cli), ratio_16=max(batched) / max(cli))
    p50, p99 = latency_ms(srv.url)
    res["latency_ms"] = dict(p50=p50, p99=p99)
    srv.close()

    import importlib.util
    spec = importlib.util.spec_from_file_location("bg", os.path.join(REPO, "scripts",
                                                                       "bench-gguf.py"))
    bg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bg)
    gguf_path = os.path.join(bg.OUT, f"bench-100m.{args.gguf}.gguf")
    if not os.path.exists(gguf_path):
        os.makedirs(bg.OUT, exist_ok=True)
        bg.write_model(gguf_path + ".tmp", args.gguf)
        os.replace(gguf_path + ".tmp", gguf_path)
    prompt = [int(x) for x in np.random.default_rng(7).integers(3, bg.C["vocab"], args.prompt)]
    chat = {}
    for conc in (1, 4):
        best = {"kin": None, "llama.cpp": None}
        for r in range(args.repeat):
            k = Serve(args, f"m={gguf_path}")
            kr = asyncio.run(stream_tps(k.url, "m", prompt, args.max_tokens, conc, None))
            k.close()
            ls, addr = llama_server(gguf_path, args.threads, bg.C["ctx"], 4)
            lr = asyncio.run(stream_tps(f"http://{addr}" if "://" not in addr else addr, "m",
                                        prompt, args.max_tokens, conc, {"ignore_eos": True}))
            del ls
            for name, v in (("kin", kr), ("llama.cpp", lr)):
                if best[name] is None or v["aggregate"] > best[name]["aggregate"]:
                    best[name] = v
            print(f"round {r + 1} concurrency {conc}: kin {kr['aggregate']:.1f} tok/s "
                  f"(tokens {kr['tokens']}), llama.cpp {lr['aggregate']:.1f} tok/s",
                  file=sys.stderr)
        chat[conc] = dict(kin=best["kin"], llama=best["llama.cpp"],
                          ratio=best["kin"]["aggregate"] / best["llama.cpp"]["aggregate"])
    res["stream"] = chat
    if args.json:
        print(json.dumps(res))
        return
    e = res["embed"]
    print(f"threads {args.threads}, best of {args.repeat}, {n} texts (all-MiniLM-L6-v2)")
    print(f"embed CLI {e['cli_texts_per_s']:.0f} texts/s; server at concurrency 16: "
          f"1 text/request ({e['client_1']}) {e['server_1_texts_per_s']:.0f} texts/s "
          f"({e['ratio_1']:.2f}x of CLI), "
          f"16 texts/request {e['server_16_texts_per_s']:.0f} texts/s ({e['ratio_16']:.2f}x)")
    print(f"single short request latency: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    print(f"streamed completion ({args.gguf}, prompt {args.prompt}, {args.max_tokens} tokens):")
    for conc, c in chat.items():
        print(f"  concurrency {conc}: kin {c['kin']['aggregate']:.1f} tok/s "
              f"(per stream {c['kin']['per_stream']:.1f}), llama.cpp "
              f"{c['llama']['aggregate']:.1f} (per stream {c['llama']['per_stream']:.1f}): "
              f"{c['ratio']:.2f}x")


if __name__ == "__main__":
    main()
