"""Retries with exponential backoff and an injectable clock."""

from retrykit.clock import FakeClock, SystemClock
from retrykit.policy import BackoffPolicy
from retrykit.scheduler import RetryError, retry

__all__ = ["BackoffPolicy", "FakeClock", "RetryError", "SystemClock", "retry"]
