"""Contamination in the verdict: test tasks a training corpus holds a copy of are marked in the
headline and the per-task table, and the headline's numbers are given again without them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.index import Match
from heldout.contamination.report import build_report as build_decontamination_report
from heldout.contamination.scan import SourceScan
from heldout.contamination.sources import TRAIN_SPLIT_SOURCE
from heldout.files import json_bytes
from heldout.report import Decontamination, Report, build_report, headline_markdown, write_report
from heldout.report.formatting import interval_percent, interval_points, percent, points
from heldout.statistics.bca import arm_interval
from heldout.statistics.betting import betting_interval
from heldout.statistics.studentized import studentized_test
from stages import catalog
from stages.report import read_decontamination
from tests.report.test_report import full_markdown, rollouts
from tests.test_catalog import stage_body

EPISODES = 4
FLAGGED = {"t010": ["code", "exact"], "t011": ["ngram"], "t031": ["minhash"]}


def outcomes(passing_tasks: range, partial: dict[int, int]) -> dict[str, list[bool]]:
    """40 tasks of 4 episodes: those in `passing_tasks` pass every episode, `partial[i]` gives
    task i that many passes, the rest fail."""
    passes = {i: EPISODES for i in passing_tasks} | partial
    return {f"t{i:03d}": [j < passes.get(i, 0) for j in range(EPISODES)] for i in range(40)}


@pytest.fixture(scope="module")
def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    # The candidate fixes t010-t015 (t010 and t011 among them: the flagged copies it may have
    # memorized), passes half of t031 and loses an episode of t000.
    base = rollouts("base", outcomes(range(10), {31: 1}))
    candidate = rollouts("cand", outcomes(range(1, 16), {0: 3, 31: 2}))
    return base, candidate


@pytest.fixture(scope="module")
def flagged_report(tables) -> Report:
    return build_report(*tables, decontamination=Decontamination("flag", FLAGGED))


def test_the_numbers_without_the_flagged_tasks_are_those_of_the_filtered_tables(
    tables, flagged_report: Report
):
    without = flagged_report.contamination.without_flagged
    assert without.tasks == 37
    # By hand, less t010, t011 and t031: the base passes t000-t009; the candidate t001-t015
    # less t010 and t011, and 3 of 4 episodes of t000.
    base_rate, candidate_rate = 10 / 37, (13 + 0.75) / 37
    assert without.pass_at_1.base.estimate == pytest.approx(base_rate)
    assert without.pass_at_1.candidate.estimate == pytest.approx(candidate_rate)
    assert without.difference.estimate == pytest.approx(candidate_rate - base_rate)

    # The same estimators on the tables with the flagged tasks removed before anything else:
    # each arm's pass@1 by arm_interval (Wilson over tasks for the base, whose 37 rates are all
    # 0 or 1; BCa for the candidate, at 3/4 on t000), the difference by the bootstrap-t over
    # the tasks' differences of rates (4 episodes per task, so not Newcombe's interval of one
    # sample), widened to the betting interval (37 tasks, fewer than 100).
    kept = [table[~table["task_id"].isin(FLAGGED)] for table in tables]
    rates = [table.groupby("task_id")["passed"].mean().sort_index().to_numpy(float)
             for table in kept]
    assert without.pass_at_1.base == arm_interval(rates[0], n_episodes=EPISODES, seed=0)
    assert without.pass_at_1.candidate == arm_interval(rates[1], n_episodes=EPISODES, seed=0)
    studentized = studentized_test(rates[1] - rates[0], seed=0).interval
    betting = betting_interval(rates[1] - rates[0], seed=0).interval
    assert (without.difference.low, without.difference.high) == (
        min(studentized.low, betting.low), max(studentized.high, betting.high))
    assert [without.pass_at_1.base.method, without.pass_at_1.candidate.method,
            without.difference.method] == [
        "wilson over 37 tasks", "BCa bootstrap over 37 tasks",
        "bootstrap-t over 37 tasks, 9,999 resamples, widened to the hedged-capital betting "
        "over 37 tasks (fewer than 100 units)"]
    on_kept = build_report(*kept).headline
    assert without.pass_at_1 == on_kept.pass_at_1
    assert without.difference == on_kept.decision.difference
    assert without.verdict == on_kept.decision.verdict

    # The headline itself still counts every task.
    headline = flagged_report.headline
    assert flagged_report.tasks.compared == 40
    assert headline.pass_at_1.base.estimate == pytest.approx(10.25 / 40)
    assert headline.pass_at_1.candidate.estimate == pytest.approx(16.25 / 40)
    assert not np.isclose(headline.decision.difference.estimate, without.difference.estimate)
    metrics = flagged_report.metrics
    assert metrics["flagged_tasks"] == 3 and metrics["excluded_tasks"] == 0
    assert metrics["difference_without_flagged"] == pytest.approx(
        candidate_rate - base_rate, abs=1e-6)
    assert metrics["base_pass_at_1_without_flagged"] == pytest.approx(base_rate, abs=1e-6)


def test_flagged_tasks_are_marked_in_the_headline_and_the_table_in_every_rendering(
    flagged_report: Report, tmp_path: Path
):
    without = flagged_report.contamination.without_flagged
    base, candidate, difference = *without.pass_at_1, without.difference
    sentence = (
        "3 of the 40 tasks compared were flagged as contaminated, a training corpus holding a "
        "copy (by method): t010 (code, exact), t011 (ngram), t031 (minhash). They are scored "
        f"above; without them (37 tasks): pass@1 base {percent(base.estimate)} "
        f"{interval_percent(base.low, base.high)}, cand {percent(candidate.estimate)} "
        f"{interval_percent(candidate.low, candidate.high)}, difference "
        f"{points(difference.estimate)} points {interval_points(difference.low, difference.high)}"
        f"; the same rule's verdict: {without.verdict}."
    )
    assert f"> **Warning:** {sentence}" in headline_markdown(flagged_report)
    assert "base 27.0% [" in sentence and "+10.1 points [" in sentence  # 10/37, 3.75/37

    written = {path.name: path for path in write_report(flagged_report, tmp_path)}
    markdown = written["report.md"].read_text()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in markdown.splitlines()
            if line.startswith("| t0")}
    # By pass rate over the 4 episodes: t010 0/4 → 4/4, t031 1/4 → 2/4, t000 4/4 → 3/4.
    assert rows["t010"].endswith("| improved | flagged: code, exact |")
    assert rows["t031"].endswith("| 1/4 | 2/4 | +25.0 | improved | flagged: minhash |")
    assert rows["t000"].endswith("| 4/4 | 3/4 | -25.0 | regressed |  |")
    assert "task(s) marked \"flagged\" in the contamination column" in markdown

    html = written["report.html"].read_text()
    assert "<td>flagged: code, exact</td>" in html and "(by method): t010 (code, exact)" in html

    data = json.loads(written["report.json"].read_text())
    assert data["contamination"]["flagged"] == [{"task_id": task, "methods": methods}
                                                for task, methods in FLAGGED.items()]
    assert data["contamination"]["without_flagged"]["difference"]["estimate"] == \
        pytest.approx(difference.estimate)
    assert {row["task_id"] for row in data["flips"]["tasks"] if row["flagged"]} == set(FLAGGED)
    assert Report.from_json(data) == flagged_report


def test_nothing_is_marked_when_nothing_is_flagged_and_nothing_said_without_decontamination(
    tables,
):
    plain = build_report(*tables)
    clean = build_report(*tables, decontamination=Decontamination("flag", {}))
    assert plain.contamination is None and plain.to_json()["contamination"] is None
    assert clean.contamination.flagged == [] and clean.contamination.without_flagged is None
    assert [row.flagged for row in clean.flips.tasks] == [False] * 40
    assert [row.flagged for row in plain.flips.tasks] == [None] * 40, "not checked, not clean"
    assert clean.headline == plain.headline
    assert "flagged_tasks" not in plain.metrics and clean.metrics["flagged_tasks"] == 0

    plain_text, clean_text = full_markdown(plain), full_markdown(clean)
    assert "contaminat" not in plain_text
    assert clean_text.replace("No compared task was flagged as contaminated.\n\n", "") == \
        plain_text
    # A report.json written before contamination was reported reads back as "none given".
    old = {key: value for key, value in plain.to_json().items() if key != "contamination"}
    assert Report.from_json(json.loads(json_bytes(old))) == plain


def test_a_flagged_id_no_compared_task_has_changes_no_number_and_is_listed(tables):
    plain = build_report(*tables)
    report = build_report(*tables, decontamination=Decontamination(
        "flag", {"HumanEval/59": ["code"]}))
    found = report.contamination
    assert found.flagged == [] and found.without_flagged is None
    assert [(task.task_id, task.methods) for task in found.not_compared] == [
        ("HumanEval/59", ["code"])]
    assert report.headline == plain.headline
    assert not any(row.flagged for row in report.flips.tasks)
    assert ("> Flagged as contaminated but not among the compared tasks, so in no number "
            "here: HumanEval/59 (code).") in headline_markdown(report)


def test_policy_drop_says_how_many_were_excluded_before_any_rollout(tables):
    # Decontamination dropped two test items, so the test rollouts never held them.
    report = build_report(*tables, decontamination=Decontamination(
        "drop", {"HumanEval/59": ["code"], "HumanEval/99": ["exact", "ngram"]},
        excluded=["HumanEval/59", "HumanEval/99"]))
    found = report.contamination
    assert [task.task_id for task in found.excluded] == ["HumanEval/59", "HumanEval/99"]
    assert found.flagged == found.not_compared == [] and found.without_flagged is None
    assert report.metrics["excluded_tasks"] == 2
    assert ("> 2 task(s) a training corpus holds a copy of were excluded before any rollout "
            "(decontamination policy drop), so no number here includes them: HumanEval/59 "
            "(code), HumanEval/99 (exact, ngram).") in headline_markdown(report)


def test_an_excluded_task_the_rollouts_hold_all_the_same_counts_as_flagged(tables):
    report = build_report(*tables, decontamination=Decontamination(
        "drop", {"t010": ["exact"]}, excluded=["t010"]))
    assert [task.task_id for task in report.contamination.flagged] == ["t010"]
    assert report.contamination.excluded == []
    assert report.contamination.without_flagged.tasks == 39


def test_when_every_task_is_flagged_nothing_is_left_to_compare():
    base, candidate = rollouts("base", {"a": [True], "b": [False]}), rollouts(
        "cand", {"a": [True], "b": [True]})
    report = build_report(base, candidate, decontamination=Decontamination(
        "flag", {"a": ["exact"], "b": ["code"]}))
    assert report.contamination.without_flagged is None
    assert "every compared task is flagged, so nothing is left to compare without them." in \
        headline_markdown(report)
    assert "difference_without_flagged" not in report.metrics


# --------------------------------------------------------------------------------------------
# The report stage reads what the decontaminate stage wrote


def match(method: str, source: str, split: str, eval_id: str) -> Match:
    return Match(method=method, source=source, training_id="x", eval_split=split,
                 eval_id=eval_id, eval_field="prompt", training_view="text", score=1.0,
                 training_snippet="")


@pytest.mark.parametrize("policy", ["flag", "drop"])
def test_the_report_stage_reads_the_flagged_test_items_and_their_corpus_methods(
    tmp_path: Path, policy: str
):
    corpus = "tasks/training_corpus.jsonl"
    scans = [
        # A train-split match is removed from training, not a leak: its method is not listed.
        SourceScan(TRAIN_SPLIT_SOURCE, 1, 0, [match("group", TRAIN_SPLIT_SOURCE, "test",
                                                    "HumanEval/59")]),
        SourceScan(corpus, 3, 0, [match("code", corpus, "test", "HumanEval/59"),
                                  match("exact", corpus, "test", "HumanEval/59"),
                                  match("ngram", corpus, "test", "HumanEval/110"),
                                  match("exact", corpus, "val", "HumanEval/108")]),
    ]
    written = build_decontamination_report(DecontaminateConfig(policy=policy), scans,
                                           {"val": "v", "test": "t"}, {})
    path = tmp_path / catalog.DECONTAM_REPORT
    path.parent.mkdir(parents=True)
    path.write_bytes(json_bytes(written))
    found = read_decontamination(tmp_path)
    assert found.policy == policy
    assert dict(found.flagged) == {"HumanEval/110": ["ngram"], "HumanEval/59": ["code", "exact"]}
    assert sorted(found.excluded) == ([] if policy == "flag" else
                                      ["HumanEval/110", "HumanEval/59"])


def test_the_report_stage_lists_the_decontamination_report_as_a_dep():
    assert str(catalog.DECONTAM_REPORT) in stage_body("report")["deps"]
