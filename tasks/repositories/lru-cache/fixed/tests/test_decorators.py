from lrucache import lru_memoize


def test_memoize_caches():
    calls = []

    @lru_memoize(4)
    def double(x):
        calls.append(x)
        return 2 * x

    assert double(2) == 4
    assert double(2) == 4
    assert calls == [2]
    assert double.cache.stats.hits == 1


def test_memoize_kwargs_are_part_of_key():
    @lru_memoize(4)
    def power(base, exp=2):
        return base**exp

    assert power(3) == 9
    assert power(3, exp=3) == 27
    assert len(power.cache) == 2


def test_memoize_keeps_function_name():
    @lru_memoize()
    def named():
        return 1

    assert named.__name__ == "named"
