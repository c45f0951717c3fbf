import pytest

from lrucache import LRUCache


@pytest.fixture
def small_cache():
    """A full cache of capacity 3 holding a, b, c (inserted in that order)."""
    cache = LRUCache(3)
    for key in "abc":
        cache.put(key, key.upper())
    return cache
