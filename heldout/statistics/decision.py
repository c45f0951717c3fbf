"""The verdict on a candidate against its base, decided before a word of it is written.

The rule, fixed before the test split is opened (DESIGN §5), stated once and applied by the
pipeline's report and `heldout compare` alike:

"better" or "worse" only when (1) the paired test rejects at ALPHA and (2) the difference's
interval at CONFIDENCE excludes 0, both carrying the run-level drift where reruns measured it,
and (3) no gate voids the comparison; otherwise "no difference detected", or "not decidable:
…" naming the first gate that voided it. A significant "worse" is reported whatever gate
fired, but for arms not run alike: a gate may hide a gain, never a harm. The gates that plan
(too few tasks or groups, a set too easy) are checked on the validation split before the test
split is opened (heldout.custody.spend); here they stand as caveats on what was spent.

The test uses every episode. With one episode per task and no groups it is the exact sign
test on the discordant tasks (the exact McNemar test, also reported at one sample index) with
Newcombe's paired score interval: each difference is −1, 0 or 1, and a mean of 0 makes −1 and
1 equally likely, so the test is exact for the mean, not only for a symmetric null. Otherwise
the differences can be skewed while their mean is 0 (many tasks gain a little, a few lose a
lot), and a sign-flip test, which tests symmetry, says "better" too often; the test is then an
intersection-union test (Berger 1982) that rejects only when both of two tests do, with p the
larger of their p-values: the bootstrap-t of the mean difference over tasks or groups
(heldout.statistics.studentized), which estimates the skewness, and the sign-flip permutation
test (exact under the sharp null), which holds where few tasks differ at all and the
bootstrap's resamples are degenerate. The interval is the bootstrap-t's, which excludes 0
exactly when that test rejects; below BETTING_BELOW units, or below DIFFERING_BELOW units whose
difference is not 0, it is widened to the hedged-capital betting interval
(heldout.statistics.betting), valid at any size: there a few large losses can be missing from
the sample altogether, which no resampling can see. The choice and its
numbers: benchmarks/verdict_simulation.py, docs/statistics.md. The gates
come from the evaluation literature the design cites (Miller 2024;
Bowyer et al. 2025): too few tasks or groups to count on, a set too easy to show a difference,
arms that did not run the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from heldout.statistics.betting import betting_interval
from heldout.statistics.intervals import Interval
from heldout.statistics.paired_tests import (
    McNemarResult,
    PermutationTest,
    mcnemar_exact,
    paired_permutation_test,
    paired_score_interval,
)
from heldout.statistics.power import Reruns, RunDrift, required_units, run_drift, verdict_mde
from heldout.statistics.pvalues import alpha_text
from heldout.statistics.studentized import drift_factor, studentized_test

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference detected"
NOT_DECIDABLE = "not decidable"
# Part of the rule, so not parameters: a level chosen after seeing the data would be no rule.
# α is the literal and the confidence 1 − α (exactly 0.95): 1 − 0.95 is 0.050000000000000044.
ALPHA = 0.05
CONFIDENCE = 1 - ALPHA
POWER = 0.8
MIN_UNITS = 30  # tasks, and groups: below this the interval's own coverage is not to be trusted
MIN_FAILURE_CAPABLE = 50  # tasks some arm fails at least once: fewer cannot show a difference
# From this many to MIN_FAILURE_CAPABLE failure-capable tasks the verdict stands with a
# warning; below it the comparison is void.
WARN_FAILURE_CAPABLE = 30
TRUNCATION_RATIO = 2.0
TRUNCATION_FLOOR = 0.02  # a truncation rate below 2% is too rare to void anything
# Below this many tasks or groups the interval is widened to the betting interval: in
# simulation the resampling methods' false "better" reached 0.07-0.15 at 30 tasks on skewed
# nulls and was within its bound from 164 (benchmarks/verdict_simulation.py).
BETTING_BELOW = 100
# ... and below this many of them whose difference is not 0. A unit whose arms tie says
# nothing of the tails, so the resampling methods' accuracy rests on the units that differ:
# on skewed and near-ceiling sets of 100-164 tasks only 4-75 differ, and there the
# bootstrap-t said "better" to 0.025-0.057 of nulls. 75 holds every null cell of the grid and
# keeps the bootstrap-t for the +5-point power cells, where 81-129 tasks differ (50 left a
# cell at 0.037; 100 cost a third of the power on a U-shaped set: docs/statistics.md).
DIFFERING_BELOW = 75



def rule_settings() -> dict[str, float]:
    """The constants the rule decides with, as a closed access records them beside its
    verdict: a later report that decides otherwise can say which of them changed."""
    return {"alpha": ALPHA, "power": POWER, "min_units": MIN_UNITS,
            "min_failure_capable": MIN_FAILURE_CAPABLE,
            "warn_failure_capable": WARN_FAILURE_CAPABLE, "truncation_ratio": TRUNCATION_RATIO,
            "truncation_floor": TRUNCATION_FLOOR, "betting_below": BETTING_BELOW,
            "differing_below": DIFFERING_BELOW}


# Gates that hold the verdict at "no difference detected", in the order the rule checks them.
TEST_DOES_NOT_REJECT = "the paired test does not reject"
INTERVAL_INCLUDES_ZERO = "interval includes 0"
# Gates that void the comparison ("not decidable").
TOO_FEW_UNITS = "too few tasks or groups"
HARDEN_THE_SET = "harden the set"
TRUNCATION_IMBALANCE = "one arm truncated far more"
NOT_COMPARABLE = "not comparable"
# Gates that only warn: the verdict stands, with the caveat beside it.
FEW_FAILURE_CAPABLE = "few tasks either arm fails"


@dataclass(frozen=True)
class Gate:
    name: str
    message: str
    voids: bool  # True: "not decidable"; False: the verdict holds at "no difference detected"
    warns: bool = False  # True (and voids False): the verdict stands, with this caveat


@dataclass(frozen=True)
class Support:
    """What the verdict rests on, shown beside it."""

    tasks: int
    groups: int
    episodes: int  # per task, the fewer of the two arms'
    both_pass: int  # tasks both arms passed in every episode (ties)
    both_fail: int  # tasks both arms failed in every episode (ties)
    mde: float | None  # the verdict's minimum detectable effect at ALPHA and POWER: from the
    # paired sd over the test's units (tasks, or groups), the run-level drift, and the
    # betting interval's wider critical value where it decides (betting_decides)
    base_pass_at_1: float
    truncation: tuple[float, float]  # (base, candidate) share of episodes truncated
    unit_sd: float = 0.0  # sd of the differences over the test's units (tasks, or groups)

    @property
    def failure_capable(self) -> int:
        return self.tasks - self.both_pass


@dataclass(frozen=True)
class Decision:
    """What the verdict was decided from, and the verdict the rule gives for it.

    difference: candidate − base, the mean over tasks of per-task pass rates, with its
        interval at CONFIDENCE. test: the deciding paired test on every episode. mcnemar: the
        exact McNemar test at one sample index (b: tasks only the base passed there, c: only
        the candidate). drift: how far the difference moved between the paired runs of both
        arms (RunDrift), carried in the test and the interval, or None. support: the
        tasks, groups, ties and power the verdict rests on. mismatch: why the arms are not
        comparable (different harness or episodes per task), or None.
    """

    difference: Interval
    test: PermutationTest
    mcnemar: McNemarResult
    drift: RunDrift | None
    support: Support
    mismatch: str | None = None

    @property
    def claim(self) -> str:
        """better, worse or no difference by the statistics alone (the test and the interval),
        before any gate that voids the comparison."""
        if self._holding_gates():
            return NO_DIFFERENCE
        return BETTER if self.difference.estimate > 0 else WORSE

    @property
    def gates(self) -> tuple[Gate, ...]:
        """Every gate that fired: the voiding ones first, then the holding ones, then the
        warnings, each in the rule's order."""
        return (*self._voiding_gates(), *self._holding_gates(), *self._warning_gates())

    @property
    def verdict(self) -> str:
        voiding = [gate for gate in self.gates if gate.voids]
        harm = self.claim == WORSE and all(gate.name != NOT_COMPARABLE for gate in voiding)
        if voiding and not harm:
            return f"{NOT_DECIDABLE}: {voiding[0].message}"
        return self.claim

    @property
    def caveats(self) -> list[str]:
        """What the verdict stands despite: the warnings, and the voiding gates a significant
        "worse" was reported through."""
        stood = self.verdict == WORSE
        return [gate.message for gate in self.gates if gate.warns or (stood and gate.voids)]

    def _holding_gates(self) -> list[Gate]:
        fired = []
        if not self.test.rejects:
            fired.append(Gate(TEST_DOES_NOT_REJECT, f"{self.test.method}: "
                              f"{self.test.printed_p_value} > {alpha_text(ALPHA)}", False))
        if self.difference.low <= 0 <= self.difference.high:
            fired.append(Gate(INTERVAL_INCLUDES_ZERO, "the interval includes 0", False))
        return fired

    def _warning_gates(self) -> list[Gate]:
        capable = self.support.failure_capable
        if WARN_FAILURE_CAPABLE <= capable < MIN_FAILURE_CAPABLE:
            return [Gate(FEW_FAILURE_CAPABLE, (
                f"only {capable} tasks that either arm ever fails (fewer than "
                f"{MIN_FAILURE_CAPABLE}): the verdict rests on few tasks that can move"),
                False, warns=True)]
        return []

    def _voiding_gates(self) -> list[Gate]:
        support, fired = self.support, []
        if self.mismatch:
            fired.append(Gate(NOT_COMPARABLE, self.mismatch, True))
        if min(support.tasks, support.groups) < MIN_UNITS:
            fired.append(Gate(TOO_FEW_UNITS, (
                f"{support.tasks} tasks in {support.groups} groups, fewer than {MIN_UNITS}: "
                "add tasks, not episodes"), True))
        ceiling = 1 - support.base_pass_at_1
        if support.failure_capable < WARN_FAILURE_CAPABLE:
            fired.append(Gate(HARDEN_THE_SET, (
                f"only {support.failure_capable} tasks that either arm ever fails (fewer than "
                f"{WARN_FAILURE_CAPABLE}): harden the set"), True))
        elif support.mde is not None and ceiling < 2 * support.mde:
            fired.append(Gate(HARDEN_THE_SET, (
                f"the base leaves {100 * ceiling:.1f} points to gain, less than twice the "
                f"minimum detectable effect ({100 * support.mde:.1f}): harden the set"), True))
        base, candidate = support.truncation
        for mine, theirs, arm in ((base, candidate, "base"), (candidate, base, "candidate")):
            if mine > TRUNCATION_FLOOR and mine > TRUNCATION_RATIO * theirs:
                fired.append(Gate(TRUNCATION_IMBALANCE, (
                    f"the {arm} was truncated in {100 * mine:.1f}% of episodes, more than "
                    f"twice the other arm's {100 * theirs:.1f}%: budgets, not skill, may "
                    "decide the difference"), True))
        return fired


