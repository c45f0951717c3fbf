"""Whether the compared tasks could have shown the difference: the minimum detectable effect,
the tasks the observed effect needs, and warnings where "no difference detected" would be read
as "no difference" (Miller 2024, power analysis)."""

from __future__ import annotations

from heldout.report.formatting import points
from heldout.report.inputs import Arm
from heldout.report.sections import PerArm, Power
from heldout.statistics.decision import NO_DIFFERENCE, Decision
from heldout.statistics.paired_tests import mcnemar_exact
from heldout.statistics.power import noise_floor
from heldout.statistics.pvalues import p_value_text
from heldout.statistics.rule import ALPHA, CONFIDENCE, POWER, units_for

# A paired test is usually trusted from 10 differing pairs on; with 5 or fewer the exact test
# cannot reach p < 0.05 whichever way they fall (2·0.5^5 = 0.0625).
FEW_DISCORDANT = 10


def paired_sd(arms: PerArm[Arm]) -> float | None:
    """Standard deviation of the per-task differences; None for a single task."""
    per_task = arms.candidate.rates - arms.base.rates
    return float(per_task.std(ddof=1)) if per_task.size > 1 else None


def power_section(arms: PerArm[Arm], decision: Decision,
                  target_effect: float | None = None) -> Power:
    """The verdict's own minimum detectable effect (heldout.statistics.decision: the paired sd
    over its units, the run-level drift, the betting interval's width below 100 units), the
    tasks or groups the observed difference, and `target_effect` if given, would need; with
    reruns, the seed's noise floor beside them, as information (heldout.statistics.power.
    NoiseFloor)."""
    tasks = len(arms.base.rates)
    effect = decision.difference.estimate
    sd = paired_sd(arms) or 0.0
    spread = sd > 0
    detectable = decision.support.mde

    def needed(target: float) -> int | None:
        return units_for(target, decision.support.unit_sd, decision.drift,
                         decision.test.nonzero_units / max(1, decision.test.units))

    warnings = []
    if not spread:
        warnings.append(
            "Every task has the same difference, so the paired standard deviation is 0 and "
            "power cannot be estimated from these tasks."
        )
    # The deciding test flips the signs of the tasks (or groups) that differ at all: with m
    # of them its smallest reachable p is 2·0.5^m, McNemar's with m discordant pairs.
    discordant = decision.test.nonzero_units
    if discordant < FEW_DISCORDANT:
        smallest_p = mcnemar_exact(0, discordant).pvalue
        warnings.append(
            f"Underpowered: only {discordant} task(s) or group(s) differ at all between the "
            f"arms (fewer than {FEW_DISCORDANT}); with {discordant} the paired test can reach "
            f"at best {p_value_text(smallest_p)}."
        )
    below_mde = detectable is not None and abs(effect) < detectable
    if below_mde and decision.verdict == NO_DIFFERENCE:
        warnings.append(
            f"The observed difference ({points(effect)} points) is smaller than the minimum "
            f"detectable effect ({100 * detectable:.1f} points): \"no difference detected\" "
            "here is not evidence that there is none."
        )
    return Power(
        power=POWER,
        alpha=ALPHA,
        tasks=tasks,
        paired_sd=sd if spread else None,
        mde=detectable,
        observed_effect=effect,
        required_tasks=needed(effect) if spread and effect else None,
        underpowered=discordant < FEW_DISCORDANT or below_mde,
        warnings=warnings,
        target_effect=target_effect,
        target_units=needed(target_effect) if target_effect else None,
        noise_floor=None if decision.drift is None else noise_floor(decision.drift, CONFIDENCE),
    )
