"""The wire to an OpenAI-compatible server: one shared client, an adaptive limit, retries,
deadlines, usage.

One `Transport` per agent holds one aiohttp client session, opened on the process's event
loop (heldout.aio) where every request of every episode is awaited (aiohttp, not httpx: at 256
connections httpx's pool spent 18 ms of CPU a request here, aiohttp 0.3 ms); the requests in
flight to one endpoint are held under its adaptive limit (heldout.agents.endpoint_limit).
What a busy server does (429, 5xx, dropped connections, timeouts) is retried with backoff and
tells the limit to back off; anything else it answers is an AgentError that quotes the answer,
because the rollout records that message as the episode's error.

A request has a total deadline, not a timeout per read: `request_timeout_s` from the moment it
has a slot, and the caller's (what is left of the episode's wall time) if that comes first. The
whole exchange, connecting, sending, headers and body, runs under it (asyncio.timeout), so a
server that trickles one byte at a time cannot hold a request past it. The caller's deadline
does not count the time the request waits for a slot or for the endpoint's Retry-After: that is
heldout's queue, and the episode's wall budget leaves it out too (heldout.aio.queued). A retry
never sleeps past the caller's deadline.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp

from heldout.agents.endpoint_limit import Ticket, endpoint_limit
from heldout.agents.openai_settings import OpenAISettings
from heldout.aio import run_blocking
from heldout.errors import AgentError

MAX_TOKENS_COUNTED = 10**9  # a usage count above this is a server's bug, not a count
MAX_COST_USD = 10**6
# An answer larger than this is refused as it streams in, unparsed. A reply of max_tokens at any
# realistic ceiling (128k tokens, every character JSON-escaped) is a few MiB; parsing the worst
# valid JSON of this size (8 MiB of `{},`) takes about 200 MiB (benchmarks/bench_input_memory.py),
# where 64 MiB of it took 1.5 GB.
MAX_ANSWER_BYTES = 8 << 20
_HINTS = {
    401: "check api_key_env and the key it holds",
    403: "check api_key_env and the key it holds",
    404: "check base_url (it ends at the API version, e.g. http://localhost:8000/v1) and model",
}


class _Transient(Exception):
    """A failure worth another attempt; `retry_after` is the wait the server asked for."""

    def __init__(self, answer: str, retry_after: float | None = None):
        super().__init__(answer)
        self.retry_after = retry_after


class _DeadlinePassed(Exception):
    """The caller's deadline came before an answer."""


@dataclass(frozen=True)
class _Answer:
    status: int
    headers: Mapping[str, str]
    data: bytes | bytearray

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class _Deadline:
    """The caller's deadline: `seconds` from now, pushed back by every wait in heldout's queue."""

    def __init__(self, seconds: float):
        self.at = time.monotonic() + max(seconds, 0.0) if math.isfinite(seconds) else math.inf

    def extend(self, seconds: float) -> None:
        self.at += seconds

    def left(self) -> float:
        return self.at - time.monotonic()


Sleep = Callable[[float], Awaitable[None] | None]


