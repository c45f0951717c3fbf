"""A loopback OpenAI-compatible server with the manners of a real one, for tests and benchmarks.

It answers chat completions (and text completions) after a latency drawn from a log-normal
distribution, refuses with 429 (and a Retry-After, if set) every request beyond `capacity` in
flight, answers 503 to a share of requests, and can stall chosen requests forever. With `tools`
in the request it answers with a tool call: `run_public_tests` until the conversation has
`turns - 1` assistant turns, then `submit`, so an episode takes `turns` model calls. The code it
sends is `answer(body)`: by default a function body that depends on the request's seed.

One asyncio loop of its own, on a thread (`LatencyServer.start`) or as a process
(`python -m tests.latency_server --latency-s 3`, which prints its URL; GET /stats says what
it saw), raw HTTP/1.1 with keep-alive: nothing beyond loopback, no framework.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def seeded_answer(body: dict[str, Any]) -> str:
    """`return a + b` for an even seed, a wrong body for an odd one."""
    return "    return a + b\n" if int(body.get("seed") or 0) % 2 == 0 else "    return a - b\n"


@dataclass
class LatencyServer:
    latency_s: float = 0.05  # the median
    spread: float = 0.0  # sigma of the log-normal around the median
    capacity: int | None = None  # requests served at once; beyond: 429
    retry_after_s: int | None = None
    unavailable: float = 0.0  # share of requests answered 503
    turns: int = 1
    answer: Callable[[dict[str, Any]], str] = seeded_answer
    stalls: Callable[[dict[str, Any]], bool] = lambda body: False
    refuse: bool = False  # answer every request as a content filter would: nothing to judge
    seed: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    served: int = 0
    refused: int = 0
    unavailable_sent: int = 0
    seeds: list[int] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # of every request, in arrival order
    arrivals: list[float] = field(default_factory=list)  # time.monotonic(), the same order
    busy_s: float = 0.0
    url: str = ""

    def start(self) -> LatencyServer:
        """Serve on a thread of its own; `url` is set when it listens."""
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _shutdown(self) -> None:
        self._server.close()
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(self.listen())
        ready.set()
        self._loop.run_forever()

    async def listen(self, port: int = 0) -> asyncio.Server:
        self._random = random.Random(self.seed)
        server = await asyncio.start_server(self._connection, "127.0.0.1", port, backlog=4096)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        return server

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                if head.startswith(b"GET /stats"):
                    status, headers, reply = 200, [], self.snapshot()
                else:
                    status, headers, reply = await self._respond(body)
                data = json.dumps(reply).encode()
                lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(data)}",
                         "Content-Type: application/json", *headers]
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError,
                asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def snapshot(self) -> dict[str, Any]:
        """What the server saw (GET /stats): for a benchmark in another process."""
        return {"served": self.served, "refused": self.refused, "max_in_flight":
                self.max_in_flight, "busy_s": self.busy_s, "unavailable": self.unavailable_sent,
                "statuses": self.statuses}

    async def _respond(self, body: dict[str, Any]) -> tuple[int, list[str], dict[str, Any]]:
        index = len(self.statuses)
        self.statuses.append(0)
        self.arrivals.append(time.monotonic())
        status, headers, reply = await self._answer(body)
        self.statuses[index] = status
        return status, headers, reply

    async def _answer(self, body: dict[str, Any]) -> tuple[int, list[str], dict[str, Any]]:
        if self.capacity is not None and self.in_flight >= self.capacity:
            self.refused += 1
            retry = [f"Retry-After: {self.retry_after_s}"] if self.retry_after_s else []
            return 429, retry, {"error": {"message": "too many requests in flight"}}
        if self._random.random() < self.unavailable:
            self.unavailable_sent += 1
            return 503, [], {"error": {"message": "overloaded"}}
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        began = time.monotonic()
        try:
            if self.stalls(body):
                await asyncio.Event().wait()  # forever: the client's deadline must end it
            await asyncio.sleep(self.latency_s * self._random.lognormvariate(0.0, self.spread))
            self.served += 1
            self.seeds.append(int(body.get("seed") or 0))
            return 200, [], self._completion(body)
        finally:
            self.in_flight -= 1
            self.busy_s += time.monotonic() - began  # summed: the time-average in flight

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        code = self.answer(body)
        usage = {"prompt_tokens": 20, "completion_tokens": 10}
        if self.refuse:
            return {"choices": [{"message": {"role": "assistant", "content": ""},
                                 "finish_reason": "content_filter"}], "usage": usage}
        if "messages" not in body:
            return {"choices": [{"text": f"```python\n{code}```", "finish_reason": "stop"}],
                    "usage": usage}
        message: dict[str, Any] = {"role": "assistant", "content": f"```python\n{code}```"}
        if body.get("tools"):
            done = sum(1 for m in body["messages"] if m.get("role") == "assistant")
            tool = "submit" if done + 1 >= self.turns else "run_public_tests"
            message = {"role": "assistant", "content": "", "tool_calls": [{
                "id": f"call_{done}", "type": "function",
                "function": {"name": tool, "arguments": json.dumps({"code": code})}}]}
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-s", type=float, default=0.5)
    parser.add_argument("--spread", type=float, default=0.0)
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("--retry-after-s", type=int, default=None)
    parser.add_argument("--unavailable", type=float, default=0.0)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--refuse", action="store_true", help="answer as a content filter")
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    server = LatencyServer(options.latency_s, options.spread, options.capacity,
                           options.retry_after_s, options.unavailable, options.turns,
                           refuse=options.refuse)

    async def serve() -> None:
        listening = await server.listen(options.port)
        print(server.url, flush=True)
        await listening.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
