"""The process's one event loop, on a daemon thread of its own.

Everything heldout does asynchronously runs on it: the episodes in flight
(heldout.episodes.engine) and the HTTP clients of model endpoints (heldout.agents.openai_http),
which must live on the loop that opened them, so an agent reused by later chunks, from any
thread, finds its connections where it left them. It starts on first use and dies with the
process; a forked child starts a loop of its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid = 0


def event_loop() -> asyncio.AbstractEventLoop:
    """The running loop of this process, started if it is not."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is None or _pid != os.getpid() or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="heldout-event-loop",
                                       daemon=True)
            _thread.start()
            _pid = os.getpid()
        return _loop


def on_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def run_blocking(coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
    """The coroutine's result, run on the process's loop while this thread waits (never call it
    from the loop's own thread: it would wait on itself). An interrupted wait cancels it."""
    if on_loop_thread():
        coroutine.close()
        raise RuntimeError("run_blocking was called on the event loop's own thread")
    future = asyncio.run_coroutine_threadsafe(coroutine, event_loop())
    try:
        return future.result(timeout_s)
    except BaseException:
        future.cancel()
        raise


# The seconds the current episode has waited in heldout's own queues: for a thread, a sandbox
# worker, an endpoint's request slot or its Retry-After. An episode's wall budget does not count
# them (heldout.episodes.engine), or its outcome would depend on how busy the machine was.
_QUEUED: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "heldout_queued", default=None)


def queue_clock() -> Callable[[], float]:
    """A fresh account of queue time in this context (an episode's task), and the clock that
    runs like time.monotonic less what the account holds."""
    account = [0.0]
    _QUEUED.set(account)
    return lambda: time.monotonic() - account[0]


@contextlib.contextmanager
def queued() -> Iterator[None]:
    """Count the time spent inside as queue time of the current episode (if there is one)."""
    began = time.monotonic()
    try:
        yield
    finally:
        account = _QUEUED.get()
        if account is not None:
            account[0] += time.monotonic() - began


class Slots:
    """At most `limit` holders at once, first come first served; the limit may be changed while
    some wait (the adaptive limit of an endpoint does). Used on the event loop only."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    @contextlib.asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        """Hold a slot inside; the wait for it is queue time."""
        with queued():
            await self.acquire()
        try:
            yield
        finally:
            self.release()

    def set_limit(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._wake()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def acquire(self) -> None:
        if self.used < self.limit and not self._waiting:
            self._take()
            return
        granted = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()  # granted as it was cancelled: give it back
            else:
                self._waiting.remove(granted)
            raise

    def _take(self) -> None:
        self.used += 1
        self.peak = max(self.peak, self.used)

    def release(self) -> None:
        self.used -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self.used < self.limit:
            granted = self._waiting.popleft()
            if not granted.done():
                self._take()
                granted.set_result(None)
