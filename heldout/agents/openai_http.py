"""The wire to an OpenAI-compatible server: one shared client, retries, deadlines, usage.

One `Transport` per agent holds one httpx client and a semaphore that caps the requests in
flight; the rollout's threads share both. What a busy server does (429, 5xx, dropped
connections, timeouts) is retried with backoff; anything else it answers is an AgentError that
quotes the answer, because the rollout records that message as the episode's error.

A request has a total deadline, not a timeout per read: `request_timeout_s` from the moment it
has a slot, and the caller's deadline (what is left of the episode's wall time) if it gives
one, whichever comes first. httpx has no such deadline, so every socket of the client reads,
writes and connects no later than the deadline of the request using it (a context variable the
request sets, read by a wrapped network backend): a server that trickles one byte at a time,
headers included, cannot hold a request past it. The body is streamed and the deadline checked
after each chunk as well. A retry never sleeps past the caller's deadline.
"""

from __future__ import annotations

import contextvars
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpcore
import httpx

from heldout.agents.openai_settings import OpenAISettings
from heldout.errors import AgentError

MAX_TOKENS_COUNTED = 10**9  # a usage count above this is a server's bug, not a count
MAX_COST_USD = 10**6
MAX_ANSWER_BYTES = 64 << 20
_HINTS = {
    401: "check api_key_env and the key it holds",
    403: "check api_key_env and the key it holds",
    404: "check base_url (it ends at the API version, e.g. http://localhost:8000/v1) and model",
}
# The monotonic time by which the request this thread is making must be done (None: no bound).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "heldout_openai_deadline", default=None)


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
    headers: httpx.Headers
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class Transport:
    """POSTs JSON to the settings' endpoint and returns the JSON it answered."""

    def __init__(self, settings: OpenAISettings, sleep: Callable[[float], None] = time.sleep):
        self._settings = settings
        self._sleep = sleep
        path = "chat/completions" if settings.endpoint == "chat" else "completions"
        self.url = f"{settings.base_url}/{path}"
        headers = {}
        if settings.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
        limits = httpx.Limits(max_connections=settings.concurrency,
                              max_keepalive_connections=settings.concurrency)
        self._client = httpx.Client(headers=headers, timeout=settings.request_timeout_s,
                                    limits=limits, transport=_deadline_transport(limits))
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        # A private generator: jitter drawn from the global one would shift the random numbers
        # of anything else in the process that seeded it.
        self._jitter = random.Random()

    def close(self) -> None:
        self._client.close()

    def post(self, body: dict[str, Any], deadline: float | None = None) -> Any:
        """The JSON answer to `body`, retried while the server is busy; `deadline` (monotonic
        seconds) ends the whole of it, retries and their backoff included."""
        attempts = self._settings.max_retries + 1
        for attempt in range(attempts):
            try:
                return self._post_once(body, deadline)
            except _DeadlinePassed as passed:
                raise AgentError(f"POST {self.url}: {passed}") from None
            except _Transient as failure:
                last_failure = failure
                if attempt + 1 == attempts:
                    break
                delay = self._backoff(attempt, failure.retry_after)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise AgentError(
                        f"POST {self.url}: no usable answer before the deadline (a retry would "
                        f"wait {delay:.3g} s); the last: {failure}") from None
                self._sleep(delay)
        raise AgentError(
            f"POST {self.url}: no usable answer in {attempts} attempts; the last: {last_failure}"
        )

    def _post_once(self, body: dict[str, Any], deadline: float | None) -> Any:
        if not self._slots.acquire(timeout=_left(deadline)):
            raise _DeadlinePassed("no free connection before the deadline")
        try:
            # The request's own clock starts once it has a slot: waiting behind the other
            # threads is not the server's slowness.
            timeout = self._settings.request_timeout_s
            bound = time.monotonic() + timeout
            by_caller = deadline is not None and deadline <= bound
            bound = min(bound, deadline) if deadline is not None else bound
            answer = self._exchange(body, bound, by_caller)
        finally:
            self._slots.release()
        status = answer.status
        if status in (408, 429) or status >= 500:
            retry_after = _retry_after(answer, self._settings.backoff_max_s)
            raise _Transient(_describe(answer), retry_after)
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

    def _exchange(self, body: dict[str, Any], bound: float, by_caller: bool) -> _Answer:
        """One request and its whole answer, done by `bound` (monotonic)."""
        token = _DEADLINE.set(bound)
        try:
            with self._client.stream("POST", self.url, json=body,
                                     timeout=max(bound - time.monotonic(), 0.001)) as response:
                data = _read_by(response.iter_bytes(), bound)
                return _Answer(response.status_code, response.headers, data)
        except (httpx.TimeoutException, _DeadlinePassed) as error:
            how = (type(error).__name__ if isinstance(error, httpx.TimeoutException)
                   else "the answer was still arriving")
            if by_caller:
                raise _DeadlinePassed("no answer before the deadline (the episode's wall time "
                                      f"left; {how})") from None
            raise _Transient(f"no answer within {self._settings.request_timeout_s:g} s "
                             f"({how})") from error
        except httpx.TransportError as error:
            raise _Transient(f"connection failed ({type(error).__name__}: {error})") from error
        finally:
            _DEADLINE.reset(token)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        ceiling = min(self._settings.backoff_max_s, self._settings.backoff_base_s * 2**attempt)
        # Threads that failed together must not all come back together.
        return self._jitter.uniform(ceiling / 2, ceiling)


def _read_by(chunks: Iterable[bytes], bound: float) -> bytes:
    data = bytearray()
    for chunk in chunks:
        data += chunk
        if time.monotonic() > bound:
            raise _DeadlinePassed("the answer was still arriving at the deadline")
        if len(data) > MAX_ANSWER_BYTES:
            raise AgentError(f"the answer is larger than {MAX_ANSWER_BYTES >> 20} MiB")
    return bytes(data)


def deadline_after(seconds: float) -> float | None:
    """The monotonic time `seconds` from now (a caller's deadline for `Transport.post`), or None
    for no bound (an infinite number of seconds)."""
    return time.monotonic() + max(seconds, 0.0) if math.isfinite(seconds) else None


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def _bounded(timeout: float | None, late: type[Exception]) -> float | None:
    """`timeout`, cut to what is left before this thread's request deadline."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("the request's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(
            ssl_context, server_hostname, _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(
            host, port, _bounded(timeout, httpcore.ConnectTimeout), local_address,
            socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(
            path, _bounded(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def _deadline_transport(limits: httpx.Limits) -> httpx.HTTPTransport:
    """httpx's own transport whose connection pool opens its sockets through _DeadlineBackend
    (httpx offers no hook for it, so the pool it built is replaced by the same pool with it)."""
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(), max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry, network_backend=_DeadlineBackend())
    return transport


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

