#!/usr/bin/env python3
"""`tandem-rt serve` driven by the official `openai` Python SDK (from PyPI into .venv by
scripts/setup): what an application written against OpenAI's API sees when pointed at Tandem.

    openai_sdk_check.py --tandem-rt PATH --model DIR --work DIR

Starts the server on a loopback port it picks itself, with an API key, and checks through
the SDK's own types: the model list; chat and text completions, plain and streamed (the
streamed text equals the plain one at temperature 0, the usage chunk equals the plain usage);
seeded sampling repeats; a JSON-schema response format; and that errors reach the SDK as its
typed exceptions (wrong key, unknown model, invalid parameters, also on a streamed request).
The server is stopped whatever happens. Exit 0 when every check holds, 1 otherwise."""
import argparse
import json
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

try:
    import openai
except ImportError:
    sys.exit("openai_sdk_check: the `openai` package is missing: scripts/setup installs it into .venv")

API_KEY = "sdk-check-key-4f1c"
CHAT = [{"role": "user", "content": "Give me a JSON object for Paris with the keys \"name\" and \"country\"."}]


class Server:
    """tandem-rt serve on 127.0.0.1 with a free port; stopped (and reaped) on exit."""

    def __init__(self, tandem_rt, model, work):
        key_file = work / "api-key"
        key_file.write_text(API_KEY + "\n")
        self.log = open(work / "serve.log", "w")
        self.process = subprocess.Popen(
            [tandem_rt, "serve", "--model", str(model), "--listen", "127.0.0.1:0", "--api-key-file", str(key_file)],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.address = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            if "listening on" in line:
                self.address = line.split("listening on", 1)[1].strip()
            if "ready" in line and self.address:
                # Keep reading stdout so the server never blocks on a full pipe.
                threading.Thread(target=self.process.stdout.read, daemon=True).start()
                return
        self.stop()
        sys.exit(f"openai_sdk_check: tandem-rt serve did not become ready within 120 s (log: {work / 'serve.log'})")

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def run(self, name, fn):
        try:
            fn()
            self.passed += 1
            print(f"ok   {name}")
        except Exception as e:  # every failure is reported, the remaining checks still run
            self.failed.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=3, file=sys.stdout)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_error(exception_type, status, fn, mentions=None):
    try:
        fn()
    except exception_type as e:
        expect(e.status_code == status, f"{exception_type.__name__} with status {e.status_code}, wanted {status}")
        expect(isinstance(e.body, dict) and isinstance(e.body.get("message"), str) and e.body["message"],
               f"the error body carries no message: {e.body!r}")
        if mentions is not None:
            expect(mentions in e.message, f"the message {e.message!r} does not mention {mentions!r}")
        return
    raise AssertionError(f"no {exception_type.__name__} was raised")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem-rt", required=True)
    ap.add_argument("--model", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    server = Server(args.tandem_rt, args.model, args.work)
    try:
        client = openai.OpenAI(base_url=server.address + "/v1", api_key=API_KEY, max_retries=0, timeout=120)
        checks = Checks()
        state = {}

        def models():
            listed = client.models.list().data
            expect(len(listed) == 1 and listed[0].object == "model", f"one model listed, got {listed!r}")
            state["model"] = listed[0].id

        def chat():
            r = client.chat.completions.create(model=state["model"], messages=CHAT, max_tokens=24, temperature=0)
            expect(r.object == "chat.completion" and r.id and r.created > 0 and r.model == state["model"], f"header fields: {r!r}")
            expect(len(r.choices) == 1 and r.choices[0].index == 0, "one choice")
            choice = r.choices[0]
            expect(choice.message.role == "assistant" and isinstance(choice.message.content, str) and choice.message.content,
                   f"an assistant message with text: {choice.message!r}")
            expect(choice.finish_reason in ("stop", "length"), f"finish_reason {choice.finish_reason!r}")
            u = r.usage
            expect(u.prompt_tokens > 0 and 1 <= u.completion_tokens <= 24 and u.total_tokens == u.prompt_tokens + u.completion_tokens,
                   f"usage {u!r}")
            state["chat"] = r

        def chat_stream():
            stream = client.chat.completions.create(model=state["model"], messages=CHAT, max_tokens=24, temperature=0,
                                                    stream=True, stream_options={"include_usage": True})
            text, finishes, usage, ids = "", [], None, set()
            for chunk in stream:
                expect(chunk.object == "chat.completion.chunk", f"chunk object {chunk.object!r}")
                ids.add(chunk.id)
                if chunk.usage is not None:
                    expect(not chunk.choices, "the usage chunk carries no choices")
                    usage = chunk.usage
                for c in chunk.choices:
                    text += c.delta.content or ""
                    if c.finish_reason is not None:
                        finishes.append(c.finish_reason)
            plain = state["chat"]
            expect(len(ids) == 1, f"every chunk has the same id, got {ids}")
            expect(text == plain.choices[0].message.content, f"streamed {text!r} != plain {plain.choices[0].message.content!r}")
            expect(finishes == [plain.choices[0].finish_reason], f"finish reasons {finishes}")
            expect(usage is not None and usage.completion_tokens == plain.usage.completion_tokens
                   and usage.prompt_tokens == plain.usage.prompt_tokens, f"stream usage {usage!r} vs {plain.usage!r}")

        def completion():
            r = client.completions.create(model=state["model"], prompt="Once upon a time", max_tokens=12, temperature=0)
            expect(r.object == "text_completion" and len(r.choices) == 1, f"{r!r}")
            expect(isinstance(r.choices[0].text, str) and r.choices[0].finish_reason in ("stop", "length"), f"{r.choices[0]!r}")
            expect(1 <= r.usage.completion_tokens <= 12, f"usage {r.usage!r}")
            streamed = "".join(c.choices[0].text for c in client.completions.create(
                model=state["model"], prompt="Once upon a time", max_tokens=12, temperature=0, stream=True) if c.choices)
            expect(streamed == r.choices[0].text, f"streamed {streamed!r} != plain {r.choices[0].text!r}")

        def seeded():
            def draw():
                return client.chat.completions.create(model=state["model"], messages=CHAT, max_tokens=16, temperature=0.9,
                                                      top_p=0.95, seed=1234).choices[0].message.content
            first, second = draw(), draw()
            expect(first == second, f"the same seed gave {first!r} and {second!r}")

        def json_schema():
            schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                                       "country": {"type": "string", "maxLength": 20}},
                      "required": ["name", "country"], "additionalProperties": False}
            r = client.chat.completions.create(model=state["model"], messages=CHAT, max_tokens=96, temperature=0,
                                               response_format={"type": "json_schema",
                                                                "json_schema": {"name": "city", "schema": schema}})
            expect(r.choices[0].finish_reason == "stop", f"finish_reason {r.choices[0].finish_reason!r}")
            value = json.loads(r.choices[0].message.content)
            expect(set(value) == {"name", "country"} and all(isinstance(v, str) for v in value.values()), f"{value!r}")

        def errors():
            wrong_key = openai.OpenAI(base_url=server.address + "/v1", api_key="not-the-key", max_retries=0, timeout=30)
            expect_error(openai.AuthenticationError, 401, lambda: wrong_key.models.list())
            expect_error(openai.NotFoundError, 404, lambda: client.chat.completions.create(
                model="no-such-model", messages=CHAT, max_tokens=4), mentions="no-such-model")
            expect_error(openai.BadRequestError, 400, lambda: client.chat.completions.create(
                model=state["model"], messages=CHAT, max_tokens=4, n=2), mentions="n")
            expect_error(openai.BadRequestError, 400, lambda: client.chat.completions.create(
                model=state["model"], messages=CHAT, max_tokens=-1))
            expect_error(openai.BadRequestError, 400, lambda: client.chat.completions.create(
                model=state["model"], messages=[], max_tokens=4))
            expect_error(openai.BadRequestError, 400, lambda: client.completions.create(
                model=state["model"], prompt="x", max_tokens=4, temperature=-1, stream=True))

        for name, fn in [("models.list", models), ("chat.completions", chat), ("chat.completions stream", chat_stream),
                         ("completions, plain and stream", completion), ("seeded sampling", seeded),
                         ("response_format json_schema", json_schema), ("errors as typed exceptions", errors)]:
            checks.run(name, fn)
            if name == "models.list" and checks.failed:
                break  # without the served model's id nothing else can be asked
        print(f"openai_sdk_check: openai {openai.__version__}: {checks.passed} checks hold, {len(checks.failed)} fail")
        return 0 if not checks.failed else 1
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