class Transport:
    """POSTs JSON to the settings' endpoint and returns the JSON it answered."""

    def __init__(self, settings: OpenAISettings, sleep: Sleep = asyncio.sleep):
        self._settings = settings
        self._sleep = sleep
        path = "chat/completions" if settings.endpoint == "chat" else "completions"
        self.url = f"{settings.base_url}/{path}"
        self._headers = {}
        if settings.api_key_env:
            self._headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
        self.limit = endpoint_limit(settings.base_url, settings.max_in_flight)
        self._client: aiohttp.ClientSession | None = None
        # A private generator: jitter drawn from the global one would shift the random numbers
        # of anything else in the process that seeded it.
        self._jitter = random.Random()

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            run_blocking(client.close(), timeout_s=10)

    def post_blocking(self, body: dict[str, Any], deadline_s: float = math.inf) -> Any:
        """`post`, from a thread that is not the event loop's."""
        return run_blocking(self.post(body, deadline_s))

    async def post(self, body: dict[str, Any], deadline_s: float = math.inf) -> Any:
        """The JSON answer to `body`, retried while the server is busy; the whole of it,
        retries and their backoff included, ends within `deadline_s` seconds of heldout's
        own (queue time left out)."""
        deadline = _Deadline(deadline_s)
        attempts = self._settings.max_retries + 1
        waited_out = False  # the last attempt's Retry-After, slept by this request itself
        for attempt in range(attempts):
            try:
                return await self._post_once(body, deadline, waited_out)
            except _DeadlinePassed as passed:
                raise AgentError(f"POST {self.url}: {passed}") from None
            except _Transient as failure:
                last_failure = failure
                if attempt + 1 == attempts:
                    break
                delay = self._backoff(attempt, failure.retry_after)
                if delay >= deadline.left():
                    raise AgentError(
                        f"POST {self.url}: no usable answer before the deadline (a retry would "
                        f"wait {delay:.3g} s); the last: {failure}") from None
                self.limit.stats.retries += 1
                self.limit.stats.backoffs += 1
                waited_out = failure.retry_after is not None
                slept = self._sleep(delay)
                if inspect.isawaitable(slept):
                    await slept
        raise AgentError(
            f"POST {self.url}: no usable answer in {attempts} attempts; the last: {last_failure}"
        )

    async def _post_once(self, body: dict[str, Any], deadline: _Deadline,
                         waited_out: bool) -> Any:
        async with self.limit.slot(waited_out) as ticket:
            deadline.extend(ticket.waited_s)
            # The request's own clock starts once it has a slot: waiting behind the other
            # requests is not the server's slowness.
            started = time.monotonic()
            bound = min(started + self._settings.request_timeout_s, deadline.at)
            answer = await self._exchange(body, bound, deadline.at <= bound, ticket)
            latency = time.monotonic() - started
        status = answer.status
        if status in (408, 429) or status >= 500:
            retry_after = _retry_after(answer, self._settings.backoff_max_s)
            if status in (429, 503):
                self.limit.congested(ticket, retry_after)
            raise _Transient(_describe(answer), retry_after)
        self.limit.succeeded(latency)
        if not 200 <= status < 300:
            hint = _HINTS.get(status, "the server refused the request itself, so it is not retried")
            raise AgentError(f"POST {self.url} answered {_describe(answer)}; {hint}")
        try:
            return json.loads(answer.data)
        except ValueError:
            raise AgentError(
                f"POST {self.url} answered HTTP {status} with malformed JSON: "
                f"{excerpt(answer.text)}"
            ) from None

    async def _exchange(self, body: dict[str, Any], bound: float, by_caller: bool,
                        ticket: Ticket) -> _Answer:
        """One request and its whole answer, done by `bound` (monotonic)."""
        try:
            async with asyncio.timeout(max(bound - time.monotonic(), 0.0)):
                async with self.session().post(self.url, json=body) as response:
                    return _Answer(response.status, response.headers, await _read(response))
        except TimeoutError:
            if by_caller:
                raise _DeadlinePassed("no answer before the deadline (the episode's wall time "
                                      "left)") from None
            self.limit.congested(ticket, None)
            raise _Transient(
                f"no answer within {self._settings.request_timeout_s:g} s") from None
        except aiohttp.ClientError as error:
            self.limit.congested(ticket, None)
            raise _Transient(f"connection failed ({type(error).__name__}: {error})") from error

    def session(self) -> aiohttp.ClientSession:
        """The client session, opened on first use (on the event loop it is used from)."""
        if self._client is None:
            # trust_env: the proxy variables are honoured (NO_PROXY for a local server).
            self._client = aiohttp.ClientSession(
                headers=self._headers, trust_env=True, timeout=aiohttp.ClientTimeout(total=None),
                connector=aiohttp.TCPConnector(limit=self._settings.max_in_flight))
        return self._client

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        ceiling = min(self._settings.backoff_max_s, self._settings.backoff_base_s * 2**attempt)
        # Requests that failed together must not all come back together.
        return self._jitter.uniform(ceiling / 2, ceiling)


async def _read(response: aiohttp.ClientResponse) -> bytearray:
    if (response.content_length or 0) > MAX_ANSWER_BYTES:
        raise AgentError(f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MiB "
                         f"({response.content_length:,} bytes announced)")
    data = bytearray()
    async for chunk in response.content.iter_chunked(1 << 16):
        data += chunk
        if len(data) > MAX_ANSWER_BYTES:
            raise AgentError(f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MiB")
    return data


@dataclass(frozen=True)
class Usage:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


def read_usage(reply: Any, settings: OpenAISettings) -> Usage:
    """The token counts and cost of a reply. Counts are clamped to [0, 10**9] (a server that
    reports 10**30 must not overflow a row's int64) and ignored (0) when not numbers. The cost
    is `usage.cost` when the server reports it (OpenRouter does), else the settings' prices."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    tokens_in = _count(usage.get("prompt_tokens"))
    tokens_out = _count(usage.get("completion_tokens"))
    cost = usage.get("cost")
    if type(cost) in (int, float) and not math.isnan(cost):
        return Usage(tokens_in, tokens_out, float(min(max(cost, 0.0), MAX_COST_USD)))
    priced = (tokens_in * (settings.price_in_per_mtok or 0.0)
              + tokens_out * (settings.price_out_per_mtok or 0.0)) / 1e6
    return Usage(tokens_in, tokens_out, min(priced, MAX_COST_USD))


def _count(value: Any) -> int:
    if type(value) not in (int, float) or (isinstance(value, float) and math.isnan(value)):
        return 0
    return int(min(max(value, 0), MAX_TOKENS_COUNTED))


def finish_reason_of(choice: dict[str, Any], message: dict[str, Any]) -> str:
    """The protocol's finish reason ("stop", "length", "refused") of a chat or text choice."""
    finish = choice.get("finish_reason")
    if finish == "content_filter" or message.get("refusal"):
        return "refused"
    return "length" if finish == "length" else "stop"


def _retry_after(answer: _Answer, cap: float) -> float | None:
    """Seconds the server asked us to wait (Retry-After on 429 and 503), at most `cap`."""
    value = answer.headers.get("Retry-After", "").strip()
    if answer.status not in (429, 503) or not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), cap)


def _describe(answer: _Answer) -> str:
    return f"HTTP {answer.status}: {excerpt(answer.text)}"


def excerpt(text: str, limit: int = 500) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= limit else f"{flat[:limit]}..."

