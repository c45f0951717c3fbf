"""The words and tables of the by-family section (heldout.report.families): the family split
beside the variant split, then each family among the test tasks."""

from __future__ import annotations

from heldout.report.blocks import Paragraph, Section, Subheading, Table
from heldout.report.core import Report
from heldout.report.families import FamilyRow
from heldout.report.formatting import interval_points, percent, points


def _cells(row: FamilyRow) -> list[str]:
    return [str(row.tasks),
            "—" if row.base is None else percent(row.base),
            "—" if row.candidate is None else percent(row.candidate),
            "—" if row.difference is None else points(row.difference),
            "unmeasured" if row.low is None else interval_points(row.low, row.high),
            f"{row.improved} / {row.regressed} / {row.tied}"]


def family_sections(report: Report) -> list[Section]:
    """The section, where the split held families out; none otherwise."""
    by_family, names = report.by_family, report.names
    if by_family is None:
        return []
    measures = ["tasks", f"{names.base} pass@1", f"{names.candidate} pass@1",
                "difference (points)", "95% interval", "improved / regressed / tied"]
    held = ", ".join(by_family.held_out)
    return [Section("by-family", "By family: unseen families and new groups", [
        Paragraph(f"The split held out the families {held} (by {by_family.field}): all their "
                  "tasks are test tasks, unlike any task before the test. The other test tasks "
                  "are new groups of families train and val saw. One checkpoint can score far "
                  "apart on the two, so each is measured alone; the headline pools them."),
        Table(["test tasks", *measures], [[row.name, *_cells(row)] for row in by_family.splits]),
        Paragraph("Each interval resamples the groups inside its row: with few held-out "
                  "families it says how well these families were measured, not how another "
                  "unseen family would fare. Under 3 tasks or in one group: unmeasured.", "note"),
        Subheading(f"Per family ({by_family.field})"),
        Table(["family", "held out", *measures],
              [[row.name, "yes" if row.held_out else "no", *_cells(row)]
               for row in by_family.environments]),
    ])]
