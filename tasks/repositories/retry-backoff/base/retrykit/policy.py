"""How long to wait between attempts."""

from dataclasses import dataclass


@dataclass(frozen=True)
class BackoffPolicy:
    """Exponential backoff.

    ``max_attempts`` is the total number of calls, so there are at most
    ``max_attempts - 1`` pauses. The pause before retry ``n`` (1 for the
    first retry) is ``base * factor ** (n - 1)``, capped at ``max_delay``.
    """

    base: float = 0.1
    factor: float = 2.0
    max_delay: float = 10.0
    max_attempts: int = 5

    def __post_init__(self):
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")
        if self.factor < 1:
            raise ValueError("factor must be at least 1")

    def delay(self, retry_number):
        if retry_number < 1:
            raise ValueError("retry numbers start at 1")
        return min(self.base * self.factor ** (retry_number - 1), self.max_delay)

    def delays(self):
        """Every pause of a run that uses all attempts."""
        return [self.delay(number) for number in range(1, self.max_attempts + 1)]

    def total_delay(self):
        return sum(self.delays())
