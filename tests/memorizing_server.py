"""A loopback OpenAI-compatible server that has memorized some texts, for the recall probe.

Given a prefix of a memorized text (the longest such text, if several), it answers that text's
exact continuation (its indentation written with tabs, and a line more after it: a model goes
on). Given a prefix of a text it knows but did not memorize (the shortest such), it answers a
near miss: the continuation with the word three quarters of the way through changed. Anything
else gets a generic line. It answers text completions (`prompt`) and chat completions (the
user message after heldout's instruction; the reply fenced, and for every other request the
shown text repeated first, as chat models do). Each request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GENERIC = "\n    pass  # nothing memorized here\n"


def near_miss(continuation: str) -> str:
    words = continuation.split(" ")
    at = max((len(words) * 3) // 4, 0)
    words[at] = words[at] + "_x"
    return " ".join(words)


@dataclass
class MemorizingServer:
    known: list[str]
    memorized: list[str]
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def continue_text(self, prefix: str) -> str:
        recalled = [text for text in self.memorized if text.startswith(prefix)]
        if recalled:
            rest = max(recalled, key=len)[len(prefix):]
            return rest.replace("    ", "\t") + "\n# and more after it\n"
        seen = [text for text in self.known if text.startswith(prefix) and text != prefix]
        if seen:
            return near_miss(min(seen, key=len)[len(prefix):])
        return GENERIC

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        if "messages" not in body:
            return {"choices": [{"text": self.continue_text(body["prompt"]),
                                 "finish_reason": "stop"}]}
        shown = body["messages"][-1]["content"].split("\n\n", 1)[1]
        reply = self.continue_text(shown)
        if len(self.requests) % 2:
            reply = shown + reply
        return {"choices": [{"message": {"role": "assistant", "content": f"```\n{reply}\n```"},
                             "finish_reason": "stop"}]}

    def start(self) -> MemorizingServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = json.dumps(fake.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
