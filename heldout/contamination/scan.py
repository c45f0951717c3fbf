"""Scanning a training source: its items streamed past the eval index one at a time, in worker
processes if asked, so memory does not grow with the training data (10^6 items and more)."""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from multiprocessing.pool import AsyncResult

from heldout.contamination.index import EvalIndex, Match
from heldout.contamination.sources import TrainingItem


@dataclass
class SourceScan:
    """What scanning one training source found."""

    source: str
    items: int = 0
    code_unparsable: int = 0
    matches: list[Match] = field(default_factory=list)

    @property
    def matched_ids(self) -> set[str]:
        return {m.training_id for m in self.matches}


def scan_source(
    index: EvalIndex, source: str, items: Iterable[TrainingItem], workers: int = 1
) -> SourceScan:
    """Scan a stream of training items; with workers > 1, in that many processes. The stream
    is read as it is scanned, so a source of any size fits in memory."""
    scan = SourceScan(source)
    for matches, unparsable in _scan_all(index, items, workers):
        scan.items += 1
        scan.code_unparsable += unparsable
        scan.matches += matches
    return scan


_CHUNK = 1000  # items per task sent to a worker: large enough to amortize the round trip
_worker_index: EvalIndex | None = None


def _scan_all(
    index: EvalIndex, items: Iterable[TrainingItem], workers: int
) -> Iterator[tuple[list[Match], bool]]:
    if workers == 1:
        yield from map(index.scan, items)
        return
    # spawn, not fork: the stage runs inside MLflow's and Prefect's threads, and forking a
    # threaded process can deadlock the child on a lock some thread held.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(index,)) as pool:
        pending: deque[AsyncResult] = deque()
        for chunk in _chunks(items, _CHUNK):
            pending.append(pool.apply_async(_scan_chunk, (chunk,)))
            # A bounded queue: the reader never runs far ahead of the workers.
            if len(pending) > 2 * workers:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


def _start_worker(index: EvalIndex) -> None:
    global _worker_index
    _worker_index = index


def _scan_chunk(chunk: list[TrainingItem]) -> list[tuple[list[Match], bool]]:
    assert _worker_index is not None, "the pool's initializer sets the index"
    return [_worker_index.scan(item) for item in chunk]


def _chunks(items: Iterable[TrainingItem], size: int) -> Iterator[list[TrainingItem]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk

