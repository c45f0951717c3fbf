"""The report's by_date section (issue 42): the compared tasks split by release date at the
later of the two arms' data cutoffs, each part's rates, paired difference and interval, the
undated counted apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from heldout.report import build_report
from heldout.report.by_date import recorded_dates
from heldout.report.core import Report
from heldout.statistics.bca import difference_interval
from tests.report.test_report import full_markdown, rollouts

T, F = True, False
# task: (released, base's two episodes, candidate's two episodes)
CASE = {
    "a": ("2024-01-10", [T, T], [T, T]),  # before: 1.0 → 1.0, difference 0
    "b": ("2024-05-31", [F, F], [T, F]),  # before: 0 → 0.5, +0.5
    "c": ("2024-06-01", [T, F], [T, T]),  # on the cutoff counts as before: 0.5 → 1, +0.5
    "d": ("2024-06-02", [T, T], [F, F]),  # after: 1 → 0, -1
    "e": ("2024-09-15", [F, F], [T, T]),  # after: 0 → 1, +1
    "f": ("2025-01-01", [T, F], [T, F]),  # after: 0.5 → 0.5, 0
    "g": (None, [F, F], [T, T]),  # no date: counted, not placed
}


def case_report(cutoffs: dict) -> Report:
    access = {"dates": {"released": {t: day for t, (day, _, _) in CASE.items() if day},
                        "data_cutoff": cutoffs}}
    return build_report(rollouts("base", {t: b for t, (_, b, _) in CASE.items()}),
                        rollouts("cand", {t: c for t, (_, _, c) in CASE.items()}),
                        dates=recorded_dates(access))


def test_the_tasks_split_at_the_later_cutoff_with_each_parts_difference_and_interval():
    report = case_report({"base": "2024-03-01", "candidate": "2024-06-01"})
    by_date = report.by_date
    assert by_date.cutoff == "2024-06-01" and by_date.undated == 1
    assert "later of the two arms' data cutoffs (base 2024-03-01, cand 2024-06-01)" in \
        by_date.cutoff_from
    before, after = by_date.parts
    assert (before.slice, before.tasks, after.slice, after.tasks) == ("on or before", 3,
                                                                      "after", 3)
    assert (before.base, before.candidate) == pytest.approx((0.5, 2.5 / 3))
    assert before.difference == pytest.approx(1 / 3)
    assert (after.base, after.candidate, after.difference) == pytest.approx((0.5, 0.5, 0.0))
    for part, differences in ((before, [0, 0.5, 0.5]), (after, [-1, 1, 0])):
        expected = difference_interval(np.array(differences, float), seed=0)
        assert (part.low, part.high) == pytest.approx((expected.low, expected.high))
        assert part.method == expected.method
    assert report.metrics["by_date_after_tasks"] == 3
    assert report.metrics["by_date_on_or_before_difference"] == pytest.approx(1 / 3)
    markdown = full_markdown(report)
    assert "By release date" in markdown and "on or before 2024-06-01" in markdown
    assert "1 compared task carries no release date and is in neither part" in markdown
    assert Report.from_json(json.loads(json.dumps(report.to_json()))).by_date == by_date


def test_one_arms_cutoff_alone_and_a_part_under_three_tasks_is_unmeasured():
    by_date = case_report({"base": "2024-03-01", "candidate": None}).by_date
    assert by_date.cutoff == "2024-03-01" and by_date.cutoff_from.startswith("base's data cutoff")
    before, after = by_date.parts
    assert (before.tasks, before.difference, before.low) == (1, pytest.approx(0.0), None)
    assert "unmeasured" in before.method
    # b, c, d, e, f: (0.5 + 0.5 - 1 + 1 + 0) / 5
    assert (after.tasks, after.difference) == (5, pytest.approx(0.2))


def test_no_cutoff_or_no_date_gives_no_section():
    assert case_report({"base": None, "candidate": None}).by_date is None
    assert build_report(rollouts("base", {"a": [T]}), rollouts("cand", {"a": [F]})).by_date is None


def test_compare_splits_by_date_from_the_task_file_and_the_cutoffs_given(tmp_path):
    from tests.conftest import task_record, write_jsonl
    from tests.report.test_compare_cli import heldout

    base, candidate = tmp_path / "A.parquet", tmp_path / "B.parquet"
    rollouts("base", {t: b for t, (_, b, _) in CASE.items()}).to_parquet(base)
    rollouts("cand", {t: c for t, (_, _, c) in CASE.items()}).to_parquet(candidate)
    tasks = write_jsonl(tmp_path / "tasks.jsonl", [
        task_record(task, **({"released": day} if day else {}))
        for task, (day, _, _) in CASE.items()])
    done = heldout("compare", base, candidate, "--out", tmp_path / "out", "--tasks", tasks,
                   "--cutoff-a", "2024-03-01", "--cutoff-b", "2024-06-01")
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out" / "report.json").read_text())["by_date"]
    expected = case_report({"base": "2024-03-01", "candidate": "2024-06-01"}).by_date
    assert written["cutoff"] == "2024-06-01" and written["undated"] == 1
    assert [(p["slice"], p["tasks"]) for p in written["parts"]] == [("on or before", 3),
                                                                    ("after", 3)]
    assert [p["difference"] for p in written["parts"]] == pytest.approx(
        [p.difference for p in expected.parts])
    # A cutoff with nothing dated to split, and a cutoff that is no date: exit 2, one line.
    undated = heldout("compare", base, candidate, "--out", tmp_path / "none",
                      "--cutoff-b", "2024-06-01")
    assert undated.returncode == 2 and "no compared task has one" in undated.stderr
    wrong = heldout("compare", base, candidate, "--out", tmp_path / "none",
                    "--tasks", tasks, "--cutoff-a", "June 2024")
    assert wrong.returncode == 2 and "a data cutoff must be a date written YYYY-MM-DD" in \
        wrong.stderr
    assert not (tmp_path / "none").exists()
