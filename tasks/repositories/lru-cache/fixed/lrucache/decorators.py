"""Memoization on top of ``LRUCache``."""

import functools

from lrucache.cache import LRUCache

_MISSING = object()


def _make_key(args, kwargs):
    if not kwargs:
        return args
    return args + (_MISSING,) + tuple(sorted(kwargs.items()))


def lru_memoize(capacity=128):
    """Cache results of a function of hashable arguments.

    The wrapped function gets a ``cache`` attribute holding its ``LRUCache``.
    """

    def decorator(func):
        cache = LRUCache(capacity)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            key = _make_key(args, kwargs)
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = func(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache = cache
        return wrapper

    return decorator
