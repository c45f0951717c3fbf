"""The report's contamination part (issue 42): the leakage channels decontamination checked,
each with what it compared, its threshold and what it found, and those it names as checked
elsewhere; and the compared tasks by release date against the arms' data cutoffs."""

from __future__ import annotations

from heldout.report.blocks import Block, Paragraph, Section, Subheading, Table
from heldout.report.core import Report
from heldout.report.formatting import interval_points, percent, points


def _found(row: dict) -> str:
    if not row.get("checked"):
        return "—"
    matches, flagged = row["matches"], row["flagged"]
    return (f"{matches['val']} / {matches['test']} matches; {flagged['val']} / "
            f"{flagged['test']} eval items a corpus holds")


def channels_blocks(report: Report) -> list[Block]:
    """One row per leakage channel: checked here or where it is checked."""
    channels = [] if report.contamination is None else report.contamination.channels
    if not channels:
        return []
    return [
        Subheading("Leakage channels"),
        Table(["channel", "compared", "threshold", "found (val / test)", "where"],
              [[row["channel"], row["compared"], row["threshold"], _found(row), row["where"]]
               for row in channels]),
    ]


def by_date_blocks(report: Report) -> list[Block]:
    """The compared tasks released on or before the cutoff and after it, each part's
    difference."""
    by_date, names = report.by_date, report.names
    if by_date is None:
        return []
    rows = [[f"{row.slice} {by_date.cutoff}", str(row.tasks),
             "—" if row.base is None else percent(row.base),
             "—" if row.candidate is None else percent(row.candidate),
             "—" if row.difference is None else points(row.difference),
             "unmeasured" if row.low is None else interval_points(row.low, row.high)]
            for row in by_date.parts]
    one = by_date.undated == 1
    undated = (f" {by_date.undated} compared task{'' if one else 's'} "
               f"{'carries' if one else 'carry'} no release date and "
               f"{'is' if one else 'are'} in neither part." if by_date.undated else "")
    return [
        Subheading("By release date"),
        Paragraph(f"Split at {by_date.cutoff}, {by_date.cutoff_from}. A task released after a "
                  "checkpoint's cutoff cannot be in its training data; the difference there "
                  f"is the one no leak of the task itself explains.{undated}"),
        Table(["released", "tasks", f"{names.base} pass@1", f"{names.candidate} pass@1",
               "difference (points)", "95% interval"], rows),
    ]


def contamination_part(report: Report) -> Section | None:
    """The part, or None when there is nothing to put in it."""
    blocks = channels_blocks(report) + by_date_blocks(report)
    return Section("contamination", "Contamination", blocks) if blocks else None
