"""metrics/test.json: the verdict and the few numbers behind it, for `dvc metrics show` and
`dvc metrics diff`. DVC draws every metrics file as one table with a column per key of all of
them, so the report's 40-odd flat numbers beside the val rows made it 2,600 characters wide;
every number stays in report.json and the report's MLflow run.

No column may share a name with a stage's dependency: DVC's `dvc exp show` keys its table's
columns by name, so the task count once called `tasks`, beside the split stage's `tasks` folder,
showed that folder's hash, and any `--drop` that removed the column crashed DVC 3.67.1
(`ERROR: unexpected error - 'tasks'`)."""

from __future__ import annotations

from heldout.report.core import Report

# The report's flat metric → its column in `dvc metrics show`, short as the val rows' are.
TEST_COLUMNS = {
    "tasks": "test_tasks", "groups": "groups",
    "base_pass_at_1": "base@1", "candidate_pass_at_1": "candidate@1",
    "difference": "diff", "difference_low": "diff_lo", "difference_high": "diff_hi",
    "test_p": "p", "improved": "improved", "regressed": "regressed",
    "flagged_tasks": "flagged", "difference_without_flagged": "diff_unflagged",
}


def test_metrics(report: Report) -> dict[str, str | float | int]:
    """The verdict as the headline words it ("better", "no difference detected", "not
    decidable"), not a code, then its numbers."""
    flat = report.metrics
    return {"verdict": report.verdict.split(":")[0],
            **{column: flat[key] for key, column in TEST_COLUMNS.items() if key in flat}}
