import pytest

from lrucache import LRUCache


def test_put_and_get():
    cache = LRUCache(2)
    cache.put("x", 1)
    assert cache.get("x") == 1
    assert cache.get("missing") is None
    assert cache.get("missing", 0) == 0


def test_capacity_validation():
    with pytest.raises(ValueError):
        LRUCache(0)


def test_evicts_oldest_insert(small_cache):
    small_cache.put("d", "D")
    assert small_cache.keys() == ["b", "c", "d"]
    assert "a" not in small_cache
    assert small_cache.stats.evictions == 1


def test_stats(small_cache):
    small_cache.get("a")
    small_cache.get("b")
    small_cache.get("nope")
    assert (small_cache.stats.hits, small_cache.stats.misses) == (2, 1)
    assert small_cache.stats.hit_ratio == pytest.approx(2 / 3)


def test_peek_and_pop(small_cache):
    assert small_cache.peek("b") == "B"
    assert small_cache.stats.lookups == 0
    assert small_cache.pop("b") == "B"
    assert len(small_cache) == 2


def test_clear(small_cache):
    small_cache.get("a")
    small_cache.clear()
    assert len(small_cache) == 0
    assert small_cache.stats.lookups == 0
