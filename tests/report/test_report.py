"""The paired report on hand-built rollouts whose numbers can be worked out on paper."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest

from heldout.episodes.rows import rollout_table
from heldout.files import json_bytes
from heldout.report import (
    BETTER,
    NO_DIFFERENCE,
    Report,
    ReportInputError,
    build_report,
    headline_markdown,
    write_report,
)
from heldout.report.document import Section, Table, report_document
from heldout.report.figures import checkpoints_pass_at_k_figure, pass_k_figure
from heldout.report.render import render_markdown
from heldout.report.sections import Crossing, Dropped, PerArm
from heldout.statistics.counts import IncomparableRolloutsError, pool_runs
from heldout.statistics.power import Reruns
from tests.chromium import render

HARNESS = "a" * 64
OTHER_HARNESS = "b" * 64


STARTED_AT = 1_796_000_000.0  # 2026-11-30 00:53:20 UTC


def rollouts(
    checkpoint: str,
    outcomes: Mapping[str, Sequence[bool]],
    *,
    harness: str = HARNESS,
    statuses: Mapping[tuple[str, int], str] | None = None,
    started_at: float | None = STARTED_AT,
) -> pd.DataFrame:
    """A rollout table: outcomes[task][sample] is whether that episode passed; `statuses`
    overrides the status of chosen (task, sample) episodes (default "ok"). Its episodes start
    evenly over the hour from `started_at`, so two tables ran at the same times (both arms
    at once); None: the rows do not say when."""
    statuses = statuses or {}
    rows = [
        {
            "task_id": task, "sample": sample, "seed": sample, "harness": harness,
            "completion": "", "completion_sha": "", "passed": passed, "public_passed": None,
            "status": statuses.get((task, sample), "ok"), "error": "", "finish_reason": "stop",
            "tokens_in": 0, "tokens_out": 0, "turns": 1, "agent_s": 0.0, "exec_s": 0.0,
            "cost_usd": 0.0, "tool_calls": 1, "end_reason": "submitted", "trajectory": "[]",
            "step_timings": "[]",
        }
        for task, episodes in outcomes.items()
        for sample, passed in enumerate(episodes)
    ]
    if started_at is not None:
        rows = [{**row, "started_at": started_at + 3600 * number / len(rows)}
                for number, row in enumerate(rows)]
    return rollout_table(checkpoint, rows)


def passing(n_tasks: int, passes: range, episodes: int = 1) -> dict[str, list[bool]]:
    """Tasks t000… of which those indexed by `passes` pass every episode and the rest fail."""
    return {f"t{i:03d}": [i in passes] * episodes for i in range(n_tasks)}


def full_markdown(report: Report) -> str:
    return render_markdown(report_document(report, figures=()))


def fixed_ten_of_200(episodes: int = 1) -> Report:
    """200 tasks: the base passes 80, the candidate the same 80 and 10 more, breaking none."""
    return build_report(
        rollouts("base", passing(200, range(80), episodes)),
        rollouts("fixed", passing(200, range(90), episodes)),
    )


def test_different_task_sets_are_compared_on_their_intersection_and_say_what_was_dropped():
    shared = passing(5, range(3))
    base = rollouts("base", {**shared, "only-base-1": [True], "only-base-2": [False]})
    candidate = rollouts("cand", {**shared, "only-cand": [True]})
    report = build_report(base, candidate)
    tasks = report.tasks
    assert tasks.compared == 5 and tasks.in_file == PerArm(base=7, candidate=6)
    assert tasks.dropped.base == Dropped(count=2, ids=["only-base-1", "only-base-2"],
                                         reason="not in cand's rollouts")
    assert tasks.dropped.candidate.ids == ["only-cand"]
    assert report.metrics["base_dropped_tasks"] == 2
    assert "dropped 2 task(s) only in base and 1 task(s) only in cand" in headline_markdown(report)


def test_rollouts_without_a_common_task_are_refused():
    with pytest.raises(ReportInputError, match="share no task id"):
        build_report(rollouts("base", {"a": [True]}), rollouts("cand", {"b": [True]}))


def test_a_harness_mismatch_is_refused_unless_allowed_and_then_headlined():
    base = rollouts("base", passing(10, range(5)))
    candidate = rollouts("cand", passing(10, range(6)), harness=OTHER_HARNESS)
    with pytest.raises(IncomparableRolloutsError) as refused:
        build_report(base, candidate)
    assert "aaaaaaaaaaaa" in str(refused.value) and "bbbbbbbbbbbb" in str(refused.value)
    assert "--allow-harness-mismatch" in str(refused.value)

    report = build_report(base, candidate, allow_harness_mismatch=True)
    assert report.harness.match is False
    assert report.headline.warnings[0].startswith("HARNESS MISMATCH")
    assert "HARNESS MISMATCH: base ran under harness aaaaaaaaaaaa" in headline_markdown(report)


def test_errored_episodes_are_failures_counted_separately():
    base = {f"t{i}": [True, True] for i in range(10)}
    # Three errored episodes, one of them claiming to have passed: an error is a failure anyway.
    errored = {("t0", 0): "error", ("t1", 1): "error", ("t2", 0): "error"}
    base_table = rollouts("base", base, statuses=errored)
    base_table.loc[(base_table["task_id"] == "t2") & (base_table["sample"] == 0), "passed"] = False
    report = build_report(base_table, rollouts("cand", base))
    outcomes = report.beneath.arms
    assert (outcomes.base.errors, outcomes.base.episodes) == (3, 20)
    assert outcomes.base.error_rate == pytest.approx(0.15)
    assert outcomes.candidate.errors == 0
    assert report.headline.pass_at_1.base.estimate == pytest.approx(17 / 20)
    # Sample 0 errored on t0 and t2, so McNemar's exact test (at sample 0) sees two tasks the
    # candidate fixed; by pass rate over both episodes t0, t1 and t2 (1/2 → 2/2) all differ.
    decision = report.headline.decision
    assert (decision.mcnemar.b, decision.mcnemar.c) == (0, 2)
    assert decision.test.nonzero_units == 3 and report.flips.improved == ["t0", "t1", "t2"]
    assert report.metrics["base_error_rate"] == pytest.approx(0.15)
    assert "Errored episodes count as failures: base 3 (15.0% of episodes)" in \
        headline_markdown(report)


def test_paired_runs_are_pooled_and_their_spread_carried_into_the_verdict():
    # Four runs of each arm: the base at pass@1 0.40, 0.45, 0.50, 0.45, the candidate at 0.50
    # in every run, so the differences run by run are 0.10, 0.05, 0, 0.05 (sd √(0.005/3)):
    # their mean carries 0.005/12 on 3 degrees of freedom. Run 0 alone says "better" (+10
    # points, 20 tasks fixed).
    base_runs = [rollouts("base", passing(200, range(stop))) for stop in (80, 90, 100, 90)]
    candidate_runs = [rollouts("fixed", passing(200, range(100))) for _ in range(4)]
    base, candidate, reruns = pool_runs(base_runs, candidate_runs)
    assert reruns.base == pytest.approx((0.40, 0.45, 0.50, 0.45))
    assert reruns.candidate == pytest.approx((0.50, 0.50, 0.50, 0.50))
    # Pooled: every task holds its 4 episodes, numbered after each other's runs.
    assert sorted(base.loc[base["task_id"] == "t085", "sample"]) == [0, 1, 2, 3]
    assert base.loc[base["task_id"] == "t085", "passed"].sum() == 3
    report = build_report(base, candidate, reruns=reruns)
    headline = report.headline
    assert headline.decision.drift.run_sd == pytest.approx((0.005 / 3) ** 0.5)
    assert headline.decision.drift.variance == pytest.approx(0.005 / 12)
    assert report.metrics["run_drift_sd"] == pytest.approx((0.005 / 3) ** 0.5)
    assert headline.pass_at_1.base.estimate == pytest.approx(0.45)
    assert build_report(base_runs[0], candidate_runs[0]).verdict == BETTER
    assert report.verdict == NO_DIFFERENCE
    assert "> α = 0.05) and the 95% interval includes 0" in headline.reason
    assert "carrying the spread of 4 paired runs of each arm" in headline.rule
    other_tasks = [base_runs[0], rollouts("base", passing(100, range(50))), *base_runs[2:]]
    with pytest.raises(IncomparableRolloutsError, match="rerun 1 of the base holds other tasks"):
        pool_runs(other_tasks, candidate_runs)
    with pytest.raises(IncomparableRolloutsError, match="3 rerun.s. of the base and 1 of"):
        pool_runs(base_runs, candidate_runs[:2])
    # Two or three runs are refused: their critical value costs more than they buy.
    for runs in (2, 3):
        with pytest.raises(IncomparableRolloutsError,
                           match=f"{runs} paired runs of each arm: .* at least 4 times"):
            pool_runs(base_runs[:runs], candidate_runs[:runs])


def test_the_seeds_noise_floor_is_posted_as_information_and_decides_nothing():
    # The base at pass@1 0.40, 0.45, 0.50, 0.45 run by run (sd √(0.005/3) = 0.0408248), the
    # candidate 0.10 above it in every run: the paired drift is 0, and the floor the seed
    # would have asked the difference to clear is t₀.₉₇₅(3)·sd·√2 = 3.1824463 × 0.0408248 ×
    # 1.4142136 = 0.1837386, above the +10 points the verdict still calls "better".
    base_runs = [rollouts("base", passing(200, range(stop))) for stop in (80, 90, 100, 90)]
    candidate_runs = [rollouts("fixed", passing(200, range(stop + 20)))
                      for stop in (80, 90, 100, 90)]
    base, candidate, reruns = pool_runs(base_runs, candidate_runs)
    report = build_report(base, candidate, reruns=reruns)
    floor = report.power.noise_floor
    assert (floor.runs, floor.run_sd) == (4, pytest.approx((0.005 / 3) ** 0.5))
    assert floor.floor == pytest.approx(0.1837386, abs=1e-7)
    assert report.headline.decision.drift.run_sd == 0
    assert report.verdict == BETTER
    assert Report.from_json(json.loads(json_bytes(report.to_json()))).power == report.power
    text = full_markdown(report)
    assert ("| the seed's noise floor, t₀.₉₇₅(3) × sd of the base's 4 runs' pass@1 × √2 "
            "(information) | 18.4 points (3.18 × 4.08 × √2) |") in text
    assert "The noise floor is information, not a hurdle" in text
    # Without reruns there is no floor to post.
    assert build_report(base_runs[0], candidate_runs[0]).power.noise_floor is None


def test_pass_at_k_curves_that_cross_say_where():
    # Base: every task 3 of 10; candidate: half the tasks 10 of 10, half 0 of 10.
    # pass@1 0.3 vs 0.5, pass@2 1 − C(7,2)/C(10,2) = 0.533 vs 0.5, pass@4 1 − C(7,4)/C(10,4) =
    # 0.833 vs 0.5. pass^k: 0.3, 3/45, … vs 0.5 at every k: no crossing.
    # A curve leads only where the paired interval excludes 0. Per-task differences at k take
    # two values half the tasks each, so their sd is 0.5 and the interval about ±1.96·0.5/√N:
    # 40 tasks (not 20, where ±0.22 swallows the +0.2 at k = 1) put the lead at k = 1 beyond
    # it, while −0.033 at k = 2 stays inside: the curves cross between k = 1 and k = 4.
    base = {f"t{i}": [j < 3 for j in range(10)] for i in range(40)}
    candidate = {f"t{i}": [i < 20] * 10 for i in range(40)}
    report = build_report(rollouts("base", base), rollouts("cand", candidate))
    at_k = report.pass_at_k
    # Up to n/2 = 5: pass@8 and pass@10 of 10 episodes are near one indicator per task.
    assert [p.k for p in at_k.arms.base] == [1, 2, 4]
    assert at_k.arms.base[1].interval.estimate == pytest.approx(1 - 21 / 45)
    leaders = {point.k: point.leader for point in at_k.difference}
    assert leaders == {1: "cand", 2: None, 4: "base"}
    assert at_k.difference[1].interval.estimate == pytest.approx(0.5 - (1 - 21 / 45))
    assert at_k.crossings == [
        Crossing(after_k=1, by_k=4, leader_before="cand", leader_after="base")]
    assert report.pass_hat_k.arms.base[1].interval.estimate == pytest.approx(3 / 45)
    assert report.pass_hat_k.crossings == []
    text = full_markdown(report)
    assert ("The pass@k curves cross (where the paired intervals exclude 0): cand leads up to "
            "k = 1, base from k = 4.") in text
    assert ("The pass^k curves do not cross beyond their intervals: cand is ahead or level at "
            "every k (ahead only where the paired interval excludes 0).") in text
    assert "They run to k ≤ n/2 (n = 10 episodes per task here)" in text
    assert report.metrics["base_pass_at_2"] == pytest.approx(1 - 21 / 45, abs=1e-6)


def test_a_control_truncated_at_more_than_twice_the_others_rate_is_flagged():
    outcomes = passing(10, range(5), 2)
    truncated = {(f"t{i:03d}", 0): "truncated" for i in range(6)}  # 6 of 20 episodes
    report = build_report(rollouts("base", outcomes, statuses=truncated),
                          rollouts("cand", outcomes, statuses={("t000", 0): "truncated"}))
    flags = report.beneath.flags
    assert len(flags) == 1 and flags[0].startswith("base was truncated in 30.0% of episodes")
    assert "cand's 5.0%" in flags[0]


def test_groups_break_the_comparison_down_when_a_group_holds_several_tasks():
    base, candidate = rollouts("base", passing(6, range(2))), rollouts("cand",
                                                                       passing(6, range(4)))
    groups = {"t000": "g1", "t001": "g1", "t002": "g1", "t003": "g2", "t004": "g2"}  # t005 alone
    report = build_report(base, candidate, groups=groups)
    breakdown = {row.group: row for row in report.beneath.groups}
    assert set(breakdown) == {"g1", "g2", "t005"}
    assert breakdown["g1"].tasks == 3 and breakdown["g1"].improved == 1
    assert breakdown["g1"].difference == pytest.approx(1 / 3)
    assert {row.task_id: row.group for row in report.flips.tasks}["t005"] == "t005"
    one_task_each = build_report(base, candidate, groups={f"t{i:03d}": str(i) for i in range(6)})
    assert one_task_each.beneath.groups is None


def test_rollouts_the_report_cannot_read_are_refused_naming_the_problem():
    good = rollouts("base", passing(3, range(1), 2))
    with pytest.raises(ReportInputError, match="missing column"):
        build_report(good.drop(columns="status"), good)
    with pytest.raises(ReportInputError, match="more than once"):
        build_report(pd.concat([good, good.iloc[:1]]), good)
    with pytest.raises(ReportInputError, match="no episode with sample index 5"):
        build_report(good, good, sample=5)


PROTOCOL = {
    "tasks": {"source": "humaneval", "digest": "d" * 64, "count": 200},
    "split": {"salt": "heldout-2026", "fractions": {"train": 0.3, "val": 0.35, "test": 0.35},
              "test_version": "t-76ecd8e55597"},
    "harness": {"fingerprint": HARNESS, "temperature": 0.8, "n": 1,
                "sandbox": {"image": "heldout-python:3.11", "network": "none"}},
    "selection": {"rule": "best val pass@1", "metric": "pass@1", "chosen": "fixed",
                  "table": [{"checkpoint": "base", "value": 0.41, "low": 0.3, "high": 0.5},
                            {"checkpoint": "fixed", "value": 0.47, "low": 0.37, "high": 0.57}],
                  "note": "fixed leads base by +0.060 on val"},
    "test_access": {"opened": 1, "models_evaluated": 1},
}


def test_the_written_report_is_self_contained_and_carries_the_protocol_card(tmp_path: Path):
    report = build_report(rollouts("base", passing(40, range(10))),
                          rollouts("fixed", passing(40, range(20))), protocol=PROTOCOL)
    written = write_report(report, tmp_path / "out")
    names = sorted(str(p.relative_to(tmp_path / "out")) for p in written)
    assert names == ["figures/forest.png", "figures/pass_k.png", "figures/val_selection.png",
                     "report.html", "report.json", "report.md"]
    assert json.loads((tmp_path / "out/report.json").read_text()) == report.to_json()
    markdown = (tmp_path / "out/report.md").read_text()
    for shown in ("## Protocol card", "heldout-2026", "| sandbox.network | none |",
                  "test set t-76ecd8e55597", "| fixed | 47.0% | [37.0%, 57.0%] |  | ◀ chosen |",
                  "figures/val_selection.png"):
        assert shown in markdown
    html = (tmp_path / "out/report.html").read_text()
    assert html.count("data:image/png;base64,") == 3
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert all(isinstance(v, int | float) for v in report.metrics.values())


def test_a_protocol_harness_other_than_the_rollouts_is_a_headline_warning():
    protocol = {"harness": {"fingerprint": OTHER_HARNESS}}
    report = build_report(rollouts("base", passing(5, range(2))),
                          rollouts("cand", passing(5, range(3))), protocol=protocol)
    assert report.headline.warnings == [
        "The protocol's harness is bbbbbbbbbbbb, but the rollouts were produced under "
        "aaaaaaaaaaaa."]


def every_section_filled() -> Report:
    """A report with something in every optional part: a dropped task, an errored and a
    truncated episode, groups of several tasks, a run-level drift and the protocol card."""
    base = rollouts("base", {**passing(30, range(10), 3), "only-base": [True] * 3},
                    statuses={("t000", 0): "error"})
    candidate = rollouts("fixed", passing(30, range(18), 3), statuses={("t001", 1): "truncated"})
    return build_report(base, candidate, groups={f"t{i:03d}": f"g{i % 4}" for i in range(30)},
                        reruns=Reruns((0.40, 0.45, 0.50), (0.45, 0.45, 0.58)), protocol=PROTOCOL)


def test_report_json_reads_back_into_the_same_typed_report(tmp_path: Path):
    report = every_section_filled()
    assert report.tasks.dropped.base.count == 1 and report.beneath.groups is not None
    assert report.headline.decision.drift is not None and report.headline.notes
    write_report(report, tmp_path)
    written = (tmp_path / "report.json").read_bytes()
    again = Report.from_json(json.loads(written))
    assert again == report
    assert json_bytes(again.to_json()) == written
    # report.json sorts keys, so the card read back lists the fields of each of its tables in
    # another order; every other section reads the same word for word.
    *sections, card = report_document(report, figures=()).sections
    *sections_again, card_again = report_document(again, figures=()).sections
    assert sections_again == sections

    def headings_and_rows(section: Section) -> tuple[list, list]:
        tables = [block for block in section.blocks if isinstance(block, Table)]
        return ([block for block in section.blocks if not isinstance(block, Table)],
                [sorted(table.rows) for table in tables])

    assert headings_and_rows(card_again) == headings_and_rows(card)


def test_an_undefined_design_effect_is_written_as_null_and_read_back_as_nan():
    # Every episode of the base fails, so ρ is undefined there; the candidate's three
    # all-pass and three all-fail tasks give ρ = 1 and a design effect of 1 + (2 − 1)·1 = 2.
    report = build_report(rollouts("base", passing(6, range(0), 2)),
                          rollouts("cand", passing(6, range(3), 2)))
    assert math.isnan(report.beneath.arms.base.design_effect.rho)
    written = json.loads(json_bytes(report.to_json()))
    assert written["beneath"]["base"]["design_effect"] == {
        "task_variance": 0.0, "rho": None, "design_effect": None}
    assert written["beneath"]["candidate"]["design_effect"]["design_effect"] == 2.0
    again = Report.from_json(written)
    assert math.isnan(again.beneath.arms.base.design_effect.design_effect)
    assert again.to_json() == written
    assert "| design effect 1 + (n − 1)ρ | not estimable | 2.00 (ρ = 1.000) |" in \
        full_markdown(again)


def test_report_json_that_is_not_a_report_or_whose_verdict_contradicts_its_numbers_is_refused():
    written = fixed_ten_of_200().to_json()
    with pytest.raises(ValueError, match="schema"):
        Report.from_json({**written, "schema": "heldout.report/0"})
    contradicted = {**written, "headline": {**written["headline"], "verdict": NO_DIFFERENCE}}
    with pytest.raises(ValueError, match="not what the rule gives"):
        Report.from_json(contradicted)


def test_only_the_val_plot_carries_matplotlibs_software_tag():
    # The report's figures drop it so their bytes do not depend on matplotlib's version;
    # plots/val_passk.png kept it through the move into one figures module.
    report_png = pass_k_figure(fixed_ten_of_200())
    val_png = checkpoints_pass_at_k_figure({"base": {1: 0.4, 2: 0.55}, "step_10": {1: 0.5, 2: 0.6}},
                                           title="val pass@k", highlight="base")
    for png in (report_png, val_png):
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert b"Software" not in report_png
    assert b"Software" in val_png and b"Matplotlib" in val_png


def artifact_dir(tmp_path_factory: pytest.TempPathFactory, test_name: str) -> Path:
    """Where a test keeps what a person should look at: $HELDOUT_TEST_ARTIFACTS (CI collects
    it) or a folder beside pytest's temporary directories."""
    root = os.environ.get("HELDOUT_TEST_ARTIFACTS")
    base = Path(root) if root else tmp_path_factory.getbasetemp() / "artifacts"
    folder = base / test_name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_the_html_report_renders_its_headline_in_headless_chromium(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture
):
    folder = artifact_dir(tmp_path_factory, "report_html_in_chromium")
    write_report(fixed_ten_of_200(), folder)
    page = render((folder / "report.html").as_uri(), screenshot=folder / "screenshot.png",
                  window=(1280, 1400))
    # The hand-computed headline: 40% and 45% pass@1, +5 points, McNemar 0 and 10, 2·0.5^10.
    for number in ("40.0%", "45.0%", "+5.0 points", "b = 0", "c = 10", "p = 0.00195",
                   "Better: fixed 45.0% vs base 40.0%"):
        assert number in page.dom
    assert page.dom.count('src="data:image/png;base64,') == 2
    assert (folder / "screenshot.png").stat().st_size > 10_000
    with capsys.disabled():
        print(f"\nscreenshot of the rendered report: {folder / 'screenshot.png'}")


def test_metrics_test_json_is_the_verdict_word_and_its_few_numbers():
    """`dvc metrics show` draws every metrics file in one table, a column per key: the test
    file holds the verdict as the headline says it and a dozen numbers, not the report's 40."""
    from heldout.report.dvc_view import TEST_COLUMNS, test_metrics

    report = build_report(rollouts("base", passing(40, range(10))),
                          rollouts("fixed", passing(40, range(30))))
    shown = test_metrics(report)
    assert shown["verdict"] == report.verdict == "better"
    assert len(shown) <= 13 < len(report.metrics)
    for key, column in TEST_COLUMNS.items():
        if key in report.metrics:
            assert shown[column] == report.metrics[key]
    assert shown["diff_lo"] <= shown["diff"] <= shown["diff_hi"]
    same = build_report(rollouts("base", passing(40, range(10))),
                        rollouts("same", passing(40, range(10))))
    assert test_metrics(same)["verdict"] == "no difference detected"
