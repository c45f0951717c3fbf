"""Clocks: the real one and a fake one for tests."""

import time


class SystemClock:
    def now(self):
        return time.monotonic()

    def sleep(self, seconds):
        time.sleep(seconds)


class FakeClock:
    """A clock that only moves when ``sleep`` or ``advance`` is called."""

    def __init__(self, start=0.0):
        self._now = start
        self.sleeps = []

    def now(self):
        return self._now

    def sleep(self, seconds):
        if seconds < 0:
            raise ValueError("cannot sleep a negative time")
        self.sleeps.append(seconds)
        self._now += seconds

    def advance(self, seconds):
        """Move time forward without recording a sleep (work taking time)."""
        self._now += seconds