def decide(
    base: ArrayLike,
    candidate: ArrayLike,
    *,
    n_episodes: ArrayLike,
    base_passed: ArrayLike,
    candidate_passed: ArrayLike,
    groups: ArrayLike | None = None,
    truncation: tuple[float, float] = (0.0, 0.0),
    reruns: Reruns | None = None,
    mismatch: str | None = None,
    seed: int | None = 0,
) -> Decision:
    """Decide the candidate against the base on the same tasks, given in the same order.

    base, candidate: per-task pass rates over all episodes, shape (N,). n_episodes: episodes
    per task (the fewer of the two arms'), one number or one per task; only when every task
    ran one is the interval Newcombe's on the 2×2 table at the sample index, so a task that
    ran one episode among tasks that ran ten never puts the interval and the sign on sample 0
    while the test uses every episode.
    base_passed, candidate_passed: per task, whether the episode at one fixed sample index
    passed (McNemar's pairs). groups: one label per task (tasks of one repository, family or
    template), or None for independent tasks. truncation: (base, candidate) share of episodes
    cut short by a budget. reruns: R ≥ 2 paired runs of both arms (heldout.statistics.power.
    Reruns), whose spread (run_drift) the test and the interval carry, or None; with reruns,
    base and candidate are the rates over the R runs' episodes pooled, and n_episodes their
    number. mismatch: why the arms are not comparable, or None. `seed` seeds the resampling.
    """
    base, candidate = np.asarray(base, dtype=float), np.asarray(candidate, dtype=float)
    base_passed = np.asarray(base_passed, dtype=bool)
    candidate_passed = np.asarray(candidate_passed, dtype=bool)
    if base.shape != candidate.shape or base_passed.shape != base.shape or \
            candidate_passed.shape != base.shape:
        raise ValueError(
            f"one rate and one outcome per task in each arm: got {base.size} and "
            f"{candidate.size} rates, {base_passed.size} and {candidate_passed.size} outcomes")
    episodes = np.broadcast_to(np.asarray(n_episodes, dtype=int), base.shape)
    labels = np.asarray(groups) if groups is not None else None
    grouped = labels is not None and np.unique(labels).size < labels.size
    by_groups = labels if grouped else None
    signs = paired_permutation_test(candidate, base, groups=by_groups, alpha=ALPHA, seed=seed)
    b = int(np.sum(base_passed & ~candidate_passed))
    c = int(np.sum(~base_passed & candidate_passed))
    drift = run_drift(reruns) if reruns is not None else None
    exact = episodes.max(initial=1) == 1 and not grouped and not run_variance(drift)
    if exact:
        test = signs
        difference = paired_score_interval(b, c, base.size, CONFIDENCE,
                                           both=int(np.sum(base_passed & candidate_passed)))
    else:
        test, difference = _skew_robust(candidate - base, signs, by_groups, drift, seed)
    # The MDE's units are the test's: groups when the tasks come in groups.
    differences = candidate - base
    if grouped:
        _, index = np.unique(labels, return_inverse=True)
        differences = np.bincount(index, differences) / np.bincount(index)
    sd = float(differences.std(ddof=1)) if differences.size > 1 else 0.0
    support = Support(
        tasks=int(base.size),
        groups=int(np.unique(labels).size) if labels is not None else int(base.size),
        episodes=int(episodes.min()) if episodes.size else 0,
        both_pass=int(np.sum((base == 1) & (candidate == 1))),
        both_fail=int(np.sum((base == 0) & (candidate == 0))),
        # The exact sign test never hands its interval to the betting one.
        mde=verdict_mde(sd, int(differences.size), run_variance(drift), critical_value(
            differences.size, math.inf if exact else test.nonzero_units,
            _shares(sd, differences.size, drift)), POWER)
        if sd > 0 or run_variance(drift) > 0 else None,
        base_pass_at_1=float(base.mean()),
        truncation=(float(truncation[0]), float(truncation[1])),
        unit_sd=sd,
    )
    return Decision(difference, test, mcnemar_exact(b, c), drift, support, mismatch)


