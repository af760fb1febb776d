#!/usr/bin/env python3
"""Fuzz/soak the real `kin-infer serve` binary (issue 30): random valid and hostile requests at
concurrency 32 for 60 s against the tiny decoder with a long context (2^18 positions, so any
client could ask for gigabytes of KV cache) under a small --memory-budget.

Asserts: the process lives to the end (and exits 0 on SIGTERM); its peak RSS (VmHWM) stays
under the RSS it had once loaded + the budget + a stated slack; every response is well formed
(its status in the set allowed for its case, every 4xx/5xx a JSON error in OpenAI's shape,
every 200 valid JSON or a well-formed event stream ending in [DONE] or an error event).
Prints one JSON summary line; exits 1 on any violation.

Standard library only: raw sockets, so the harness controls every byte (trickled headers,
stalled bodies, Content-Length lies, Expect: 100-continue, disconnects mid-stream).

    python3 scripts/soak-server.py --binary target/release/kin-infer [--duration 60]
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "server_fixtures")
KEY = "soak-key"
MAX_BODY = 64 << 10
TIMEOUT_S = 2  # --request-timeout
# Slack over loaded RSS + budget: activations and scratch (prefill chunk, decode batch,
# embedding batches), 32 request bodies, thread stacks, allocator fragmentation.
SLACK = 96 << 20


def long_context_model(tmp):
    d = os.path.join(tmp, "chat_long")
    shutil.copytree(os.path.join(FIX, "chat_tiny"), d)
    p = os.path.join(d, "config.json")
    cfg = json.load(open(p))
    cfg["max_position_embeddings"] = 1 << 18
    json.dump(cfg, open(p, "w"))
    return d


def status_kib(pid, key):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Violations:
    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, case, why):
        with self.lock:
            if len(self.items) < 50:
                self.items.append(f"{case}: {why}")
            else:
                self.items.append(None)


def http(port, raw, *, pause=0.0, parts=None, read_limit=8 << 20, stop_after_events=None,
         timeout=30):
    """Sends raw bytes (or `parts` with `pause` between them), reads to EOF. Returns
    (status, headers, body bytes) or (None, None, reason)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            for p in parts or [raw]:
                s.sendall(p)
                if pause:
                    time.sleep(pause)
        except OSError:
            pass  # the server may answer and close before all is sent
        data = b""
        while len(data) < read_limit:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return None, None, "no answer within %ds" % timeout
            except OSError as e:
                if data:
                    break
                return None, None, f"read: {e}"
            if not chunk:
                break
            data += chunk
            if stop_after_events and data.count(b"\n\ndata:") >= stop_after_events:
                return "cut", None, data  # the client goes away mid-stream
    finally:
        s.close()
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return None, None, f"no complete head: {data[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None, None, f"bad status line {lines[0]!r}"
    headers = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        headers[k.strip().lower()] = v.strip()
    if status == 100:
        return 100, headers, body
    if headers.get("transfer-encoding") == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            try:
                n = int(size_line.split(b";")[0], 16)
            except ValueError:
                return None, None, f"bad chunk size {size_line[:40]!r}"
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, headers, body


