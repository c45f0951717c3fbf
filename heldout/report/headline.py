"""The report's headline section: the verdict line first, then the numbers in one table with
no method in it (so no interval wraps), then why, then how, each method stated once."""

from __future__ import annotations

from heldout.report.blocks import Block, Paragraph, Section, Table
from heldout.report.contamination import contamination_words
from heldout.report.core import Report
from heldout.report.formatting import interval_percent, interval_points, percent, points
from heldout.report.verdict_words import verdict_line
from heldout.statistics.pvalues import p_value_text


def headline_section(report: Report) -> Section:
    """The verdict line first, then the numbers in one table with no method in it (so no
    interval wraps), then why, then how: each method stated once."""
    names, headline = report.names, report.headline
    decision = headline.decision
    difference = decision.difference
    arm_rows = [[name, percent(interval.estimate), interval_percent(interval.low, interval.high)]
                for name, interval in zip(names, headline.pass_at_1, strict=True)]
    difference_row = [f"difference ({names.candidate} − {names.base})",
                      f"{points(difference.estimate)} points",
                      interval_points(difference.low, difference.high)]
    blocks: list[Block] = [
        Paragraph(verdict_line(names, headline.pass_at_1, decision), "verdict"),
        *(Paragraph(text, "warning") for text in headline.warnings),
        Table(["", "pass@1", "95% interval"], [*arm_rows, difference_row]),
        Paragraph(f"Why: {headline.reason}."),
        Paragraph(_how(report)),
        Paragraph(_mcnemar(report)),
        *(Paragraph(text, tone) for text, tone in contamination_words(
            report.contamination, names, report.tasks.compared)),
        Paragraph(f"Rule: {headline.rule}."),
        *([Paragraph(headline.claim)] if headline.claim else []),
        *(Paragraph(text, "note") for text in headline.notes),
    ]
    return Section("headline", "Headline", blocks)


def _how(report: Report) -> str:
    """What was compared and by which methods, once each."""
    names, headline = report.names, report.headline
    deciding, difference = headline.decision.test, headline.decision.difference
    test_version = ((report.protocol or {}).get("split") or {}).get("test_version")
    arm_methods = sorted({_method(interval.method) for interval in headline.pass_at_1})
    standard_error = headline.standard_error
    return (
        f"How: {names.candidate} against {names.base} on {report.tasks.compared} tasks, "
        f"{_episodes(report)}"
        + (f", test set {test_version}" if test_version else "")
        + f". Decided by {deciding.method} on the per-task differences of pass rates over "
        f"every episode ({deciding.nonzero_units} of {deciding.units} "
        f"{'groups' if 'group' in deciding.method else 'tasks'} differ): two-sided "
        f"{deciding.printed_p_value}. The difference's interval: "
        f"{_interval_method(difference.method, deciding.method)}"
        + (f", standard error {100 * standard_error:.1f} points" if standard_error is not None
           else "")
        + f"; each arm's: {', '.join(arm_methods)}."
    )


def _interval_method(interval: str, deciding: str) -> str:
    """The interval's method, or "the bootstrap-t's" where the deciding test already named
    it, so that no method is described twice."""
    for shared in ("bootstrap-t", "newcombe paired score"):
        if interval.startswith(shared) and deciding.startswith(shared):
            widened = interval.partition(", widened to ")[2]
            if widened.removeprefix("the ").split(" (")[0] in deciding:
                widened = "the betting test's"
            return f"the {shared}'s" + (f", widened to {widened}" if widened else "")
    return ("" if "paired" in interval else "paired ") + _method(interval)


def _mcnemar(report: Report) -> str:
    names, headline = report.names, report.headline
    test = headline.decision.mcnemar
    return (f"Exact McNemar test on sample {headline.sample} (reported, not deciding): b = "
            f"{test.b} ({names.base} passes, {names.candidate} fails), c = {test.c} "
            f"({names.candidate} passes, {names.base} fails); two-sided "
            f"{p_value_text(test.pvalue)}, mid-{p_value_text(test.midp)}.")


def _episodes(report: Report) -> str:
    """Episodes per task, arm by arm only where the arms differ."""
    counts = report.tasks.episodes_per_task.map(
        lambda span: str(span.min) if span.min == span.max else f"{span.min} to {span.max}"
    )
    if counts.base == counts.candidate:
        return f"{counts.base} episode{'' if counts.base == '1' else 's'} per task"
    return "episodes per task: " + ", ".join(
        f"{name} {count}" for name, count in zip(report.names, counts, strict=True)
    )


def _method(method: str) -> str:
    """The method's name for a reader: the older internal names spelt out, the rest as given."""
    return {
        "bootstrap-indices": "task bootstrap",
        "bootstrap-multinomial": "task bootstrap",
        "clopper-pearson": "exact Clopper-Pearson bound",
    }.get(method, method)
