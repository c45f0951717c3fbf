"""Whether the test split is worth spending on the selected candidate, decided on the
validation split before the lock opens: the gates that plan (too few tasks or groups, too few
tasks that can move, a base too near the ceiling, a gain below what the verdict can detect)
belong before the one look, not after it, where they can only void what was spent (issues 24
and 41).

`params.test.spend` overrides them for one candidate with a reason, which the ledger records
with the access, as a re-access reason is.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from heldout.statistics.decision import Decision
from heldout.statistics.rule import MIN_FAILURE_CAPABLE, MIN_UNITS


class SpendConfig(BaseModel):
    """`params.test.spend`: open the test split for the selected candidate, if `candidates`
    names it, though the plan says it will not decide, because `reason`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidates: list[str] = []
    reason: str = ""

    def names(self, candidate: str) -> bool:
        return candidate in self.candidates and bool(self.reason.strip())


@dataclass(frozen=True)
class SpendPlan:
    """The selected candidate against the base on the validation split (`val`, decided by the
    verdict's rule) and the tasks of the test set the access would open (the split's count)."""

    val: Decision
    test_tasks: int

    @property
    def failure_capable(self) -> float:
        """The test tasks either arm would fail at least once, at val's share of them: the
        verdict counts them on the test set, which the plan may not read."""
        support = self.val.support
        return support.failure_capable * self.test_tasks / max(support.tasks, 1)


def plan_shortfalls(plan: SpendPlan) -> list[str]:
    """Why the test split would not decide for this candidate, judged by its comparison with
    the base on the validation split: the same rule, the same units."""
    support, gain = plan.val.support, plan.val.difference.estimate
    shortfalls = []
    if min(support.tasks, support.groups) < MIN_UNITS:
        shortfalls.append(f"val has {support.tasks} tasks in {support.groups} groups, fewer "
                          f"than {MIN_UNITS}")
    if plan.failure_capable < MIN_FAILURE_CAPABLE:
        shortfalls.append(f"{support.failure_capable} of {support.tasks} val tasks are ones "
                          f"either arm ever fails: about {plan.failure_capable:.0f} of the "
                          f"test's {plan.test_tasks}, fewer than {MIN_FAILURE_CAPABLE}")
    headroom = 1 - support.base_pass_at_1
    if support.mde is not None and headroom < 2 * support.mde:
        shortfalls.append(f"the base's val pass@1 leaves {100 * headroom:.1f} points to gain, "
                          f"less than twice the verdict's minimum detectable effect on val "
                          f"({100 * support.mde:.1f} points)")
    if support.mde is None or gain < support.mde:
        detectable = ("cannot be estimated" if support.mde is None
                      else f"is {100 * support.mde:.1f} points")
        shortfalls.append(f"its val gain over the base is {100 * gain:+.1f} points and the "
                          f"verdict's minimum detectable effect on val {detectable}")
    return shortfalls


def spend_refusal(plan: SpendPlan, candidate: str, spend: SpendConfig) -> str | None:
    """Why the test split must stay closed for `candidate`, or None: the plan falls short and
    params.test.spend does not name this candidate with a reason."""
    shortfalls = plan_shortfalls(plan)
    if not shortfalls or spend.names(candidate):
        return None
    named = (f"; params.test.spend names {', '.join(spend.candidates)}, not {candidate}"
             if spend.candidates and candidate not in spend.candidates else "")
    return (f"the plan says the test split would not decide for {candidate}: "
            + "; ".join(shortfalls) + named
            + f". Harden or grow the set, or spend it anyway: params.test.spend.candidates: "
              f"[{candidate}] with a reason")


def spent_reason(plan: SpendPlan, candidate: str, spend: SpendConfig) -> str:
    """The reason the ledger records for opening against the plan, or "" when the plan held
    (a spend named in advance but not needed spends nothing)."""
    return spend.reason.strip() if plan_shortfalls(plan) and spend.names(candidate) else ""