def betting_decides(units: int, differing: float) -> bool:
    """Whether the betting interval widens the verdict's: below BETTING_BELOW tasks or groups,
    or below DIFFERING_BELOW of them whose difference is not 0."""
    return units < BETTING_BELOW or differing < DIFFERING_BELOW


def critical_value(units: int, differing: float,
                   runs: tuple[float, float, int] | None = None) -> float:
    """The verdict's critical value in standard errors at `units` tasks or groups, `differing`
    of them not 0: z₁₋α/₂, or √(2 log(2/α)) where the betting interval decides (its
    half-width is about that many standard errors; Waudby-Smith & Ramdas 2024). With `runs`,
    (the tasks' share of the variance, the runs' share, the runs' degrees of freedom), at
    least the bootstrap-t's, widened as the runs' estimated variance widens it
    (heldout.statistics.studentized.drift_factor)."""
    z = float(sps.norm.ppf(1 - ALPHA / 2))
    critical = float(np.sqrt(2 * np.log(2 / ALPHA))) if betting_decides(units, differing) else z
    if runs is None:
        return critical
    return max(critical, z * drift_factor(*runs, ALPHA))


def run_variance(drift: RunDrift | None) -> float:
    """What whole runs add to the variance of the difference: 0 without reruns."""
    return drift.variance if drift is not None else 0.0


