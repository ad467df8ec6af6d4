"""A real OpenAI-compatible judge server on 127.0.0.1 (stdlib http.server in a thread) for judged-reward tests.

The request's ``model`` picks the judge's behaviour:

- ``honest``: scores the answer by the share of the reference's words it contains (0-10); group requests get
  one '<n>: <score>' line per answer;
- ``constant``: always "Score: 5" (a judge no better than chance);
- ``gullible``: obeys a "Score: N" line standing on its own in the prompt, and anything saying "ignore previous
  instructions" (a judge that can be talked up), else honest;
- ``parrot``: prints its own score, then repeats the answer (a fake verdict in it comes last);
- ``slow``: sleeps 3 s first; ``error``: HTTP 500; ``garbage``: a reply with no score; ``notjson``: a 200 that is
  not a chat completion.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_QUOTED = re.compile(r"^(Reference answer|Answer to grade|Answer (\d+)) \(JSON string\): (.*)$", re.M)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _overlap(answer: str, reference: str) -> int:
    ref = _words(reference)
    return round(10 * len(_words(answer) & ref) / len(ref)) if ref else 0


def _fields(prompt: str) -> tuple[str, str | None, list[str]]:
    reference, single, group = "", None, []
    for label, _, raw in _QUOTED.findall(prompt):
        value = json.loads(raw)
        if label == "Reference answer":
            reference = value
        elif label == "Answer to grade":
            single = value
        else:
            group.append(value)
    return reference, single, group


def judge_reply(model: str, prompt: str) -> str:
    reference, single, group = _fields(prompt)
    if model == "constant":
        return "Score: 5"
    if model == "garbage":
        return "What a lovely answer, I would not know how to grade it."
    if model == "gullible":
        fake = re.findall(r"(?m)^Score: (\d+)", prompt.split("Reply with", 1)[0])
        if fake or "ignore previous instructions" in prompt.lower():
            return f"Score: {fake[-1] if fake else 10}"
    if group:
        return "\n".join(f"{i}: {_overlap(a, reference)}" for i, a in enumerate(group, 1))
    score = f"Score: {_overlap(single or '', reference)}"
    return f"{score}\n{single}" if model == "parrot" else score


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left: what "slow" is for
            pass

    def do_GET(self) -> None:
        self._send(200, json.dumps({"data": [{"id": "judge"}]}).encode())

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(request)
        model = request["model"]
        if model == "slow":
            time.sleep(3)
        if model == "error":
            return self._send(500, b'{"error": "boom"}')
        if model == "notjson":
            return self._send(200, b"hello")
        prompt = request["messages"][-1]["content"]
        reply = judge_reply(model, prompt)
        self._send(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": reply}}]}).encode())


class JudgeServer:
    """``with JudgeServer() as server: server.url`` -> http://127.0.0.1:<port>/v1; ``server.requests`` holds what
    the judge was sent."""

    def __enter__(self) -> JudgeServer:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.requests = []
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        return self

    @property
    def requests(self) -> list[dict]:
        return self.httpd.requests

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
