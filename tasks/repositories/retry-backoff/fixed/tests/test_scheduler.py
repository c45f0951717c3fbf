import pytest

from retrykit import BackoffPolicy, FakeClock, retry


def flaky(failures, result="ok", error=TimeoutError):
    calls = []

    def func():
        calls.append(1)
        if len(calls) <= failures:
            raise error("boom")
        return result

    func.calls = calls
    return func


def test_returns_first_success():
    func = flaky(0)
    clock = FakeClock()
    assert retry(func, BackoffPolicy(), clock) == "ok"
    assert len(func.calls) == 1
    assert clock.sleeps == []


def test_retries_then_succeeds():
    func = flaky(2)
    clock = FakeClock()
    assert retry(func, BackoffPolicy(base=0.1, max_attempts=5), clock) == "ok"
    assert clock.sleeps == pytest.approx([0.1, 0.2])


def test_other_exceptions_propagate():
    func = flaky(1, error=KeyError)
    with pytest.raises(KeyError):
        retry(func, BackoffPolicy(), FakeClock(), retry_on=(TimeoutError,))
    assert len(func.calls) == 1


def test_deadline_stops_before_long_pause():
    func = flaky(100)
    clock = FakeClock()
    policy = BackoffPolicy(base=1.0, factor=2.0, max_attempts=10)
    with pytest.raises(Exception, match="gave up"):
        retry(func, policy, clock, deadline=5.0)
    assert clock.sleeps == [1.0, 2.0]
    assert len(func.calls) == 3