def _shares(sd: float, units: int, drift: RunDrift | None) -> tuple[float, float, int] | None:
    return None if drift is None else (sd**2 / units, drift.variance, drift.df)


def units_for(effect: float, sd: float, drift: RunDrift | None,
              differing_share: float = 1.0) -> int | None:
    """Tasks (or groups) the verdict needs to find `effect` with probability POWER, at the
    paired sd and the runs' spread measured and the share of units that differ; None when
    the runs' variance alone keeps it out of reach (more runs would bring it in). Where the
    betting interval decides (betting_decides at that many units, that share of them
    differing) its wider critical value applies, and with reruns the t critical value at the
    units found (three rounds: it moves little once the tasks' share is known)."""
    switch = max(BETTING_BELOW, math.ceil(DIFFERING_BELOW / differing_share - 1e-9)) \
        if differing_share > 0 else math.inf
    variance = run_variance(drift)

    def solve(betting: bool) -> int | None:
        """The units needed with the betting interval's critical value or without it."""
        decides = (0, 0) if betting else (BETTING_BELOW, DIFFERING_BELOW)
        found: int | None = 1
        for _ in range(3):
            found = required_units(effect, sd, variance, critical_value(
                *decides, _shares(sd, found, drift)), POWER)
            if found is None:
                return None
        return found

    small = solve(betting=True)
    if small is not None and small < switch:
        return small
    large = solve(betting=False)
    return None if large is None else max(large, int(switch))


