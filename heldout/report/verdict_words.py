"""The verdict in words: the rule as it was applied, why the verdict is what it is, and what
it rests on. Only wording: heldout.statistics.decision decides."""

from __future__ import annotations

import math

from heldout.report.formatting import interval_points, percent, points
from heldout.report.protocol import ProtocolCard
from heldout.report.sections import PerArm
from heldout.statistics.decision import (
    ALPHA,
    CONFIDENCE,
    INTERVAL_INCLUDES_ZERO,
    NOT_DECIDABLE,
    TEST_DOES_NOT_REJECT,
    Decision,
)
from heldout.statistics.intervals import Interval
from heldout.statistics.pvalues import alpha_text

# The headline's first line, the same in the terminal, report.md and report.html: what a
# person reads in ten seconds (issue 39).
VERDICT_LINE_LIMIT = 160


def short_p(decision: Decision) -> str:
    """The deciding p as "p = 0.013" or "p < 0.0002": its resolution is the deciding tests'
    own draws, which their method names."""
    return decision.test.printed_p_value.split(" (")[0]


def verdict_line(names: PerArm[str], pass_at_1: PerArm[Interval], decision: Decision) -> str:
    """"Better: step_80 67.8% vs base 39.6%, +28.3 points [+14.3, +40.1], p < 0.0002 — 67
    tasks × 40 episodes", in at most VERDICT_LINE_LIMIT characters (long names are cut)."""
    verdict, support, difference = decision.verdict, decision.support, decision.difference
    word = verdict[0].upper() + verdict[1:]
    if verdict.startswith(NOT_DECIDABLE):
        word = f"Not decidable ({next(gate.name for gate in decision.gates if gate.voids)})"
    units = f"{support.tasks} tasks" + (f" in {support.groups} groups"
                                        if support.groups < support.tasks else "")
    episodes = f"{support.episodes} episode{'' if support.episodes == 1 else 's'}"

    def line(base: str, candidate: str) -> str:
        return (f"{word}: {candidate} {percent(pass_at_1.candidate.estimate)} vs {base} "
                f"{percent(pass_at_1.base.estimate)}, {points(difference.estimate)} points "
                f"{interval_points(difference.low, difference.high)}, {short_p(decision)} — "
                f"{units} × {episodes}")

    full = line(*names)
    over = len(full) - VERDICT_LINE_LIMIT
    if over <= 0:
        return full
    width = max(8, max(map(len, names)) - over)  # the longer name gives way first
    while len(shown := line(*(_cut(name, width) for name in names))) > VERDICT_LINE_LIMIT \
            and width > 8:
        width -= 1
    return shown


def _cut(name: str, width: int) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


def rule_words(decision: Decision) -> str:
    drift = decision.drift
    return (
        f'"better" or "worse" only when the paired test rejects at '
        f"{alpha_text(ALPHA)} and the {CONFIDENCE:.0%} interval of the difference excludes 0"
        + (f", both carrying the spread of {drift.n_runs} paired runs of each arm" if drift
           else " (no reruns were given, so no run-level drift is carried)")
        + ', and no gate voids the comparison (fewer than 30 tasks or groups, fewer than 30 '
        "tasks either arm ever fails or a ceiling below twice the minimum detectable effect, "
        "one arm truncated more than twice as often, arms not run alike, arms run at different "
        "times with no reference beside them; with a reference, a claim must also clear its "
        'movement); otherwise "no difference detected", or "not decidable" naming the gate. A '
        'significant "worse" is reported through any gate but arms not run alike or at '
        "different times. pass@1 is the one comparison fixed in advance; every other number "
        "is secondary"
    )


def reason_words(decision: Decision) -> str:
    """Why the verdict is what it is, in words that add to the first line: the gates that
    fired (a holding gate by its name and the p), or the conditions met, and the caveats."""
    holding = [_holding(gate.name, gate.message, decision) for gate in decision.gates
               if not gate.voids and not gate.warns]
    caveats = "".join(f"; despite: {caveat}" for caveat in decision.caveats)
    if decision.verdict.startswith(NOT_DECIDABLE):
        voided = [gate.message for gate in decision.gates if gate.voids]
        statistics = ("by the statistics alone, " + " and ".join(holding) if holding
                      else f"by the statistics alone it would be {decision.claim}")
        return "; ".join([*voided, statistics])
    if holding:
        return " and ".join(holding) + caveats
    return (f"the paired test rejects at {alpha_text(ALPHA)} and the {CONFIDENCE:.0%} interval "
            "excludes 0" + caveats)


def _holding(name: str, message: str, decision: Decision) -> str:
    if name == TEST_DOES_NOT_REJECT:
        return f"the paired test does not reject ({short_p(decision)} > {alpha_text(ALPHA)})"
    if name == INTERVAL_INCLUDES_ZERO:
        return f"the {CONFIDENCE:.0%} interval includes 0"
    return message


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


def claim_words(names: PerArm[str], decision: Decision, protocol: ProtocolCard | None) -> str:
    """What the verdict is a claim about, and what it is not: two fixed checkpoints, on tasks
    like the compared ones; never the recipe that trained them (000 §17.4)."""
    support, split = decision.support, (protocol or {}).get("split") or {}
    units = f"{support.tasks} tasks" + (f" in {support.groups} groups"
                                        if support.groups < support.tasks else "")
    drawn = (f"the test split's {units}, dealt from the task set by a salted hash of each "
             "task's group: new groups of the same kinds of task, not new kinds"
             if split.get("test_version") else f"the {units} both files hold")
    if str(split.get("kind", "")).startswith("family"):  # families held out (issue 42)
        drawn = (f"the test split's {units}, a {split['kind']} split: whole families no earlier "
                 "stage saw beside new groups of seen ones, each measured apart under By family")
    return (f"The claim: {names.candidate} against {names.base}, these two checkpoints as "
            f"they are, on tasks like these ({drawn}). It is not a claim about the training "
            f"recipe that produced {names.candidate}: that needs several training seeds per "
            "arm, each evaluated.")
