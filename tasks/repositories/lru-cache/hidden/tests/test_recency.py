from lrucache import LRUCache, lru_memoize


class TestRecency:
    def test_get_protects_key_from_eviction(self, small_cache):
        assert small_cache.get("a") == "A"
        small_cache.put("d", "D")
        assert "a" in small_cache
        assert "b" not in small_cache

    def test_get_moves_key_to_most_recent(self, small_cache):
        small_cache.get("b")
        assert small_cache.keys() == ["a", "c", "b"]

    def test_put_existing_key_refreshes_it(self, small_cache):
        small_cache.put("a", "A2")
        small_cache.put("d", "D")
        assert small_cache.keys() == ["c", "a", "d"]
        assert small_cache.peek("a") == "A2"

    def test_miss_and_peek_do_not_reorder(self, small_cache):
        small_cache.get("zzz")
        small_cache.peek("a")
        assert "a" in small_cache
        assert small_cache.keys() == ["a", "b", "c"]

    def test_capacity_one(self):
        cache = LRUCache(1)
        cache.put("x", 1)
        cache.put("x", 2)
        assert cache.keys() == ["x"]
        assert cache.stats.evictions == 0
        cache.put("y", 3)
        assert cache.keys() == ["y"]


def test_memoize_keeps_hot_entry():
    calls = []

    @lru_memoize(2)
    def square(x):
        calls.append(x)
        return x * x

    for x in [1, 2, 1, 3, 1]:
        square(x)
    assert calls == [1, 2, 3]
    assert square.cache.stats.evictions == 1
