"""A least-recently-used cache and a memoizing decorator."""

from lrucache.cache import LRUCache
from lrucache.decorators import lru_memoize
from lrucache.stats import CacheStats

__all__ = ["CacheStats", "LRUCache", "lru_memoize"]
