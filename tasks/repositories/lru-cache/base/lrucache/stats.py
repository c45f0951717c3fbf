"""Counters kept by every cache."""

from dataclasses import dataclass


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0

    def record_hit(self):
        self.hits += 1

    def record_miss(self):
        self.misses += 1

    def record_eviction(self):
        self.evictions += 1

    @property
    def lookups(self):
        return self.hits + self.misses

    @property
    def hit_ratio(self):
        """Fraction of lookups that were hits (0.0 when nothing was looked up)."""
        if not self.lookups:
            return 0.0
        return self.hits / self.lookups

    def reset(self):
        self.hits = self.misses = self.evictions = 0
