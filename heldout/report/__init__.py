"""The paired report: candidate against base on the same tasks, for a person and a machine.

`build_report` turns two rollout tables into a dict (report.json); `write_report` renders it
as report.md, one self-contained report.html and figures/*.png. `heldout compare` is both.
"""

from heldout.report.core import BETTER, NO_DIFFERENCE, WORSE, ProtocolCard, build_report
from heldout.report.inputs import ReportInputError, check_rollouts, read_rollouts
from heldout.report.output import headline_markdown, stage_report, write_report

__all__ = [
    "BETTER",
    "NO_DIFFERENCE",
    "WORSE",
    "ProtocolCard",
    "ReportInputError",
    "build_report",
    "headline_markdown",
    "check_rollouts",
    "read_rollouts",
    "stage_report",
    "write_report",
]
