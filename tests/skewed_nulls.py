"""Asymmetric nulls for the verdict (issue 24): many tasks gain a little, a few lose a lot, and
the population mean difference is exactly 0. Shared by the fast check in
tests/statistics/test_verdict_skew.py and the grid in benchmarks/verdict_simulation.py.

A task's base pass probability is p ~ Beta(a, b). With probability `losers` it loses the share
`loss` of it (q = p·(1 − loss)); otherwise it gains the share g of what it lacks
(q = p + g·(1 − p)), g chosen so that E[q − p] = 0 exactly:
(1 − losers)·g·E[1 − p] = losers·loss·E[p].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from heldout.statistics.decision import BETTER, WORSE, decide
from heldout.statistics.power import Reruns


@dataclass(frozen=True)
class Narrowing:
    a: float
    b: float
    losers: float
    loss: float

    @property
    def gain(self) -> float:
        mean = self.a / (self.a + self.b)
        return self.losers * self.loss * mean / ((1 - self.losers) * (1 - mean))

    def draw(self, rng: np.random.Generator, shape: tuple[int, int]) -> tuple[np.ndarray, ...]:
        p = rng.beta(self.a, self.b, shape)
        lost = rng.random(shape) < self.losers
        return p, np.where(lost, p * (1 - self.loss), p + self.gain * (1 - p))


@dataclass(frozen=True)
class Cell:
    population: Narrowing
    n_tasks: int
    episodes: int
    crn: bool  # common random numbers: one uniform per episode drives both arms
    replications: int
    shift: float = 0.0  # > 0: no narrowing, every task gains this much (clipped): power
    drift: float = 0.0  # sd of a whole run's shift of every task's logit (the same model)
    reruns: int = 0  # runs of each arm in all, the first included, paired; 0: one, no drift
    seed: int = 24
    group_size: int = 1  # > 1: groups of this many tasks share one pass rate and one effect
    withhold_groups: bool = False  # decide as if the tasks were independent
    swing: float = 0.0  # > 0: a symmetric null, each unit moves ±swing·min(p, 1 − p)
    ragged: float = 0.0  # the share of tasks that ran one episode in both arms
    flips: float = 0.0  # > 0: this share of tasks fails always in the base and passes always
    # in the candidate, the rest are the same task in both: rare one-way flips
    uneven: bool = False  # with shift: half the units gain 2·shift, the other half nothing

    def _run(self, rng: np.random.Generator, rates: np.ndarray) -> np.ndarray:
        """One run's pass probabilities: every task's logit moved by the run's own shift."""
        if not self.drift:
            return rates
        logits = special.logit(np.clip(rates, 1e-9, 1 - 1e-9))
        shifts = rng.normal(0.0, self.drift, (rates.shape[0], 1))
        return np.where((rates > 0) & (rates < 1), special.expit(logits + shifts), rates)

    def _rates(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Each unit's (task's, or group's) pass probabilities in the base and the candidate,
        spread over its tasks."""
        shape = (self.replications, self.n_tasks // self.group_size)
        population = self.population
        if self.flips:
            p = rng.beta(population.a, population.b, shape)
            flipped = rng.random(shape) < self.flips
            p, q = np.where(flipped, 0.0, p), np.where(flipped, 1.0, p)
        elif self.shift:
            p = rng.beta(population.a, population.b, shape)
            gains = self.shift * (2 * (rng.random(shape) < 0.5) if self.uneven else 1)
            q = np.clip(p + gains, 0, 1)
        elif self.swing:
            p = rng.beta(population.a, population.b, shape)
            q = p + np.where(rng.random(shape) < 0.5, 1, -1) * self.swing * np.minimum(p, 1 - p)
        else:
            p, q = population.draw(rng, shape)
        return np.repeat(p, self.group_size, axis=1), np.repeat(q, self.group_size, axis=1)

    def draws(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per run, replication, task and episode, whether the base and the candidate passed:
        each arm's first run, then its reruns, each run under its own shift and run r of the
        two under the same uniforms where the draws are common."""
        rng = np.random.default_rng([self.seed, self.n_tasks, self.episodes, self.crn,
                                     round(1000 * self.population.a),
                                     round(1000 * self.population.b), self.group_size,
                                     round(1000 * self.swing), round(1000 * self.flips)])
        p, q = self._rates(rng)
        base, candidate = [], []
        for _ in range(max(1, self.reruns)):
            uniforms = rng.random((*p.shape, self.episodes))
            base.append(uniforms < self._run(rng, p)[..., None])
            candidate.append((uniforms if self.crn else rng.random(uniforms.shape))
                             < self._run(rng, q)[..., None])
        return base, candidate

    @property
    def truth(self) -> float | None:
        """The population mean difference: 0 for a null, the flipped share for flips, unknown
        in closed form for a clipped shift (coverage is then not counted)."""
        if self.flips:
            return self.flips
        return None if self.shift else 0.0

    def episodes_per_task(self) -> np.ndarray:
        """Each task's episodes: one for the first `ragged` share of the tasks (which tasks
        does not matter, their rates being drawn independently of their place)."""
        episodes = np.full(self.n_tasks, self.episodes)
        episodes[:round(self.ragged * self.n_tasks)] = 1
        return episodes

    def rates(self, compare: bool = True) -> dict[str, float]:
        """The shares of replications whose claim (before the voiding gates) is better and
        worse, whose verdict is better and worse, and whose interval covers the population
        difference, and the mean minimum detectable effect the verdict shows ("mde"), all
        with the reruns (the pipeline's verdict) where the cell has them;
        and then also, with `compare`, as `heldout compare` without --rerun decides
        ("compare ...")."""
        base, candidate = self.draws()
        reruns = len(base) > 1
        episodes = self.episodes_per_task()
        counted = np.arange(self.episodes)[None, :] < episodes[:, None]
        groups = None if self.group_size == 1 or self.withhold_groups else \
            np.arange(self.n_tasks) // self.group_size
        keys = ("better", "worse", "verdict better", "verdict worse", "covers", "mde")
        compared = [f"compare {key}" for key in keys] if reruns and compare else []
        tallies = dict.fromkeys((*keys, *compared), 0)

        def tally(decision, prefix: str) -> None:
            tallies[prefix + "better"] += decision.claim == BETTER
            tallies[prefix + "worse"] += decision.claim == WORSE
            tallies[prefix + "verdict better"] += decision.verdict == BETTER
            tallies[prefix + "verdict worse"] += decision.verdict == WORSE
            tallies[prefix + "covers"] += self.truth is not None and \
                decision.difference.low <= self.truth <= decision.difference.high
            tallies[prefix + "mde"] += decision.support.mde or 0.0  # its mean: the MDE shown

        def passes(runs: list[np.ndarray], i: int) -> np.ndarray:
            return np.stack([(run[i] & counted).sum(axis=-1) for run in runs])  # (R, N)

        for i in range(self.replications):
            arguments = dict(base_passed=base[0][i, :, 0], candidate_passed=candidate[0][i, :, 0],
                             groups=groups, seed=i)
            per_run = [passes(base, i) / episodes, passes(candidate, i) / episodes]
            first = [rates[0] for rates in per_run]
            if reruns:  # the pipeline's verdict: every run pooled, their spread carried
                measured = Reruns(*(tuple(rates.mean(axis=1).tolist()) for rates in per_run))
                tally(decide(*(rates.mean(axis=0) for rates in per_run),
                             n_episodes=len(base) * episodes, reruns=measured,
                             run_differences=per_run[1] - per_run[0], **arguments), "")
                if compare:
                    tally(decide(*first, n_episodes=episodes, **arguments), "compare ")
            else:
                tally(decide(*first, n_episodes=episodes, **arguments), "")
        return {key: count / self.replications for key, count in tallies.items()}
