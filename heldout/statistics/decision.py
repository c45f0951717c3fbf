"""The verdict on a candidate against its base, decided before a word of it is written.

The rule, fixed before the test split is opened (DESIGN §5), stated once and applied by the
pipeline's report and `heldout compare` alike:

"better" or "worse" only when (1) the paired test rejects at ALPHA and (2) the difference's
interval at CONFIDENCE excludes 0, both carrying the run-level drift where reruns measured it,
and (3) no gate voids the comparison; otherwise "no difference detected", or "not decidable:
…" naming the first gate that voided it. A significant "worse" is reported whatever gate
fired, but for arms not run alike or run at different times (heldout.statistics.timing),
which make a loss as easily as a gain: a gate may hide a gain, never a harm. The gates that plan
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
the sample altogether, which no resampling can see; the betting test then joins the deciding
test, so the p printed (the largest of the three) rejects exactly when the verdict claims,
and the MDE shown is the effect the betting test finds with probability POWER. The choice and its
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

from heldout.statistics.betting import betting_detectable
from heldout.statistics.deciding_test import noise, skew_robust
from heldout.statistics.intervals import Interval
from heldout.statistics.paired_tests import (
    McNemarResult,
    PermutationTest,
    mcnemar_exact,
    paired_permutation_test,
    paired_score_interval,
)
from heldout.statistics.power import Reruns, RunDrift, run_drift, verdict_mde
from heldout.statistics.pvalues import alpha_text
from heldout.statistics.rule import (
    ALPHA,
    CONFIDENCE,
    MIN_FAILURE_CAPABLE,
    MIN_UNITS,
    POWER,
    TRUNCATION_FLOOR,
    TRUNCATION_RATIO,
    WARN_FAILURE_CAPABLE,
    critical_value,
    run_variance,
    shares,
    units_for,
)
from heldout.statistics.timing import Timing, clears_reference
from heldout.statistics.truncation import truncates_more

BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference detected"
NOT_DECIDABLE = "not decidable"
# Gates that hold the verdict at "no difference detected", in the order the rule checks them.
TEST_DOES_NOT_REJECT = "the paired test does not reject"
INTERVAL_INCLUDES_ZERO = "interval includes 0"
REFERENCE_NOT_CLEARED = "the reference moved as much"
# Gates that void the comparison ("not decidable").
TOO_FEW_UNITS = "too few tasks or groups"
HARDEN_THE_SET = "harden the set"
TRUNCATION_IMBALANCE = "one arm truncated far more"
NOT_COMPARABLE = "not comparable"
EPISODES_DIFFER = "the arms ran different episodes per task"
ARMS_APART = "the arms ran at different times"
# The judge's gates (heldout.statistics.judge_trust): no number an untrusted judge produced is
# quoted, a "worse" no more than a "better".
JUDGE_UNTRUSTED = "judge untrusted"
GRADER_REASON = "one grader reason"
# Gates that only warn: the verdict stands, with the caveat beside it.
FEW_FAILURE_CAPABLE = "few tasks either arm fails"
TIMES_UNKNOWN = "when the arms ran is not recorded"
# Voiding gates a significant "worse" is not reported through: drift or a different harness
# can make a loss as easily as a gain.
VOIDS_HARM_TOO = (NOT_COMPARABLE, ARMS_APART, JUDGE_UNTRUSTED, GRADER_REASON)


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
    # paired sd over the test's units (tasks, or groups) and the run-level drift, and where
    # the betting test decides (betting_decides) at least the effect it finds with POWER
    base_pass_at_1: float
    truncation: tuple[float, float]  # (base, candidate) share of episodes truncated
    unit_sd: float = 0.0  # sd of the differences over the test's units (tasks, or groups),
    # net of the episodes' noise the runs' spread carries (RunDrift.noise)
    # one-sided p that the base, and that the candidate, truncates more than TRUNCATION_RATIO
    # times the other (heldout.statistics.truncation), or None: the point ratio decides
    truncation_p: tuple[float, float] | None = None
    # why the arms' episodes per task differ (the verdict then rests on the episodes both
    # ran), or None
    episodes_differ: str | None = None
    # below MIN_UNITS: the tasks or groups the difference measured would need at the spread
    # seen (rule.units_for), or None
    units_needed: int | None = None

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
        comparable (different harnesses), or None. timing: when the arms ran and what
        controls the drift between those times (heldout.statistics.timing), or None: not
        asked. judge: the judge's voiding gates (heldout.statistics.judge_trust), first.
    """

    difference: Interval
    test: PermutationTest
    mcnemar: McNemarResult
    drift: RunDrift | None
    support: Support
    mismatch: str | None = None
    timing: Timing | None = None
    judge: tuple[Gate, ...] = ()

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
        harm = self.claim == WORSE and all(gate.name not in VOIDS_HARM_TOO for gate in voiding)
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
        reference = self.timing.reference if self.timing is not None else None
        if reference is not None and not clears_reference(self.difference, reference):
            fired.append(Gate(REFERENCE_NOT_CLEARED, (
                f"the reference checkpoint moved {100 * reference.estimate:+.1f} points "
                f"[{100 * reference.low:+.1f}, {100 * reference.high:+.1f}] between the arms' "
                f"times, and the interval [{100 * self.difference.low:+.1f}, "
                f"{100 * self.difference.high:+.1f}] does not clear it"), False))
        return fired

    def _warning_gates(self) -> list[Gate]:
        capable, fired = self.support.failure_capable, []
        if WARN_FAILURE_CAPABLE <= capable < MIN_FAILURE_CAPABLE:
            fired.append(Gate(FEW_FAILURE_CAPABLE, (
                f"only {capable} tasks that either arm ever fails (fewer than "
                f"{MIN_FAILURE_CAPABLE}): the verdict rests on few tasks that can move"),
                False, warns=True))
        if self.timing is not None and self.timing.unknown:
            fired.append(Gate(TIMES_UNKNOWN, self.timing.unknown, False, warns=True))
        return fired

    def _voiding_gates(self) -> list[Gate]:
        support, fired = self.support, list(self.judge)
        if self.mismatch:
            fired.append(Gate(NOT_COMPARABLE, self.mismatch, True))
        if self.timing is not None and self.timing.apart:
            fired.append(Gate(ARMS_APART, self.timing.apart, True))
        if support.episodes_differ:
            fired.append(Gate(EPISODES_DIFFER, support.episodes_differ, True))
        if min(support.tasks, support.groups) < MIN_UNITS:
            fired.append(Gate(TOO_FEW_UNITS, (
                f"{support.tasks} tasks in {support.groups} groups, fewer than {MIN_UNITS}: "
                "add tasks, not episodes" + (
                    "" if support.units_needed is None else
                    f" (at the spread seen, a difference of "
                    f"{100 * abs(self.difference.estimate):.1f} points is found in "
                    f"{POWER:.0%} of runs with about {max(support.units_needed, MIN_UNITS)} "
                    "tasks or groups)")), True))
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
        tested = support.truncation_p or (None, None)
        for mine, theirs, arm, p in ((base, candidate, "base", tested[0]),
                                     (candidate, base, "candidate", tested[1])):
            more = mine > TRUNCATION_RATIO * theirs if p is None else p <= ALPHA
            if mine > TRUNCATION_FLOOR and more:
                fired.append(Gate(TRUNCATION_IMBALANCE, (
                    f"the {arm} was truncated in {100 * mine:.1f}% of episodes, more than "
                    f"twice the other arm's {100 * theirs:.1f}%"
                    + ("" if p is None else f" (one-sided p = {p:.2g} over the tasks)")
                    + ": budgets, not skill, may decide the difference"), True))
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
    task_truncation: tuple[ArrayLike, ArrayLike] | None = None,
    reruns: Reruns | None = None,
    run_differences: ArrayLike | None = None,
    mismatch: str | None = None,
    episodes_differ: str | None = None,
    timing: Timing | None = None,
    judge: tuple[Gate, ...] = (),
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
    cut short by a budget; task_truncation: the same per task, from which the truncation gate
    is a test over the tasks (heldout.statistics.truncation), or None for the point ratio.
    reruns: R ≥ 2 paired runs of both arms (heldout.statistics.power.
    Reruns), whose spread (run_drift) the test and the interval carry, or None; with reruns,
    base and candidate are the rates over the R runs' episodes pooled, and n_episodes their
    number. run_differences: with reruns, per run and task the candidate − base of the task's
    rate in that run, shape (R, N), from which the episodes' noise that the runs' spread and
    the tasks' spread both hold is counted once (RunDrift.noise); None counts it twice.
    mismatch: why the arms are not comparable, or None. episodes_differ: why the arms'
    episodes per task differ, the rates given being over the episodes both ran: a gate that
    voids a gain and lets a significant harm through, or None. timing: when the arms ran
    (heldout.statistics.timing): apart voids better and worse alike, a reference's movement
    must be cleared, unknown is a caveat; or None. judge: gates that void any verdict of the
    judge that scored both arms (heldout.statistics.judge_trust). `seed` seeds the resampling.
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
    drift = run_drift(reruns, run_differences, by_groups) if reruns is not None else None
    exact = episodes.max(initial=1) == 1 and not grouped and not run_variance(drift)
    betting_decided = False
    if exact:
        test = signs
        difference = paired_score_interval(b, c, base.size, CONFIDENCE,
                                           both=int(np.sum(base_passed & candidate_passed)))
    else:
        test, difference, betting_decided = skew_robust(candidate - base, signs, by_groups,
                                                      drift, seed)
    # The MDE's units are the test's: groups when the tasks come in groups.
    differences = candidate - base
    if grouped:
        _, index = np.unique(labels, return_inverse=True)
        differences = np.bincount(index, differences) / np.bincount(index)
    # A unit's sd net of the episodes' noise the runs' variance carries (RunDrift.noise): the
    # MDE and the units an effect needs count it once, as the test does.
    sd = math.sqrt(max(float(differences.var(ddof=1)) - differences.size * noise(drift), 0.0)
                   ) if differences.size > 1 else 0.0
    mde = verdict_mde(sd, int(differences.size), run_variance(drift), critical_value(
        shares(sd, differences.size, drift)), POWER) if sd > 0 or run_variance(drift) > 0 \
        else None
    if betting_decided and mde is not None:
        # Where the betting test decides, the MDE is the effect it finds with probability
        # POWER on differences spread like these (heldout.statistics.betting).
        mde = max(mde, betting_detectable(candidate - base, groups=by_groups,
                                          confidence=CONFIDENCE, power=POWER, seed=seed))
    support = Support(
        tasks=int(base.size),
        groups=int(np.unique(labels).size) if labels is not None else int(base.size),
        episodes=int(episodes.min()) if episodes.size else 0,
        both_pass=int(np.sum((base == 1) & (candidate == 1))),
        both_fail=int(np.sum((base == 0) & (candidate == 0))),
        mde=mde,
        base_pass_at_1=float(base.mean()),
        truncation=(float(truncation[0]), float(truncation[1])),
        unit_sd=sd,
        truncation_p=None if task_truncation is None else (
            truncates_more(task_truncation[0], task_truncation[1], ratio=TRUNCATION_RATIO,
                           groups=by_groups),
            truncates_more(task_truncation[1], task_truncation[0], ratio=TRUNCATION_RATIO,
                           groups=by_groups)),
        episodes_differ=episodes_differ,
        units_needed=units_for(abs(difference.estimate), sd, drift,
                               signs.nonzero_units / max(1, signs.units))
        if differences.size < MIN_UNITS and sd > 0 and difference.estimate != 0 else None,
    )
    return Decision(difference, test, mcnemar_exact(b, c), drift, support, mismatch, timing,
                    tuple(judge))
