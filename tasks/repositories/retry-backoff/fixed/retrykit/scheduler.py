"""The retry loop."""


class RetryError(Exception):
    """All attempts failed; ``attempts`` calls were made."""

    def __init__(self, attempts, last_error):
        super().__init__(f"gave up after {attempts} attempts: {last_error!r}")
        self.attempts = attempts
        self.last_error = last_error


def retry(func, policy, clock, retry_on=(Exception,), deadline=None):
    """Call ``func()`` until it succeeds, following ``policy``.

    Exceptions not matching ``retry_on`` propagate at once. With a
    ``deadline`` (seconds since the first call) no pause is started that
    would end after it. Raises ``RetryError`` when giving up.
    """
    start = clock.now()
    attempt = 0
    while True:
        attempt += 1
        try:
            return func()
        except retry_on as error:
            if attempt >= policy.max_attempts:
                raise RetryError(attempt, error) from error
            pause = policy.delay(attempt)
            if deadline is not None and clock.now() - start + pause > deadline:
                raise RetryError(attempt, error) from error
            clock.sleep(pause)