def _skew_robust(differences: np.ndarray, signs: PermutationTest, groups: np.ndarray | None,
                 drift: RunDrift | None, seed: int | None) -> tuple[PermutationTest, Interval]:
    """The intersection-union test of the bootstrap-t and the sign-flip test, and its interval
    (the bootstrap-t's, widened to the betting interval where betting_decides)."""
    studentized = studentized_test(differences, groups=groups, confidence=CONFIDENCE,
                                   drift_variance=run_variance(drift),
                                   drift_df=drift.df if drift is not None else math.inf,
                                   seed=seed)
    p_value = max(signs.p_value, studentized.p_value)
    # The p reported is one of the two, and it is written with that one's resolution.
    draws, floor = ((studentized.resamples, studentized.p_floor)
                    if studentized.p_value > signs.p_value else (signs.draws, signs.floor))
    test = PermutationTest(
        signs.statistic, p_value, signs.units, signs.nonzero_units, draws is None, draws,
        f"{studentized.method} and {signs.method}, both rejecting (p the larger)",
        bool(p_value <= ALPHA), floor)
    difference = studentized.interval
    if betting_decides(studentized.units, signs.nonzero_units):
        betting = betting_interval(differences, groups=groups, confidence=CONFIDENCE,
                                   seed=seed)
        low, high = min(difference.low, betting.low), max(difference.high, betting.high)
        if (low, high) != (difference.low, difference.high):
            difference = Interval(difference.estimate, low, high,
                                  f"{difference.method}, widened to the {betting.method} "
                                  f"({_why_betting(studentized.units, signs.nonzero_units)})")
    return test, difference


def _why_betting(units: int, differing: int) -> str:
    if units < BETTING_BELOW:
        return f"fewer than {BETTING_BELOW} units"
    return f"{differing} of {units} units differ, fewer than {DIFFERING_BELOW}"
