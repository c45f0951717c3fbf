"""A server that drifts in time (issue 38 item 4), shared by the fast check in
tests/statistics/test_timing.py, the slow grid in tests/statistics/test_verdict_grid.py and
benchmarks/time_drift.py.

Every replication draws a task set (logits ~ N(0, 1.2²)), then R runs of each arm; the
server's logit moves by a random walk (a step per run slot), by an independent shift per run,
by a shock per task and run, or drops 30% of one run's passes (an outage). Runs are placed in
time turn about (base r, then candidate r: the test stage's order; one run of each: both at
once), or blocked (every base run before every candidate run: last week's base file), and each
arm's span is what its rows would say, so the verdict's time rule (heldout.statistics.timing)
sees what it would see. Decided by heldout.statistics.decision.decide as the pipeline decides:
runs pooled with their spread (Reruns, run_differences) where R > 1, timing from the spans,
and, for the reference cells, a reference checkpoint run in the slot beside each arm's run
whose movement the claim must clear.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from heldout.statistics.decision import BETTER, WORSE, decide
from heldout.statistics.power import Reruns
from heldout.statistics.timing import Timing, arms_timing, span


@dataclass(frozen=True)
class Design:
    name: str
    tasks: int
    runs: int
    episodes: int
    blocked: bool  # every base run before every candidate run; else turn about (one run: at
    # once)
    walk: float = 0.0  # random-walk step sd per run slot, logit
    shift: float = 0.0  # iid per-run shift sd, logit
    shocks: float = 0.0  # per task and run shock sd, logit
    outage: bool = False  # one candidate run loses 30% of its passes
    effect: float = 0.0  # the candidate's true gain, logit
    reference: bool = False  # a reference checkpoint runs beside each arm


def _slots(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Each arm's run slots in time order: one run of each in one slot (at once), runs turn
    about, or every base run before every candidate run."""
    runs = np.arange(design.runs)
    if design.blocked:
        return runs, design.runs + runs
    if design.runs == 1:
        return runs, runs
    return 2 * runs, 2 * runs + 1


def _rates(rng, logits, server, design: Design, slots) -> np.ndarray:
    """Per run and task, the pass rate over the run's episodes: shape (R, N)."""
    shocks = rng.normal(0.0, design.shocks, (design.runs, logits.size)) if design.shocks else 0
    p = special.expit(logits[None, :] + server[slots][:, None] + shocks)
    return rng.binomial(design.episodes, p) / design.episodes


def _decision(base: np.ndarray, candidate: np.ndarray, design: Design, timing: Timing, seed):
    pooled = dict(base_passed=base[0] > 0.5, candidate_passed=candidate[0] > 0.5, seed=seed,
                  timing=timing)
    if design.runs == 1:
        return decide(base[0], candidate[0], n_episodes=design.episodes, **pooled)
    return decide(base.mean(axis=0), candidate.mean(axis=0),
                  n_episodes=design.runs * design.episodes,
                  reruns=Reruns(tuple(base.mean(axis=1)), tuple(candidate.mean(axis=1))),
                  run_differences=candidate - base, **pooled)


def replicate(design: Design, replications: int, seed: int = 38) -> dict[str, float]:
    rng = np.random.default_rng([seed, design.tasks, design.runs, design.episodes,
                                 design.blocked, round(100 * design.walk),
                                 round(100 * design.shift), round(100 * design.shocks),
                                 design.outage, round(100 * design.effect), design.reference])
    slots = _slots(design)
    times = [np.concatenate([slot + np.linspace(0, 0.9, design.tasks) for slot in arm])
             for arm in slots]
    timing = arms_timing(span(times[0]), span(times[1]), names=("base", "candidate"))
    tallies = dict.fromkeys(("claim better", "claim worse", "better", "worse"), 0)
    for i in range(replications):
        server = np.cumsum(rng.normal(0.0, design.walk, 2 * design.runs)) + \
            rng.normal(0.0, design.shift, 2 * design.runs)
        logits = rng.normal(0.0, 1.2, design.tasks)
        base = _rates(rng, logits, server, design, slots[0])
        candidate = _rates(rng, logits + design.effect, server, design, slots[1])
        if design.outage:
            candidate[rng.integers(design.runs)] *= 0.7
        given = timing
        if design.reference:
            own = rng.normal(0.0, 1.2, design.tasks)
            beside = [_rates(rng, own, server, design, arm) for arm in slots]
            moved = _decision(*beside, design, Timing(), seed=i).difference
            given = Timing(reference=moved)
        decision = _decision(base, candidate, design, given, seed=i)
        tallies["claim better"] += decision.claim == BETTER
        tallies["claim worse"] += decision.claim == WORSE
        tallies["better"] += decision.verdict == BETTER
        tallies["worse"] += decision.verdict == WORSE
    return {key: count / replications for key, count in tallies.items()}


def designs() -> list[Design]:
    found = []
    for tasks in (164, 40):
        for blocked in (False, True):
            order = "blocked" if blocked else "turn about"
            found += [Design(f"walk 0.3, 12×2, {order}", tasks, 12, 2, blocked, walk=0.3),
                      Design(f"walk 0.3, 1×10, {'blocked' if blocked else 'at once'}",
                             tasks, 1, 10, blocked, walk=0.3)]
        found += [
            Design("walk 0.3, 1×10, blocked, reference", tasks, 1, 10, True, walk=0.3,
                   reference=True),
            Design("walk 0.3, 12×2, blocked, reference", tasks, 12, 2, True, walk=0.3,
                   reference=True),
            Design("shift 0.3 a run, 12×2, turn about", tasks, 12, 2, False, shift=0.3),
            Design("shocks 0.5 a task-run, 12×2, turn about", tasks, 12, 2, False, shocks=0.5),
            Design("outage in one candidate run, 12×2, turn about", tasks, 12, 2, False,
                   outage=True),
            # Power: a true gain of 0.25 logit (about +5 points), no drift.
            Design("+0.25 logit, 1×10, at once", tasks, 1, 10, False, effect=0.25),
            Design("+0.25 logit, 1×10, blocked, reference", tasks, 1, 10, True, effect=0.25,
                   reference=True),
            Design("+0.25 logit, 12×2, turn about", tasks, 12, 2, False, effect=0.25),
        ]
    return found
