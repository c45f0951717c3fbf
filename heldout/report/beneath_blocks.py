"""The words and tables of the sections that have their own records (issue 41): what each arm
spent beside what it passed, the slices by the base's rate, and best-of-k beside pass@k."""

from __future__ import annotations

from heldout.report.blocks import Block, Paragraph, Subheading, Table
from heldout.report.core import Report
from heldout.report.effort import effort_bounds, effort_number, effort_signed
from heldout.report.formatting import interval_percent, interval_points, percent, points


def effort_blocks(report: Report) -> list[Block]:
    """What each arm spent per episode, beside what it passed."""
    effort, names = report.effort, report.names
    if effort is None:
        return []
    blocks: list[Block] = [Subheading("Effort per episode")]
    if effort.rows:
        blocks.append(Table(
            ["measure", names.base, names.candidate, "ratio", "difference (95% interval)",
             "tasks"],
            [[row.words, effort_number(row.base), effort_number(row.candidate),
              "—" if row.ratio is None else f"{row.ratio:.2f}×",
              f"{effort_signed(row.difference)} {effort_bounds(row)}", str(row.tasks)]
             for row in effort.rows]))
    if effort.not_recorded:
        clocks = (" The test split's result files leave its clocks out (the same results are "
                  "the same bytes): the test stage's MLflow run holds each arm's mean agent and "
                  "judge seconds (effort.*) and data/test/timings.parquet every episode's."
                  if "agent_s" in effort.not_recorded and (report.protocol or {}).get(
                      "test_access") else "")
        blocks.append(Paragraph(f"Not recorded by either arm's rows: "
                                f"{', '.join(effort.not_recorded)}.{clocks}"))
    return blocks


def slices_blocks(report: Report) -> list[Block]:
    """The difference by how often the base passed each task, and the both-fail split."""
    slices, names = report.slices, report.names
    if slices is None:
        return []
    rows = [[row.slice, str(row.tasks),
             "—" if row.base is None else percent(row.base),
             "—" if row.candidate is None else percent(row.candidate),
             "—" if row.difference is None else points(row.difference),
             "unmeasured" if row.low is None else interval_points(row.low, row.high),
             f"{row.improved} / {row.regressed} / {row.tied}"]
            for row in slices.by_base_rate]
    both_fail = slices.both_fail
    tasks = f"{both_fail.tasks} task{'' if both_fail.tasks == 1 else 's'}"
    if both_fail.tasks == 0:
        split = "none"
    elif both_fail.shown_passable is None:
        split = f"{tasks}; passable {both_fail.evidence}"
    else:
        split = (f"{tasks}; {both_fail.shown_passable} shown passable (genuine "
                 f"failures of both arms) and {both_fail.tasks - both_fail.shown_passable} "
                 f"never shown passable (maybe no policy can pass them), by {both_fail.evidence}")
    return [
        Subheading("By how often the base passed"),
        Paragraph(f"Never, sometimes or always passed by {names.base}: {slices.sliced_by}. "
                  "A gain only where the base sometimes passes sharpens what it could already "
                  "do; a gain where it never passes is new reach."),
        Table(["base passed", "tasks", f"{names.base} pass@1", f"{names.candidate} pass@1",
               "difference (points)", "95% interval", "improved / regressed / tied"], rows),
        Paragraph(f"Both fail in every episode: {split}."),
    ]


def best_of_k_blocks(report: Report) -> list[Block]:
    """Best-of-k beside pass@k at the same k, each arm, and best-of-k's paired difference."""
    best, names = report.best_of_k, report.names
    if best is None:
        return [Paragraph("Best-of-k: not computed, no selector accepted any episode of "
                          "either arm (no task has public tests).")] if report.slices else []
    rows = []
    for k_points in zip(*report.pass_at_k.arms, *best.curve.arms, best.curve.difference,
                        strict=True):
        at_k_base, at_k_candidate, best_base, best_candidate, difference = k_points
        rows.append([str(difference.k),
                     *(f"{percent(best_point.interval.estimate)} "
                       f"{interval_percent(best_point.interval.low, best_point.interval.high)}"
                       f" / {percent(at_k.interval.estimate)}"
                       for best_point, at_k in ((best_base, at_k_base),
                                                (best_candidate, at_k_candidate))),
                     f"{points(difference.interval.estimate)} "
                     f"{interval_points(difference.interval.low, difference.interval.high)}"])
    return [
        Paragraph(
            f"Best-of-k submits the first of k episodes that {best.selector_words()} accept "
            f"({percent(best.accepted.base)} of {names.base}'s episodes, "
            f"{percent(best.accepted.candidate)} of {names.candidate}'s) and counts its hidden "
            "result; pass@k counts any passing one, as an oracle would pick. The gap between "
            "them is what the selector misses."),
        Table(["k", f"{names.base} best-of-k / pass@k", f"{names.candidate} best-of-k / pass@k",
               "best-of-k difference (points)"], rows),
    ]
