"""Asymmetric nulls for the verdict (issue 24): many tasks gain a little, a few lose a lot, and
the population mean difference is exactly 0. Shared by the fast check in
tests/test_verdict_skew.py and the grid in benchmarks/verdict_simulation.py.

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
from heldout.statistics.power import Reruns, episode_variance


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
    reruns: int = 0  # runs of the base in all, its first included, for the drift; 0: none
    seed: int = 24

    def _run(self, rng: np.random.Generator, rates: np.ndarray) -> np.ndarray:
        """One run's pass probabilities: every task's logit moved by the run's own shift."""
        if not self.drift:
            return rates
        logits = special.logit(np.clip(rates, 1e-9, 1 - 1e-9))
        shifts = rng.normal(0.0, self.drift, (rates.shape[0], 1))
        return np.where((rates > 0) & (rates < 1), special.expit(logits + shifts), rates)

    def draws(self) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Per replication, task and episode, whether the base and the candidate passed, and
        the base's reruns (each under its own run shift and its own uniforms)."""
        rng = np.random.default_rng([self.seed, self.n_tasks, self.episodes, self.crn,
                                     round(1000 * self.population.a),
                                     round(1000 * self.population.b)])
        shape = (self.replications, self.n_tasks)
        if self.shift:
            p = rng.beta(self.population.a, self.population.b, shape)
            q = np.clip(p + self.shift, 0, 1)
        else:
            p, q = self.population.draw(rng, shape)
        uniforms = rng.random((*shape, self.episodes))
        base = uniforms < self._run(rng, p)[..., None]
        candidate = (uniforms if self.crn else rng.random(uniforms.shape)) \
            < self._run(rng, q)[..., None]
        reruns = [rng.random(uniforms.shape) < self._run(rng, p)[..., None]
                  for _ in range(max(0, self.reruns - 1))]
        return base, candidate, reruns

    @property
    def truth(self) -> float | None:
        """The population mean difference: 0 for a narrowing null, unknown in closed form for
        a clipped shift (coverage is then not counted)."""
        return None if self.shift else 0.0

    def rates(self) -> dict[str, float]:
        """The shares of replications whose claim (before the voiding gates) is better and
        worse, whose verdict is better and worse, and whose interval covers the population
        difference."""
        base, candidate, reruns = self.draws()
        tallies = dict.fromkeys(("better", "worse", "verdict better", "verdict worse",
                                 "covers"), 0)
        for i in range(self.replications):
            runs = [base[i], *(rerun[i] for rerun in reruns)]
            measured = Reruns(tuple(float(run.mean()) for run in runs), episode_variance(
                sum(run.sum(axis=-1) for run in runs), np.full(self.n_tasks,
                                                               len(runs) * self.episodes),
                len(runs))) if reruns else None
            decision = decide(base[i].mean(axis=-1), candidate[i].mean(axis=-1),
                              n_episodes=self.episodes, base_passed=base[i, :, 0],
                              candidate_passed=candidate[i, :, 0], reruns=measured, seed=i)
            tallies["better"] += decision.claim == BETTER
            tallies["worse"] += decision.claim == WORSE
            tallies["verdict better"] += decision.verdict == BETTER
            tallies["verdict worse"] += decision.verdict == WORSE
            tallies["covers"] += self.truth is not None and \
                decision.difference.low <= self.truth <= decision.difference.high
        return {key: count / self.replications for key, count in tallies.items()}
