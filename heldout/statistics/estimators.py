"""Unbiased per-task estimators of reach and reliability from c successes out of n episodes:
pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv:2107.03374,
§2.1) and pass^k (Yao et al. 2024, "τ-bench: A Benchmark for Tool-Agent-User Interaction",
arXiv:2406.12045)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from heldout.statistics._arrays import (
    CHUNK_ELEMENTS,
    check_successes,
    scalar_or_array,
    whole_numbers,
)

# Each task's (n, c) pair is keyed by the int64 n·(max n + 1) + c, at most (max n + 1)² − 1:
# beyond this n the key wraps and tasks are silently given another task's counts.
MAX_EPISODES = math.isqrt(2**63) - 1


def _comb_ratio(n: np.ndarray, c: np.ndarray, k: np.ndarray) -> np.ndarray:
    """C(n − c, k) / C(n, k) elementwise for flat arrays of valid (n, c, k), without overflow.

    The ratio is symmetric in c and k (both equal (n−c)!(n−k)! / (n!(n−c−k)!)), so it is the
    product of min(c, k) factors (n − t − max(c, k)) / (n − t), t = 0 … min(c, k) − 1: each
    factor is one correctly rounded division of exact integers, and the ragged products over
    all triples are taken at once with np.multiply.reduceat on a flat array, chunked so no
    temporary exceeds CHUNK_ELEMENTS.
    """
    ratio = np.where(n - c < k, 0.0, 1.0)
    fewer, more = np.minimum(c, k), np.maximum(c, k)
    needs_product = np.flatnonzero((n - c >= k) & (c > 0))
    lengths = fewer[needs_product]
    ends = np.cumsum(lengths)
    start = 0
    while start < needs_product.size:
        before = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + CHUNK_ELEMENTS, "right")))
        rows, seg = needs_product[start:stop], lengths[start:stop]
        offsets = np.cumsum(seg) - seg
        t = np.arange(int(seg.sum())) - np.repeat(offsets, seg)
        denominator = np.repeat(n[rows], seg) - t
        factors = (denominator - np.repeat(more[rows], seg)) / denominator
        ratio[rows] = np.multiply.reduceat(factors, offsets)
        start = stop
    return ratio


def _comb_ratio_table(n: ArrayLike, c: ArrayLike, k: ArrayLike, estimator: str) -> np.ndarray:
    """Validate and return C(n − c, k) / C(n, k) shaped broadcast(n, c).shape + k.shape."""
    c, n = check_successes(c, n)
    if n.size and n.max() > MAX_EPISODES:
        raise ValueError(
            f"{estimator}: n = {n.max()} episodes exceeds {MAX_EPISODES:,}, the most this "
            "arithmetic handles exactly"
        )
    k = whole_numbers("k", k)
    if k.size and k.min() < 1:
        raise ValueError(f"{estimator}: k must be at least 1, got k = {k.min()}")
    if k.size and n.size and k.max() > n.min():
        raise ValueError(
            f"{estimator}: k must not exceed n, the episodes per task; got k = {k.max()} "
            f"with n = {n.min()} for some task"
        )
    # Tasks share few (n, c) pairs (at most n + 1 per distinct n), so compute each pair once;
    # 0 <= c <= n makes n·(max n + 1) + c a unique integer key of the pair.
    base = int(n.max(initial=0)) + 1
    keys, task_to_pair = np.unique(n.ravel() * base + c.ravel(), return_inverse=True)
    pair_n, pair_c, pair_k = (
        grid.ravel()
        for grid in np.broadcast_arrays(keys[:, None] // base, keys[:, None] % base, k.ravel())
    )
    table = _comb_ratio(pair_n, pair_c, pair_k).reshape(keys.size, k.size)
    return table[task_to_pair].reshape(n.shape + k.shape)


def pass_at_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass@k per task: 1 − C(n − c, k) / C(n, k) (Chen et al. 2021, eq. 1).

    The probability that at least one of k episodes drawn without replacement from the n run
    passes, given c passed. Its expectation is exactly 1 − (1 − p)^k, whereas the plug-in
    1 − (1 − c/n)^k is biased low (n = 10, c = 3, k = 5: 0.9167 against 0.8319).

    Computed as a product of min(c, k) ratios of exact integers, never a binomial coefficient,
    so n = 10,000 neither overflows nor loses precision (relative error below min(c, k) ulps).

    n, c: per-task episode and success counts, scalars or arrays (per-task n may differ).
    k: scalar, or an array giving one column per k. Returns a float for scalar input, else an
    array of shape broadcast(n, c).shape + k.shape (tasks × k).

    At k = 1 it is c/n, computed as that quotient: 1 − (n − c)/n is c/n in exact arithmetic
    but not always in floating point (1 − 7/10 is not 3/10), and pass@1 must be the pass rate
    to the last bit, so that every table showing it shows one number with one interval.

    Raises ValueError for k < 1, k > n, c outside [0, n], n > MAX_EPISODES (3,037,000,498,
    beyond which the integer keys of the computation would wrap) or non-integer input.
    """
    complement = 1.0 - _comb_ratio_table(n, c, k, "pass@k")
    c, n = check_successes(c, n)
    k = whole_numbers("k", k)
    rate = (c / n).reshape(c.shape + (1,) * k.ndim)
    return scalar_or_array(np.where(k == 1, rate, complement))


def pass_hat_k(n: ArrayLike, c: ArrayLike, k: ArrayLike) -> float | np.ndarray:
    """Unbiased pass^k per task: C(c, k) / C(n, k) (Yao et al. 2024, τ-bench).

    The probability that all k episodes drawn without replacement from the n run pass; its
    expectation is p^k, a measure of reliability rather than of reach. Same arguments, shapes
    and errors as pass_at_k (C(c, k)/C(n, k) is C(n − c', k)/C(n, k) with c' = n − c).
    """
    c, n = check_successes(c, n)
    return scalar_or_array(_comb_ratio_table(n, n - c, k, "pass^k"))
