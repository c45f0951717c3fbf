"""Progress of long work: a rich bar on a terminal, a periodic one-line summary otherwise
(CI logs and `dvc repro` piped to a file stay readable). Both say how many episodes this
process has in flight (heldout.episodes.engine; on a Dask cluster the workers hold them, and
the count here is 0) and when the work should end at the rate so far."""

from __future__ import annotations

import sys
import time
from collections import Counter

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from heldout.agents.endpoint_limit import EndpointStats, drain_endpoint_stats
from heldout.episodes.engine import EPISODES

# Episodes that must have run before a pace is measured: the first ones carry the start-up
# (a sandbox image pulled, an endpoint's first answer), and an ETA from one of them read
# "442m17s" on a run that took minutes (issue 39).
PACE_AFTER = 5


class Pace:
    """How fast work goes, measured from the first episode that finished (not from the
    start, which holds the start-up), and when the rest should be done at that pace."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.ran = 0
        self.first: float | None = None

    def ran_one(self) -> None:
        self.ran += 1
        if self.first is None:
            self.first = self.clock()

    def rate(self) -> float | None:
        """Episodes a second since the first finished, or None before PACE_AFTER ran."""
        if self.ran < PACE_AFTER or self.first is None:
            return None
        return (self.ran - 1) / max(self.clock() - self.first, 1e-9)

    def eta(self, left: int) -> str:
        """"4m10s" for `left` episodes at the pace measured, or "-" before there is one."""
        rate = self.rate()
        if rate is None:
            return "-"
        seconds = round(left / rate)
        return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class EpisodeProgress:
    """Counts finished episodes by status, as a heldout.episodes.rollout.EpisodeObserver;
    `advance` is safe to call from one thread only (the collector's), which is where results
    arrive."""

    def __init__(self, label: str, every_s: float = 10.0):
        self.label, self.total, self.every_s = label, 0, every_s
        self.statuses: Counter[str] = Counter()
        self.done = self.cached = self.passed = 0
        self.started = time.perf_counter()
        self.pace = Pace()
        self.finished: float | None = None
        self._last_line = self.started
        console = Console(stderr=True)
        self._bar = (
            Progress(
                TextColumn(f"[bold]{label}[/]"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]} ep/s  {task.fields[in_flight]} in flight  "
                           "{task.fields[summary]}"),
                TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"), console=console,
            )
            if console.is_terminal
            else None
        )
        self._bar_task = None

    def start(self, total: int) -> None:
        self.total = total
        self.started = self._last_line = time.perf_counter()
        if self._bar is not None:
            self._bar.start()
            self._bar_task = self._bar.add_task(self.label, total=total, rate="-", summary="",
                                                in_flight=0, eta="-")

    def advance(self, row: dict, cached: bool) -> None:
        self.done += 1
        self.cached += cached
        if not cached:
            self.pace.ran_one()
        self.passed += bool(row["passed"])
        self.statuses[row["status"]] += 1
        now = time.perf_counter()
        if self._bar is not None:
            self._bar.update(self._bar_task, completed=self.done, rate=f"{self.rate():.1f}",
                             summary=self.summary(), in_flight=EPISODES.in_flight,
                             eta=self.eta())
        elif now - self._last_line >= self.every_s or self.done == self.total:
            self._last_line = now
            going = (f"{EPISODES.in_flight} in flight, ETA {self.eta()}, "
                     if self.done < self.total else "")
            print(f"{self.label}: {self.done}/{self.total} episodes, {self.rate():.1f} ep/s, "
                  f"{going}{self.summary()}", file=sys.stderr, flush=True)

    def rate(self) -> float:
        ran = self.done - self.cached
        return ran / max(time.perf_counter() - self.started, 1e-9)

    def eta(self) -> str:
        """When the rest should be done at the pace measured (Pace): "4m10s", or "-"."""
        return self.pace.eta(self.total - self.done)

    def elapsed(self) -> float:
        """Seconds from the start to the end of the work (so far, while it runs)."""
        return (self.finished or time.perf_counter()) - self.started

    def summary(self) -> str:
        problems = {s: c for s, c in self.statuses.items() if s != "ok"}
        parts = [f"passed {self.passed}"] + [f"{s} {c}" for s, c in sorted(problems.items())]
        if self.cached:
            parts.append(f"resumed {self.cached}")
        return ", ".join(parts)

    def finish(self) -> None:
        self.finished = time.perf_counter()
        if self._bar is not None:
            self._bar.stop()


def speed_metrics() -> dict[str, float]:
    """How the work since the last call went, for MLflow: the most episodes this process had in
    flight, and what its model endpoints did (requests, retries, backoffs, refusals, latency
    p50/p95, requests in flight, the adaptive limit). Counting starts anew."""
    endpoints = list(drain_endpoint_stats().values())
    metrics: dict[str, float] = {"episodes_in_flight_max": EPISODES.drain_peak()}
    if endpoints:
        metrics |= EndpointStats.pooled(endpoints).metrics()
    return metrics
