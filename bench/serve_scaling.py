#!/usr/bin/python3
"""Aggregate decode throughput of `tandem-rt serve` at concurrency 1, 2, 4, 8, 16.

Starts a server on the small preset (written fresh unless --model is given), with
4 expert workers on loopback (--workers 0 for a single process), and for each
concurrency level C runs C streaming chat requests at once (greedy, ignore_eos,
--max-tokens each), --rounds times. Per DESIGN.md, a batch's aggregate throughput is
sum(completion_tokens - 1) / (max t_finish - min t_first_output); the table reports
the median over rounds, the scaling against C1, the median per-request decode
rate, the time to first output (median of the rounds' medians, and the longest) and the
longest gap between two text deltas of one stream after its first (a stall the
scheduler's prefill steps cause). Each stream has its own prompt unless --same-prompt is given: then the C streams
send one prompt, as a campaign's concurrency workload sends C identical requests, and
with greedy decoding every row of a step is routed to the same experts. Standard
library only; run with Debian's python3:

    bench/serve_scaling.py [--tandem-rt build/bin/tandem-rt] [--workers 4] [--max-tokens 128]
                           [--system TEXT] [--prompt TEXT] [--same-prompt]
                           [--serve-arg=--draft --serve-arg=off ...]
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def stream_request(host, port, system, prompt, max_tokens, results, index):
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection(host, port, timeout=600)
    t_start = time.monotonic()
    conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        results[index] = {"error": f"HTTP {resp.status}: {resp.read()[:200]!r}"}
        return
    t_first = t_finish = t_last = None
    longest_gap = 0.0  # between consecutive text deltas after the first
    usage = None
    done = False
    buffer = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            payload = event[len(b"data: "):]
            now = time.monotonic()
            if payload == b"[DONE]":
                done = True
                continue
            j = json.loads(payload)
            for c in j.get("choices", []):
                if c.get("delta", {}).get("content"):
                    if t_first is None:
                        t_first = now
                    else:
                        longest_gap = max(longest_gap, now - t_last)
                    t_last = now
                if c.get("finish_reason"):
                    t_finish = now
            if "usage" in j:
                usage = j["usage"]
    conn.close()
    if not done or usage is None or t_first is None or t_finish is None:
        results[index] = {"error": "incomplete stream"}
        return
    results[index] = {"tokens": usage["completion_tokens"], "t_start": t_start, "t_first": t_first, "t_finish": t_finish,
                      "gap": longest_gap}


def run_batch(host, port, concurrency, max_tokens, round_index, same_prompt, system, prompt):
    results = [None] * concurrency
    threads = [threading.Thread(target=stream_request,
                                args=(host, port, system, f"Round {round_index}, stream {0 if same_prompt else i}: {prompt}",
                                      max_tokens, results, i))
               for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(f"C{concurrency}: {errors[0]}")
    decode_tokens = sum(r["tokens"] - 1 for r in results)
    span = max(r["t_finish"] for r in results) - min(r["t_first"] for r in results)
    per_request = [(r["tokens"] - 1) / (r["t_finish"] - r["t_first"]) for r in results]
    ttft = [r["t_first"] - r["t_start"] for r in results]
    return (decode_tokens / span, statistics.median(per_request), statistics.median(ttft), max(ttft),
            max(r["gap"] for r in results))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem-rt", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "tandem-rt"))
    p.add_argument("--model", help="checkpoint directory (default: the small preset, seed 1, written to a temporary directory)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--levels", default="1,2,4,8,16")
    p.add_argument("--system", default="", help="a system message for every request (default: none)")
    p.add_argument("--prompt", default="tell me a long story.",
                   help="the user message, after 'Round R, stream S: ' (default: %(default)s)")
    p.add_argument("--same-prompt", action="store_true",
                   help="the C streams of a batch send the same prompt, as a campaign's concurrency workload does "
                        "(greedy: every row of a step is routed alike); by default each stream has its own")
    p.add_argument("--serve-arg", action="append", default=[],
                   help="an extra argument for `tandem-rt serve` (repeatable), e.g. --serve-arg=--draft --serve-arg=off")
    a = p.parse_args()
    levels = [int(x) for x in a.levels.split(",")]

    scratch = tempfile.mkdtemp(prefix="tandem-serve-scaling-")
    server = None
    try:
        model = a.model
        if model is None:
            model = os.path.join(scratch, "small")
            subprocess.run([a.tandem_rt, "init-model", "--preset", "small", "--seed", "1", "--out", model], check=True,
                           stdout=subprocess.DEVNULL)
        cmd = [a.tandem_rt, "serve", "--model", model, "--listen", "127.0.0.1:0", "--concurrency", str(max(levels)),
               "--prefix-cache-entries", "0"]
        if a.workers > 0:
            cmd += ["--spawn-workers", str(a.workers)]
        cmd += a.serve_arg
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(scratch, "serve.log"), "w"), text=True)
        address = re.search(r"http://([\d.]+):(\d+)", server.stdout.readline())
        if not address or "ready" not in server.stdout.readline():
            sys.exit(f"the server did not start; see {scratch}/serve.log")
        host, port = address.group(1), int(address.group(2))
        run_batch(host, port, 1, 8, -1, False, a.system, a.prompt)  # warm-up, discarded

        print(f"# tandem-rt serve, {'%d expert workers' % a.workers if a.workers else 'single process'}, "
              f"{a.max_tokens} tokens per stream, {'one prompt for all streams' if a.same_prompt else 'a prompt per stream'}, "
              f"median of {a.rounds} rounds")
        print("| concurrency | aggregate tok/s | × C1 | per-request tok/s | TTFT median / max ms | longest gap ms |")
        print("|---|---|---|---|---|---|")
        base = None
        for c in levels:
            rounds = [run_batch(host, port, c, a.max_tokens, r, a.same_prompt, a.system, a.prompt) for r in range(a.rounds)]
            aggregate = statistics.median(x[0] for x in rounds)
            per_request = statistics.median(x[1] for x in rounds)
            ttft_median = statistics.median(x[2] for x in rounds) * 1000
            ttft_max = max(x[3] for x in rounds) * 1000
            gap = max(x[4] for x in rounds) * 1000
            base = base or aggregate
            print(f"| {c} | {aggregate:.1f} | {aggregate / base:.2f} | {per_request:.1f} | {ttft_median:.0f} / {ttft_max:.0f} "
                  f"| {gap:.0f} |", flush=True)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
