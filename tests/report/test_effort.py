"""Effort beside success (issue 41, item 1): each arm's spend per episode, the paired difference
over tasks or groups, hand-computed; measures a file does not record are said so, never 0 vs 0."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from heldout.report import build_report
from heldout.report.core import Report
from heldout.report.effort import effort_section
from heldout.report.sections import PerArm
from tests.report.test_report import passing, rollouts


def with_effort(table: pd.DataFrame, tokens: dict[str, list[int]], turns: int) -> pd.DataFrame:
    """Each task's episodes spending the listed output tokens, in order."""
    spent = [tokens[task][sample] for task, sample in zip(table["task_id"], table["sample"],
                                                          strict=True)]
    return table.assign(tokens_out=spent, turns=turns, tokens_in=0, agent_s=np.nan)


def test_each_arms_mean_is_over_tasks_and_the_difference_is_paired():
    ids = ["t0", "t1", "t2", "t3"]
    base = pd.DataFrame({"task_id": np.repeat(ids, 2), "sample": [0, 1] * 4,
                         "tokens_out": [100, 300, 200, 200, 50, 50, 400, 0], "turns": 1})
    candidate = base.assign(tokens_out=[300, 300, 200, 600, 50, 150, 400, 400], turns=1)
    effort = effort_section(PerArm(base, candidate), ids)
    (row,) = [row for row in effort.rows if row.measure == "tokens_out"]
    # per task: base 200, 200, 50, 200 -> 162.5; candidate 300, 400, 100, 400 -> 300
    assert (row.base, row.candidate, row.tasks) == (162.5, 300.0, 4)
    assert row.difference == pytest.approx(137.5) and row.ratio == pytest.approx(300 / 162.5)
    assert row.low < row.difference < row.high
    difference = np.array([100, 200, 50, 200], float)
    scipy_bca = stats.bootstrap((difference,), np.mean, n_resamples=2000, method="BCa",
                                random_state=np.random.default_rng(0)).confidence_interval
    assert row.low == pytest.approx(scipy_bca.low, abs=25) and row.high == pytest.approx(
        scipy_bca.high, abs=25)
    turns = next(row for row in effort.rows if row.measure == "turns")
    assert (turns.difference, turns.ratio) == (0.0, 1.0)
    assert set(effort.not_recorded) == {"tokens_in", "tool_calls", "agent_s", "exec_cpu_s",
                                        "cost_usd"}


def test_groups_are_the_units_of_the_interval_and_a_missing_value_leaves_its_task_out():
    ids = [f"t{i}" for i in range(6)]
    base = pd.DataFrame({"task_id": ids, "sample": 0, "cost_usd": [1.0] * 6})
    candidate = base.assign(cost_usd=[2.0, 2.0, 3.0, 3.0, np.nan, 5.0])
    groups = {"t0": "a", "t1": "a", "t2": "b", "t3": "b", "t4": "c", "t5": "c"}
    (row,) = effort_section(PerArm(base, candidate), ids, groups).rows
    assert row.tasks == 5 and row.candidate == pytest.approx(3.0)
    assert "3 groups of 5 tasks" in row.method
    (alone,) = effort_section(PerArm(base, candidate), ["t0"]).rows
    assert (alone.low, alone.high, alone.method) == (None, None, "one unit: no interval")


def test_the_report_shows_effort_in_the_headline_block_the_tables_and_the_metrics(tmp_path):
    base = rollouts("base", passing(40, range(10)))
    candidate = rollouts("step_9", passing(40, range(30)))
    tokens = {task: [500] for task in base["task_id"]}
    report = build_report(with_effort(base, tokens, 2),
                          with_effort(candidate, {t: [1150] for t in tokens}, 3))
    row = next(row for row in report.effort.rows if row.measure == "tokens_out")
    assert (row.base, row.candidate, row.ratio) == (500.0, 1150.0, 2.3)
    line = next(note for note in report.headline.notes if note.startswith("Effort per episode"))
    assert line.startswith("Effort per episode, step_9 against base: output tokens 2.30x "
                           "(1,150 vs 500, +650 ")
    assert "turns 1.50x (3 vs 2, +1 " in line
    assert report.metrics["candidate_tokens_out"] == 1150.0
    assert report.metrics["tokens_out_difference"] == 650.0
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.effort == report.effort
    from heldout.report.output import write_report

    write_report(report, tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "### Effort per episode" in markdown
    assert "| output tokens | 500 | 1,150 | 2.30× | +650 " in markdown
    assert "Not recorded by either arm's rows: tokens_in" in markdown


def test_a_report_json_from_before_effort_reads_back_without_it(tmp_path: Path):
    report = build_report(rollouts("base", passing(40, range(10))),
                          rollouts("step_9", passing(40, range(30))))
    data = report.to_json()
    del data["effort"]
    assert Report.from_json(data).effort is None
