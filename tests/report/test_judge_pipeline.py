"""The judge's trust and the grader-reason check in the pipeline (issue 42, item 4): params.judge
names a TRUST.json under judge/, measured on val rows under the pinned harness; below
judge.min_agreement the report stage voids the verdict and says it re-drew the closed one
because of the judge; the protocol card records the measurement or its absence. The score
stage records each checkpoint's top failing reason on val, and a reason covering 95% of many
failing rows voids the verdict the report draws on that checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from heldout.episodes.harness import Harness
from heldout.errors import ParamsError, StageError
from heldout.statistics.judge_trust import SCHEMA, failing_reasons, judge_agreement
from stages import catalog, decontaminate
from stages import report as report_stage
from stages import test as test_stage
from stages.common import section
from stages.params_check import read_params
from stages.val_grader import grader_gates


@pytest.fixture
def project(selected_copy: Path) -> Path:
    test_stage.run(selected_copy)
    decontaminate.run(selected_copy)  # the report reads what decontamination flagged
    return selected_copy


def write_trust(project: Path, agree: int, *, harness: str | None = None) -> None:
    """A TRUST.json as `heldout judge-trust` writes it: 80 labeled rows, `agree` of them agree."""
    pinned = section(read_params(project), "harness", Harness).fingerprint()
    labels = [True] * 40 + [False] * 40
    judged = [not label if row < 80 - agree else label for row, label in enumerate(labels)]
    trust = judge_agreement(judged, labels)
    (project / "judge").mkdir(exist_ok=True)
    (project / "judge" / "trust.json").write_text(json.dumps(
        {"schema": SCHEMA, "harness": [harness or pinned], **trust.to_json()}))


def set_judge(project: Path, **judge) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["judge"] = judge
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_an_unmeasured_judge_is_said_so_and_changes_nothing(project: Path):
    report = report_stage.run(project)
    assert report["protocol"]["judge_trust"]["measured"] is False
    assert "not measured against hand labels" in report["protocol"]["judge_trust"]["says"]
    assert not any("RE-DRAWN" in warning for warning in report["headline"]["warnings"])


def test_a_judge_below_the_agreement_bar_voids_the_verdict(project: Path):
    recorded = report_stage.run(project)["headline"]["verdict"]
    write_trust(project, 60)  # 0.75
    set_judge(project, trust="judge/trust.json", min_agreement=0.8)
    report = report_stage.run(project)
    assert report["headline"]["verdict"].startswith("not decidable")
    assert "60 of 80 labeled rows (75.0%" in report["headline"]["verdict"]
    card = report["protocol"]["judge_trust"]
    assert card["measured"] and not card["trusted"] and card["min_agreement"] == 0.8
    redrawn = [w for w in report["headline"]["warnings"] if w.startswith("RE-DRAWN")]
    assert len(redrawn) == 1 and "judge None → UNTRUSTED" in redrawn[0]
    # The bar is the project's, recorded: at 0.7 the same measurement is trusted.
    set_judge(project, trust="judge/trust.json", min_agreement=0.7)
    report = report_stage.run(project)
    assert report["headline"]["verdict"] == recorded
    assert report["protocol"]["judge_trust"]["trusted"]


def test_a_trusted_judge_keeps_the_verdict(project: Path):
    recorded = report_stage.run(project)["headline"]["verdict"]
    write_trust(project, 72)  # 0.9
    set_judge(project, trust="judge/trust.json")
    report = report_stage.run(project)
    assert report["headline"]["verdict"] == recorded
    assert report["protocol"]["judge_trust"]["agreement"]["agree"] == 72


def test_a_trust_measured_under_another_harness_is_refused(project: Path):
    write_trust(project, 72, harness="f" * 64)
    set_judge(project, trust="judge/trust.json")
    with pytest.raises(StageError, match="not the pinned harness"):
        report_stage.run(project)


def test_a_trust_file_outside_judge_is_refused(project: Path):
    set_judge(project, trust="reports/trust.json")
    with pytest.raises(ParamsError, match="keep TRUST.json under judge/"):
        report_stage.run(project)


def test_the_score_stage_records_each_checkpoints_top_failing_reason(project: Path):
    scores = json.loads((project / catalog.SCORES).read_text())
    for name in ("base", "late"):
        table = pd.read_parquet(project / catalog.rollout_file(name))
        found = failing_reasons(table)
        assert scores["checkpoints"][name]["grader_reason"] == (
            None if found is None else found.to_json())
    assert grader_gates(scores, ["base", "late"]) == ()


def test_one_reason_over_many_failing_val_rows_voids_the_verdict():
    broken = {"reason": "error: ModuleNotFoundError", "covers": 30, "failing": 30,
              "share": 1.0, "voids": True}
    fine = {"reason": "failed: HumanEval/1 line 3", "covers": 3, "failing": 30,
            "share": 0.1, "voids": False}
    scores = {"checkpoints": {"base": {"grader_reason": fine},
                              "late": {"grader_reason": broken}}}
    [gate] = grader_gates(scores, ["base", "late"])
    assert "covers 100% of 30 failing rows: error: ModuleNotFoundError (late, on val)" in (
        gate.message)
    assert gate.voids
    assert grader_gates(scores, ["base"]) == ()


def test_the_params_check_names_a_missing_judge_folder_or_trust_file(tmp_path: Path):
    import shutil

    from flows.params import params_sections
    from stages.params_check import check_params
    from tests.conftest import copy_project

    project = copy_project(tmp_path / "p")
    check_params(read_params(project), params_sections(), project)  # as copied: valid
    set_judge(project, trust="judge/trust.json")
    with pytest.raises(ParamsError, match=r"judge.trust: judge/trust.json does not exist: "
                                          r"write it with `heldout judge-trust"):
        check_params(read_params(project), params_sections(), project)
    shutil.rmtree(project / "judge")
    with pytest.raises(ParamsError, match=r"the folder judge/ is missing, and the report stage "
                                          r"depends on it"):
        check_params(read_params(project), params_sections(), project)
