"""Measuring an endpoint before a long run: throughput and latency at a ladder of concurrency
levels, and the knee where more requests in flight stop buying throughput.

Each level keeps exactly that many requests in flight (one sender per slot, each sending its
next request when its last is answered) for `requests_at(level)` requests: enough for a p95
(at least 40), and three rounds at the level. The ladder climbs in powers of two to the ceiling
and stops early once two levels in a row add less than 10% throughput, or a level has more than
5% of its requests refused or failed. The knee is the lowest level within 90% of the best
throughput measured: past it, requests only queue at the server.

The probe bypasses the adaptive limit (heldout.agents.endpoint_limit): it measures the server
at fixed levels, and the level it suggests is a `max_in_flight` ceiling for the run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from heldout.agents.openai_http import Transport

KNEE_SHARE = 0.9
FLAT_GAIN = 1.1
MOST_FAILED = 0.05


@dataclass(frozen=True)
class Level:
    """What one concurrency level measured."""

    in_flight: int
    requests: int
    seconds: float
    latency_p50_s: float
    latency_p95_s: float
    refused: int  # 429 and 503
    failed: int  # other statuses, dropped connections, timeouts

    @property
    def throughput(self) -> float:
        """Answered requests a second."""
        return (self.requests - self.refused - self.failed) / self.seconds

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"throughput": self.throughput}


def requests_at(level: int) -> int:
    return max(40, 3 * level)


def ladder(ceiling: int) -> list[int]:
    levels = [1]
    while levels[-1] * 2 <= ceiling:
        levels.append(levels[-1] * 2)
    if levels[-1] != ceiling:
        levels.append(ceiling)
    return levels


def should_stop(measured: list[Level]) -> bool:
    """True once the last level failed too often, or two levels in a row added < 10%."""
    last = measured[-1]
    if last.refused + last.failed > MOST_FAILED * last.requests:
        return True
    if len(measured) < 3:
        return False
    a, b, c = (level.throughput for level in measured[-3:])
    return b < a * FLAT_GAIN and c < b * FLAT_GAIN


def knee(measured: list[Level]) -> Level:
    """The lowest level within 90% of the best throughput (levels that failed too often are
    not candidates)."""
    usable = [level for level in measured
              if level.refused + level.failed <= MOST_FAILED * level.requests] or measured[:1]
    best = max(level.throughput for level in usable)
    return next(level for level in usable if level.throughput >= KNEE_SHARE * best)


async def measure_level(transport: Transport, body: dict[str, Any], level: int,
                        timeout_s: float) -> Level:
    """`requests_at(level)` requests with exactly `level` in flight."""
    total = requests_at(level)
    sent = 0
    latencies: list[float] = []
    outcomes = {"refused": 0, "failed": 0}

    async def sender() -> None:
        nonlocal sent
        while sent < total:
            sent += 1
            began = time.monotonic()
            outcome = await _one(transport, body, timeout_s)
            if outcome == "ok":
                latencies.append(time.monotonic() - began)
            else:
                outcomes[outcome] += 1

    started = time.monotonic()
    await asyncio.gather(*(sender() for _ in range(level)))
    seconds = time.monotonic() - started
    p50, p95 = np.quantile(latencies, [0.5, 0.95]) if latencies else (float("nan"),) * 2
    return Level(level, total, seconds, float(p50), float(p95), outcomes["refused"],
                 outcomes["failed"])


async def _one(transport: Transport, body: dict[str, Any], timeout_s: float) -> str:
    try:
        async with asyncio.timeout(timeout_s):
            async with transport.session().post(transport.url, json=body) as response:
                await response.read()
                if response.status in (429, 503):
                    return "refused"
                return "ok" if 200 <= response.status < 300 else "failed"
    except Exception:  # noqa: BLE001 - a timeout, a dropped connection: a failed request
        return "failed"


async def probe(transport: Transport, body: dict[str, Any], ceiling: int, timeout_s: float,
                report: Any = lambda level: None) -> list[Level]:
    """Climb the ladder to `ceiling`, telling `report` of each level as it is measured."""
    measured: list[Level] = []
    for level in ladder(ceiling):
        measured.append(await measure_level(transport, body, level, timeout_s))
        report(measured[-1])
        if should_stop(measured):
            break
    return measured
