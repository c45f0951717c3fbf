"""The cache itself."""

from collections import OrderedDict

from lrucache.stats import CacheStats


class LRUCache:
    """Mapping with a fixed capacity that evicts the least recently used key.

    Both ``get`` (on a hit) and ``put`` count as a use of the key. Membership
    tests with ``in`` and ``peek`` do not change the order.
    """

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.stats = CacheStats()
        self._data = OrderedDict()

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def get(self, key, default=None):
        if key in self._data:
            self._data.move_to_end(key)
            self.stats.record_hit()
            return self._data[key]
        self.stats.record_miss()
        return default

    def peek(self, key, default=None):
        """Value for ``key`` without touching its position or the stats."""
        return self._data.get(key, default)

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)
            self.stats.record_eviction()

    def pop(self, key, default=None):
        return self._data.pop(key, default)

    def keys(self):
        """Keys from least to most recently used."""
        return list(self._data)

    def clear(self):
        self._data.clear()
        self.stats.reset()