def request(method, path, body=None, *, auth=True, headers=(), content_length=None):
    h = [f"{method} {path} HTTP/1.1", "Host: soak", "Connection: close"]
    if auth:
        h.append(f"Authorization: Bearer {KEY}")
    h.extend(headers)
    b = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    if body is not None:
        h.append("Content-Type: application/json")
    h.append(f"Content-Length: {len(b) if content_length is None else content_length}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + b


def check_error(case, status, headers, body, v):
    if not headers.get("content-type", "").startswith("application/json"):
        return v.add(case, f"{status} without a JSON content-type: {headers}")
    try:
        e = json.loads(body)["error"]
        assert isinstance(e["message"], str) and e["message"]
        assert isinstance(e["type"], str) and isinstance(e["code"], str)
    except Exception as ex:  # noqa: BLE001 - any malformation is the finding
        v.add(case, f"{status} body not an OpenAI error ({ex}): {body[:200]!r}")


def check_sse(case, body, v):
    events = [e for e in body.decode("utf-8", "replace").split("\n\n") if e.strip()]
    if not events:
        return v.add(case, "empty event stream")
    last = events[-1]
    for i, e in enumerate(events):
        lines = [l for l in e.split("\n") if not l.startswith(":")]  # keep-alive comments
        if not lines:
            continue
        data = "\n".join(l[5:].lstrip() for l in lines if l.startswith("data:"))
        if data == "[DONE]":
            if i != len(events) - 1:
                v.add(case, "[DONE] is not last")
            continue
        try:
            obj = json.loads(data)
        except ValueError:
            return v.add(case, f"event not JSON: {e[:200]!r}")
        if any(l.startswith("event: error") for l in lines):
            if "error" not in obj:
                v.add(case, f"error event without an error body: {data[:200]}")
            if i != len(events) - 1:
                v.add(case, "an error event is not last")
    if "[DONE]" not in last and "event: error" not in last:
        v.add(case, f"stream ends with neither [DONE] nor an error: {last[:200]!r}")


GEN_BUSY = {429, 503}  # queue full; memory budget taken for --request-timeout


def cases(rng):
    """(name, raw request kwargs, allowed statuses, expect stream)."""
    prompt = rng.choice(["hello", "a b c", "the quick brown fox", "x" * rng.randint(1, 300)])
    small = rng.randint(1, 24)
    c = rng.randrange(22)
    if c == 0:
        return "completion", dict(raw=request("POST", "/v1/completions", {"model": "chat", "prompt": prompt, "max_tokens": small, "seed": rng.randrange(1 << 32)})), {200} | GEN_BUSY, False
    if c == 1:
        return "chat_stream", dict(raw=request("POST", "/v1/chat/completions", {"model": "chat", "stream": True, "max_tokens": small, "messages": [{"role": "user", "content": prompt}], "stream_options": {"include_usage": True}})), {200} | GEN_BUSY, True
    if c == 2:
        return "huge_max_tokens", dict(raw=request("POST", "/v1/completions", {"model": "chat", "prompt": prompt, "max_tokens": rng.choice([200_000, 262_000, 4_000_000_000])})), {400}, False
    if c == 3:
        # No max_tokens: the default is the rest of a 262144 context, capped by the budget.
        return "default_max_tokens", dict(raw=request("POST", "/v1/completions", {"model": "chat", "prompt": prompt, "stream": rng.random() < 0.5, "temperature": 0})), {200} | GEN_BUSY, None
    if c == 4:
        return "bad_json", dict(raw=request("POST", rng.choice(["/v1/completions", "/v1/chat/completions", "/v1/embeddings"]), rng.choice([b"{", b"[]", b"null", b"\xff\xfe", b'{"model": "chat", "prompt": "x", "max_tokens": 1}}']))), {400}, False
    if c == 5:
        field, val = rng.choice([("max_tokens", -1), ("max_tokens", 1.5), ("temperature", "hot"), ("temperature", 1e39), ("top_p", -0.5), ("seed", -1), ("n", 3), ("stop", [""]), ("presence_penalty", 1e300), ("prompt", 7)])
        b = {"model": "chat", "prompt": "x", field: val}
        return "wrong_type", dict(raw=request("POST", "/v1/completions", b)), {400}, False
    if c == 6:
        auth = rng.choice([None, "Bearer wrong", "Basic abc", f"bearer {KEY}", f"BEARER   {KEY}", "Bearer"])
        hdr = () if auth is None else (f"Authorization: {auth}",)
        ok = auth is not None and auth.lower().split() == ["bearer", KEY.lower()]
        return "auth", dict(raw=request("GET", "/v1/models", auth=False, headers=hdr)), {200} if ok else {401}, False
    if c == 7:
        return "declared_huge_body", dict(raw=request("POST", "/v1/completions", b"", content_length=rng.choice([10 << 20, 1 << 40]), headers=rng.choice([(), ("Expect: 100-continue",)]))), {413}, False
    if c == 8:
        big = b'{"model": "chat", "prompt": "' + b"a" * (MAX_BODY + 10) + b'"}'
        return "huge_body", dict(raw=request("POST", "/v1/completions", big)), {413}, False
    if c == 9:
        head = request("POST", "/v1/completions", b"", content_length=200)
        return "stalled_body", dict(raw=head + b'{"model": "chat"', timeout=TIMEOUT_S + 10), {408}, False
    if c == 10:
        head = b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nX-Slow: 1"
        return "trickled_head", dict(raw=None, parts=[head[i:i + 4] for i in range(0, len(head), 4)], pause=0.3, timeout=TIMEOUT_S + 10), {408}, False
    if c == 11:
        body = {"model": "chat", "stream": True, "max_tokens": rng.randint(200, 2000), "prompt": prompt}
        return "disconnect_mid_stream", dict(raw=request("POST", "/v1/completions", body), stop_after_events=rng.randint(1, 5)), {200} | GEN_BUSY, True
    if c == 12:
        return "malformed_http", dict(raw=rng.choice([b"NOT HTTP\r\n\r\n", b"GET / HTTP/1.1\r\nNo Colon\r\n\r\n", b"GET /health HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"])), {400, 431}, False
    if c == 13:
        inp = rng.choice(["", [], ["a", ""], "some text", ["a", "b"], [1, 2, 3]])
        ok = inp in ("some text", ["a", "b"], [1, 2, 3])
        return "embeddings", dict(raw=request("POST", "/v1/embeddings", {"model": "embed", "input": inp})), {200} if ok else {400}, False
    if c == 14:
        return "health_metrics", dict(raw=request("GET", rng.choice(["/health", "/metrics", "/v1/models", "/openapi.json"]))), {200}, False
    if c == 15:
        return "not_found", dict(raw=request(rng.choice(["GET", "POST", "DELETE"]), rng.choice(["/nope", "/v1/nope", "/v1/embeddings"]))), {400, 404, 405}, False
    if c == 16:
        n = rng.randint(1000, 20000)
        return "fit_or_400", dict(raw=request("POST", "/v1/completions", {"model": "chat", "prompt": "hi", "max_tokens": n, "stream": True})), {200, 400} | GEN_BUSY, None
    if c == 17:
        chunked = b"POST /v1/completions HTTP/1.1\r\nHost: soak\r\nConnection: close\r\nAuthorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunk = b"a" * 8192
        body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(MAX_BODY // 8192 + 2)) + b"0\r\n\r\n"
        return "chunked_over_limit", dict(raw=chunked + body), {413}, False
    if c == 18:
        return "chat_tokens", dict(raw=request("POST", "/v1/completions", {"model": "chat", "prompt": [rng.randrange(200) for _ in range(rng.randint(0, 20))], "max_tokens": small})), {200, 400} | GEN_BUSY, False
    if c == 19:
        return "unknown_model", dict(raw=request("POST", "/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]})), {404}, False
    if c == 20:
        return "no_auth_big_body", dict(raw=request("POST", "/v1/completions", b"x" * 1000, auth=False)), {401}, False
    return "chat", dict(raw=request("POST", "/v1/chat/completions", {"model": "chat", "max_tokens": small, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]})), {200} | GEN_BUSY, False


def worker(port, deadline, seed, stats, v):
    rng = random.Random(seed)
    while time.time() < deadline:
        name, kw, allowed, stream = cases(rng)
        status, headers, body = http(port, **kw)
        with stats["lock"]:
            stats["requests"] += 1
            stats["statuses"][str(status)] += 1
            stats["cases"][name] += 1
        if status == "cut":
            continue
        if status is None:
            v.add(name, body)
            continue
        if status not in allowed:
            v.add(name, f"status {status} not in {sorted(allowed)}: {body[:300]!r}")
            continue
        if status >= 400:
            check_error(name, status, headers, body, v)
        elif "text/event-stream" in headers.get("content-type", ""):
            if stream is False:
                v.add(name, "an event stream where JSON was asked")
            check_sse(name, body, v)
        elif status == 200:
            if stream is True:
                v.add(name, "JSON where a stream was asked")
            if name == "health_metrics" and b"# TYPE" in body:
                continue
            try:
                json.loads(body)
            except ValueError:
                v.add(name, f"200 body not JSON: {body[:200]!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "kin-infer"))
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--budget", default="8M", help="--memory-budget of the server")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    budget = int(float(a.budget[:-1]) * {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[a.budget[-1].upper()])
    tmp = tempfile.mkdtemp(prefix="kin-soak-")
    v = Violations()
    try:
        chat = long_context_model(tmp)
        cmd = [a.binary, "serve", "--model", f"chat={chat}", "--model", f"embed={FIX}/embed_tiny",
               "--port", "0", "--memory-budget", a.budget, "--request-timeout", str(TIMEOUT_S),
               "--max-body", str(MAX_BODY), "--api-key", KEY, "--threads", "1",
               "--shutdown-timeout", "3"]
        err = open(os.path.join(tmp, "stderr.log"), "w+")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        line = proc.stdout.readline()
        ready = json.loads(line)
        port = int(ready["url"].rsplit(":", 1)[1])
        assert ready["memory_budget_bytes"] == budget, ready
        loaded = status_kib(proc.pid, "VmRSS:") or 0
        limit = loaded + budget + SLACK
        peak = [0]
        died = []

        def monitor():
            while not stop.is_set():
                if proc.poll() is not None:
                    died.append(proc.returncode)
                    return
                peak[0] = max(peak[0], status_kib(proc.pid, "VmHWM:") or 0)
                time.sleep(0.1)

        stop = threading.Event()
        mon = threading.Thread(target=monitor, daemon=True)
        mon.start()
        stats = {"lock": threading.Lock(), "requests": 0, "statuses": Counter(), "cases": Counter()}
        t0 = time.time()
        deadline = t0 + a.duration
        threads = [threading.Thread(target=worker, args=(port, deadline, a.seed * 1000 + i, stats, v))
                   for i in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        stop.set()
        mon.join()
        peak[0] = max(peak[0], status_kib(proc.pid, "VmHWM:") or 0)
        if died:
            v.add("process", f"exited with {died[0]} during the run")
        else:
            s, _, body = http(port, request("GET", "/health"))
            if s != 200:
                v.add("process", f"/health after the run: {s} {body[:200]!r}")
            # Every reservation is given back once the last generations have stopped.
            for _ in range(100):
                s, _, body = http(port, request("GET", "/metrics"))
                if s == 200 and b"kin_infer_memory_reserved_bytes 0\n" in body:
                    break
                time.sleep(0.1)
            else:
                v.add("budget", "reservations still held 10 s after the run")
        if peak[0] > limit:
            v.add("memory", f"peak RSS {peak[0]} over loaded {loaded} + budget {budget} + slack {SLACK}")
        code = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "killed after 15 s"
        else:
            code = proc.returncode
        if code != 0:
            v.add("process", f"exit code after SIGTERM: {code}")
        err.seek(0)
        for l in err:
            if "panicked" in l or "memory allocation" in l:
                v.add("stderr", l.strip()[:200])
        real = [x for x in v.items if x]
        summary = {
            "requests": stats["requests"], "seconds": round(elapsed, 1),
            "concurrency": a.concurrency, "statuses": dict(sorted(stats["statuses"].items())),
            "cases": dict(sorted(stats["cases"].items())),
            "budget_bytes": budget, "loaded_rss_bytes": loaded, "peak_rss_bytes": peak[0],
            "rss_limit_bytes": limit, "exit_code": code,
            "violations": len(v.items), "first_violations": real[:10],
        }
        print(json.dumps(summary))
        return 1 if v.items else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
