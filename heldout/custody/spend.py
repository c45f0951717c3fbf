"""Whether the test split is worth spending on the selected candidate, decided on the
validation split before the lock opens: the gates that plan (too few tasks or groups, too few
tasks that can move, a gain below what the verdict can detect) belong before the one look,
not after it, where they can only void what was spent (issue 24).

`params.test.spend` overrides them for one candidate with a reason, which the ledger records
with the access, as a re-access reason is.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from heldout.statistics.decision import MIN_UNITS, WARN_FAILURE_CAPABLE, Decision


class SpendConfig(BaseModel):
    """`params.test.spend`: open the test split for the selected candidate, if `candidates`
    names it, though the plan says it will not decide, because `reason`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    candidates: list[str] = []
    reason: str = ""

    def names(self, candidate: str) -> bool:
        return candidate in self.candidates and bool(self.reason.strip())


def plan_shortfalls(plan: Decision) -> list[str]:
    """Why the test split would not decide for this candidate, judged by its comparison with
    the base on the validation split: the same rule, the same units."""
    support, gain = plan.support, plan.difference.estimate
    shortfalls = []
    if min(support.tasks, support.groups) < MIN_UNITS:
        shortfalls.append(f"val has {support.tasks} tasks in {support.groups} groups, fewer "
                          f"than {MIN_UNITS}")
    if support.failure_capable < WARN_FAILURE_CAPABLE:
        shortfalls.append(f"only {support.failure_capable} val tasks that either arm ever "
                          f"fails, fewer than {WARN_FAILURE_CAPABLE}")
    if support.mde is None or gain < support.mde:
        detectable = ("cannot be estimated" if support.mde is None
                      else f"is {100 * support.mde:.1f} points")
        shortfalls.append(f"its val gain over the base is {100 * gain:+.1f} points and the "
                          f"verdict's minimum detectable effect on val {detectable}")
    return shortfalls


def spend_refusal(plan: Decision, candidate: str, spend: SpendConfig) -> str | None:
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


def spent_reason(plan: Decision, candidate: str, spend: SpendConfig) -> str:
    """The reason the ledger records for opening against the plan, or "" when the plan held
    (a spend named in advance but not needed spends nothing)."""
    return spend.reason.strip() if plan_shortfalls(plan) and spend.names(candidate) else ""
