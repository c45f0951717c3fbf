import pytest

from retrykit import BackoffPolicy, FakeClock, RetryError, retry


def always_failing():
    calls = []

    def func():
        calls.append(1)
        raise ConnectionError(f"failure {len(calls)}")

    func.calls = calls
    return func


@pytest.mark.parametrize("max_attempts", [1, 2, 3, 5])
def test_max_attempts_is_total_number_of_calls(max_attempts):
    func = always_failing()
    clock = FakeClock()
    policy = BackoffPolicy(base=0.5, factor=2.0, max_delay=100.0, max_attempts=max_attempts)
    with pytest.raises(RetryError) as info:
        retry(func, policy, clock)
    assert len(func.calls) == max_attempts
    assert info.value.attempts == max_attempts
    assert str(info.value.last_error) == f"failure {max_attempts}"
    assert clock.sleeps == pytest.approx(policy.delays())


@pytest.mark.parametrize(
    "max_attempts, expected",
    [(1, []), (2, [0.5]), (4, [0.5, 1.0, 2.0]), (6, [0.5, 1.0, 2.0, 3.0, 3.0])],
)
def test_delays_lists_pauses_between_attempts(max_attempts, expected):
    policy = BackoffPolicy(base=0.5, factor=2.0, max_delay=3.0, max_attempts=max_attempts)
    assert policy.delays() == pytest.approx(expected)
    assert policy.total_delay() == pytest.approx(sum(expected))


def test_success_on_last_allowed_attempt():
    calls = []

    def func():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("not yet")
        return "done"

    clock = FakeClock()
    assert retry(func, BackoffPolicy(base=1.0, max_attempts=3), clock) == "done"
    assert clock.sleeps == [1.0, 2.0]
    assert clock.now() == 3.0


def test_single_attempt_never_sleeps():
    func = always_failing()
    clock = FakeClock()
    with pytest.raises(RetryError):
        retry(func, BackoffPolicy(max_attempts=1), clock)
    assert clock.sleeps == []
