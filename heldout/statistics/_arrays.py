"""Input checks and array plumbing shared by the estimators: every public function of
heldout.statistics checks its inputs here, once, at the edge, and names the offending element."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike

# Bound on the elements of any temporary array built per chunk (512 KiB of float64), so memory
# stays flat however many tasks or resamples there are; chunks this small also stay in cache,
# which made index resampling ~1.5x faster than chunks of 2**20 on the reference machine.
CHUNK_ELEMENTS = 1 << 16


def whole_numbers(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must hold whole numbers, got dtype {array.dtype}")
    flat = array.ravel()
    bad = np.flatnonzero(~(np.isfinite(flat) & (flat == np.round(flat))))
    if bad.size:
        raise ValueError(f"{name} must hold whole numbers; element {bad[0]} is {flat[bad[0]]}")
    # A float or uint64 beyond the int64 range would wrap in astype, silently.
    huge = np.flatnonzero(np.abs(flat.astype(float)) >= 2.0**63)
    if huge.size:
        raise ValueError(f"{name} must fit a 64-bit integer; element {huge[0]} is {flat[huge[0]]}")
    return array.astype(np.int64)


def finite_values(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence (one value per task)")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite; task {np.flatnonzero(~np.isfinite(array))[0]}")
    return array


def check_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    return confidence


def check_successes(c: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    c, n = np.broadcast_arrays(whole_numbers("c", c), whole_numbers("n", n))
    if np.any(n < 1):
        raise ValueError(f"n must be at least 1 for every task, got n = {n.min()}")
    bad = np.flatnonzero((c < 0) | (c > n))
    if bad.size:
        task = bad[0]
        raise ValueError(
            f"c must lie in [0, n] for every task; task {task} has c = {c.ravel()[task]}, "
            f"n = {n.ravel()[task]}"
        )
    return c, n


def scalar_or_array(array: np.ndarray) -> float | np.ndarray:
    return float(array) if array.ndim == 0 else array


def chunk_sizes(total: int, per_chunk: int) -> Iterator[int]:
    for start in range(0, total, per_chunk):
        yield min(per_chunk, total - start)


def group_codes(groups: ArrayLike, n_tasks: int) -> tuple[np.ndarray, int]:
    """Per task, the index 0 … G − 1 of its group label (in order of first appearance), and G.

    Labels may be any hashable values (split keys are strings, ids or tuples), which is why
    this walks them in Python rather than sorting them with np.unique: mixed or None labels
    cannot be sorted. One label per task.
    """
    labels = list(groups) if not isinstance(groups, np.ndarray) else groups.tolist()
    if len(labels) != n_tasks:
        raise ValueError(f"groups must hold one label per task: got {len(labels)} labels "
                         f"for {n_tasks} tasks")
    index: dict = {}
    try:
        codes = np.fromiter((index.setdefault(label, len(index)) for label in labels),
                            dtype=np.int64, count=n_tasks)
    except TypeError as error:
        raise ValueError(f"group labels must be hashable: {error}") from None
    return codes, len(index)


def unit_sums(values: np.ndarray, groups: ArrayLike | None) -> tuple[np.ndarray, np.ndarray, str]:
    """The resampled units of per-task values: each task (sum = its value, size 1), or with
    `groups` each group (the sum of its tasks' values, its number of tasks); and how to name
    them ("40 tasks", "10 groups of 40 tasks")."""
    if groups is None:
        return values, np.ones_like(values), f"{values.size} tasks"
    codes, n_groups = group_codes(groups, values.size)
    sums = np.bincount(codes, weights=values, minlength=n_groups)
    sizes = np.bincount(codes, minlength=n_groups).astype(float)
    return sums, sizes, f"{n_groups} group{'s' * (n_groups > 1)} of {values.size} tasks"
