"""How many requests one model endpoint is sent at once: a ceiling the checkpoint sets
(`max_in_flight`) and an adaptive limit below it, measured from what the endpoint answers.

The limit starts at 32 (or the ceiling, if lower) and grows while requests succeed: by half a
request a success until the endpoint first says it is full (slow start: 1.5 times a round
trip, so a first overshoot refuses at most a third of what is in flight), then by one a round
trip (1/limit a success). A 429, a 503, a timeout or a dropped connection cuts it to 0.8 of
itself, once a round trip: only a request sent after the last cut can cut it again, so one
burst of refusals is one cut. A Retry-After closes the endpoint to every new request until it
passes. Against a server that serves 32 at once, over the second half of a 3,300-request run,
the limit's median was 27 (range 21-33) and 0.6% of requests were refused; the first overshoot
brings the whole run to 1.3% (benchmarks/bench_endpoint.py).

Every endpoint (one base_url) has one limit in a process, whichever checkpoints share it, and
keeps what a run needs to report: requests, retries, backoffs, latencies and the most in flight.
The limit changes when requests are sent, never what they ask: no row depends on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np

from heldout.aio import Slots, queued

CUT = 0.8
SLOW_START = 0.5  # added a success until the first refusal: x1.5 a round trip
START = 32  # a round trip or three from any server's knee, and under most servers' own


@dataclass
class EndpointStats:
    """What one endpoint did since it was last drained."""

    requests: int = 0
    retries: int = 0
    backoffs: int = 0
    congested: int = 0
    latencies_s: list[float] = field(default_factory=list)
    peak_in_flight: int = 0
    limits: list[int] = field(default_factory=list)

    @classmethod
    def pooled(cls, many: list[EndpointStats]) -> EndpointStats:
        """Every endpoint's counts added and latencies pooled (a run usually has one)."""
        return cls(sum(s.requests for s in many), sum(s.retries for s in many),
                   sum(s.backoffs for s in many), sum(s.congested for s in many),
                   [latency for s in many for latency in s.latencies_s],
                   max((s.peak_in_flight for s in many), default=0),
                   [limit for s in many for limit in s.limits])

    def metrics(self) -> dict[str, float]:
        """Counts, and latency quantiles and the adaptive limit where there are any."""
        metrics: dict[str, float] = {
            "requests": self.requests, "requests_retried": self.retries,
            "backoffs": self.backoffs, "congestion_signals": self.congested,
            "requests_in_flight_max": self.peak_in_flight}
        if self.latencies_s:
            p50, p95 = np.quantile(np.asarray(self.latencies_s, dtype=float), [0.5, 0.95])
            metrics |= {"latency_p50_s": float(p50), "latency_p95_s": float(p95)}
        if self.limits:
            metrics |= {"adaptive_limit_last": self.limits[-1],
                        "adaptive_limit_median": float(np.median(self.limits))}
        return metrics


@dataclass(frozen=True)
class Ticket:
    """A request's slot: when it was sent (its number among the endpoint's) and how long it
    waited for the slot and any Retry-After (queue time, which its deadline does not count)."""

    number: int
    waited_s: float


class EndpointLimit:
    """One endpoint's slots under its adaptive limit (used on the event loop only)."""

    def __init__(self, ceiling: int, start: int = START):
        self.ceiling = ceiling
        self.limit = float(min(start, ceiling))
        self.slots = Slots(int(self.limit))
        self.stats = EndpointStats()
        self.sent = 0
        self._cut_at = 0  # requests sent when the limit was last cut
        self._slow_start = True
        self._closed_until = 0.0

    def set_ceiling(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self._apply(min(self.limit, ceiling))

    @contextlib.asynccontextmanager
    async def slot(self, waited_out: bool = False) -> AsyncIterator[Ticket]:
        """A slot, once the endpoint is open: `waited_out` is a retry that has just slept the
        Retry-After it was given itself, and is not held a second time."""
        began = time.monotonic()
        with queued():
            while not waited_out and (closed := self._closed_until - time.monotonic()) > 0:
                await asyncio.sleep(closed)
            await self.slots.acquire()
        try:
            self.sent += 1
            self.stats.requests += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.slots.used)
            yield Ticket(self.sent, time.monotonic() - began)
        finally:
            self.slots.release()

    def succeeded(self, latency_s: float) -> None:
        self.stats.latencies_s.append(latency_s)
        self._apply(self.limit + (SLOW_START if self._slow_start else 1.0 / self.limit))

    def congested(self, ticket: Ticket, retry_after_s: float | None) -> None:
        """The endpoint refused or dropped `ticket`'s request, or it timed out."""
        self.stats.congested += 1
        if retry_after_s:
            self._closed_until = max(self._closed_until, time.monotonic() + retry_after_s)
        if ticket.number > self._cut_at:
            self._slow_start = False
            self._cut_at = self.sent
            self._apply(self.limit * CUT)

    def _apply(self, limit: float) -> None:
        self.limit = min(max(limit, 1.0), float(self.ceiling))
        self.slots.set_limit(int(self.limit))
        self.stats.limits.append(int(self.limit))


_lock = threading.Lock()
_ENDPOINTS: dict[str, EndpointLimit] = {}


def endpoint_limit(base_url: str, ceiling: int) -> EndpointLimit:
    """The process's limit for `base_url`, its ceiling the latest asked for."""
    with _lock:
        limit = _ENDPOINTS.get(base_url)
        if limit is None:
            limit = _ENDPOINTS[base_url] = EndpointLimit(ceiling)
        elif limit.ceiling != ceiling:
            limit.set_ceiling(ceiling)
        return limit


def drain_endpoint_stats() -> dict[str, EndpointStats]:
    """What each endpoint did since the last drain, by base_url; counting starts anew."""
    with _lock:
        drained = {}
        for url, limit in _ENDPOINTS.items():
            drained[url], limit.stats = limit.stats, EndpointStats()
        return drained
