import pytest

from retrykit import BackoffPolicy, FakeClock


def test_delay_grows():
    policy = BackoffPolicy(base=0.1, factor=2.0)
    assert [policy.delay(n) for n in (1, 2, 3)] == pytest.approx([0.1, 0.2, 0.4])


def test_delay_capped():
    policy = BackoffPolicy(base=1.0, factor=10.0, max_delay=30.0)
    assert policy.delay(2) == 10.0
    assert policy.delay(3) == 30.0


@pytest.mark.parametrize(
    "kwargs", [{"max_attempts": 0}, {"base": -1.0}, {"factor": 0.5}, {"max_delay": -2.0}]
)
def test_validation(kwargs):
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)


def test_fake_clock():
    clock = FakeClock(start=5.0)
    clock.sleep(1.5)
    clock.advance(2.0)
    assert clock.now() == 8.5
    assert clock.sleeps == [1.5]
