"""The verdict in words: the rule as it was applied, why the verdict is what it is, and what
it rests on. Only wording: heldout.statistics.decision decides."""

from __future__ import annotations

import math

from heldout.report.formatting import interval_points
from heldout.report.protocol import ProtocolCard
from heldout.statistics.decision import ALPHA, CONFIDENCE, NOT_DECIDABLE, Decision
from heldout.statistics.pvalues import alpha_text


def rule_words(decision: Decision) -> str:
    drift = decision.drift
    return (
        f'"better" or "worse" only when the paired test ({decision.test.method}) rejects at '
        f"{alpha_text(ALPHA)} and the {CONFIDENCE:.0%} interval of the difference excludes 0"
        + (f", both carrying the spread of {drift.n_runs} paired runs of each arm" if drift
           else " (no reruns were given, so no run-level drift is carried)")
        + ', and no gate voids the comparison (fewer than 30 tasks or groups, fewer than 30 '
        "tasks either arm ever fails or a ceiling below twice the minimum detectable effect, "
        "one arm truncated more than twice as often, arms not run alike); otherwise \"no "
        'difference detected", or "not decidable" naming the gate. A significant "worse" is '
        "reported through any gate but arms not run alike. pass@1 is the one comparison fixed "
        "in advance; every other number is secondary"
    )


def reason_words(decision: Decision) -> str:
    """Why the verdict is what it is: the gates that fired, or every condition met."""
    difference, test = decision.difference, decision.test
    shown = f"{interval_points(difference.low, difference.high)} points"
    holding = [gate for gate in decision.gates if not gate.voids and not gate.warns]
    caveats = "".join(f"; despite: {caveat}" for caveat in decision.caveats)
    if decision.verdict.startswith(NOT_DECIDABLE):
        # The verdict itself names the first voiding gate: the reason adds the others.
        also = [f"also {gate.message}" for gate in decision.gates if gate.voids][1:]
        statistics = ("by the statistics alone: " + "; ".join(g.message for g in holding)
                      if holding else f"by the statistics alone it would be {decision.claim}")
        return "; ".join([*also, statistics])
    if holding:
        return "; ".join(gate.message for gate in holding) + f" (interval {shown})" + caveats
    return (f"{test.method}: {test.printed_p_value}, the interval {shown} excludes 0"
            + caveats)


def support_words(decision: Decision, protocol: ProtocolCard | None) -> str:
    """What the verdict rests on, beside it: tasks, groups, ties, power, drift, accesses."""
    support, drift = decision.support, decision.drift
    accesses = ((protocol or {}).get("test_access") or {}).get("opened")
    return (
        f"Rests on {support.tasks} tasks in {support.groups} groups, {support.episodes} "
        f"episode(s) each{f' ({drift.n_runs} runs pooled)' if drift else ''}; ties: "
        f"{support.both_pass} pass in both, {support.both_fail} fail in both; minimum "
        "detectable effect of the verdict "
        + (f"{100 * support.mde:.1f} points" if support.mde is not None else "not estimable")
        + "; run-level drift "
        + (f"measured by {drift.n_runs} paired runs of each arm (their difference's sd "
           f"{100 * drift.run_sd:.1f} points: {100 * math.sqrt(drift.variance):.1f} carried, "
           f"on {drift.df} df)" if drift else "not measured")
        + (f"; test accesses so far: {accesses}" if accesses is not None else "")
        + "; gates fired: " + (", ".join(gate.name for gate in decision.gates) or "none") + "."
    )
