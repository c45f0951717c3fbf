"""The paired report: candidate against base on the same tasks, for a person and a machine.

`build_report` turns two rollout tables into a Report (typed sections whose `to_json()` is
report.json; `Report.from_json` reads one back), marking the tasks a `Decontamination` lists;
`write_report` renders it as report.md, one self-contained report.html and figures/*.png.
`heldout compare` is both.
"""

from heldout.report.contamination import Decontamination
from heldout.report.core import Report, build_report
from heldout.report.inputs import ReportInputError, check_rollouts, read_rollouts
from heldout.report.output import headline_markdown, stage_report, write_report
from heldout.report.protocol import ProtocolCard
from heldout.statistics.decision import BETTER, NO_DIFFERENCE, WORSE

__all__ = [
    "BETTER",
    "Decontamination",
    "NO_DIFFERENCE",
    "WORSE",
    "ProtocolCard",
    "Report",
    "ReportInputError",
    "build_report",
    "headline_markdown",
    "check_rollouts",
    "read_rollouts",
    "stage_report",
    "write_report",
]
