#!/usr/bin/env python3
"""The serving path on the GPU: `tandem-rt serve --device cuda` and `--device cpu` on the
same checkpoint answer the same concurrent requests (greedy and seeded sampled, with the
default drafter and with drafts off, repeated prompts for prefix reuse) with the same text.

    serve_smoke.py --tandem-rt PATH --model DIR

Standard library only. Exit 0 when every answer matches, 1 otherwise."""
import argparse, json, subprocess, sys, threading, time, urllib.request

PROMPTS = ["Tell me about the sea.", "Count to ten.", "What is a tandem bicycle?", "Write a haiku about rain.",
           "Tell me about the sea.", "Name three colours.", "Count to ten.", "Why is the sky blue?"]


def start(tandem_rt, model, device, draft):
    p = subprocess.Popen([tandem_rt, "serve", "--model", model, "--listen", "127.0.0.1:0", "--device", device,
                          "--draft", draft, "--concurrency", "8"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = None
    deadline = time.time() + 120
    while time.time() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        if "listening on" in line:
            address = line.split("listening on", 1)[1].strip()
        if "ready" in line and address:
            return p, address
    p.kill()
    raise RuntimeError(f"serve --device {device} --draft {draft} did not become ready")


def ask(address, body):
    req = urllib.request.Request(address + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["message"]["content"]


def run_all(address):
    bodies = []
    for i, prompt in enumerate(PROMPTS):
        body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 32, "temperature": 0}
        if i % 3 == 2:
            body.update({"temperature": 0.8, "top_p": 0.9, "seed": 100 + i})
        bodies.append(body)
    answers = [None] * len(bodies)

    def one(i):
        answers[i] = ask(address, bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Once more, one by one: the repeated prompts now reuse cached prefixes.
    again = [ask(address, b) for b in bodies]
    return answers + again


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--devices", default="cpu,cuda", help="the two devices compared (cpu,cpu checks the script itself)")
    a = ap.parse_args()
    first, second = a.devices.split(",")
    failed = 0
    for draft in ["off", "replica"]:
        results = {}
        for device in [first, second] if first != second else [first]:
            p, address = start(a.tandem_rt, a.model, device, draft)
            try:
                results[device] = run_all(address)
            finally:
                p.terminate()
                p.wait(timeout=60)
        if first == second:
            p, address = start(a.tandem_rt, a.model, second, draft)
            try:
                results[second + "'"] = run_all(address)
            finally:
                p.terminate()
                p.wait(timeout=60)
        x_all, y_all = list(results.values())
        same = sum(x == y for x, y in zip(x_all, y_all))
        total = len(x_all)
        print(f"draft {draft}: {same} of {total} answers identical on {first} and {second}")
        for i, (x, y) in enumerate(zip(x_all, y_all)):
            if x != y:
                print(f"  request {i}: {first} {x!r}\n  request {i}: {second} {y!r}")
        failed += total - same
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
