"""`heldout judge-trust` on labeled slices of known agreement, and `heldout compare
--judge-trust`: the gate voids a verdict scored by a judge at 0.75 and not at 0.9; fewer than
60 labels exit 2; a judge made flaky on purpose flips when judged again."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.report.test_compare_cli import heldout, rollout_files
from tests.report.test_score_cli import needs_sandbox


def write_labels(path: Path, table: pd.DataFrame, rows: int, wrong: int) -> Path:
    """Labels for the table's first `rows` rows: the judge's verdict on all but the first
    `wrong`, the opposite there."""
    lines = [{"task_id": task, "sample": int(sample), "label": bool(passed) != (i < wrong)}
             for i, (task, sample, passed) in enumerate(zip(
                 table["task_id"], table["sample"], table["passed"], strict=True)) if i < rows]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_gate_voids_the_075_judge_and_not_the_090(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    table = pd.read_parquet(base)
    verdicts = {}
    for name, wrong in (("075", 20), ("090", 8)):
        labels = write_labels(tmp_path / f"labels{name}.jsonl", table, 80, wrong)
        trust = tmp_path / name / "TRUST.json"
        done = heldout("judge-trust", labels, "--judged", base, "--out", trust)
        assert done.returncode == 0, done.stderr
        record = json.loads(trust.read_text())
        assert record["agreement"]["agree"] == 80 - wrong and record["agreement"]["rows"] == 80
        assert record["trusted"] is (wrong == 8) and record["rejudged"] is None
        compared = heldout("compare", base, candidate, "--out", tmp_path / f"r{name}",
                           "--judge-trust", trust)
        assert compared.returncode == 0, compared.stderr
        report = json.loads((tmp_path / f"r{name}" / "report.json").read_text())
        verdicts[name] = (compared.stdout.splitlines()[0], report)
    line, report = verdicts["075"]
    assert line.startswith("Not decidable (judge untrusted)")
    assert "60 of 80 labeled rows (75.0%" in report["headline"]["verdict"]
    assert report["protocol"]["judge_trust"]["agreement"]["agree"] == 60
    assert report["metrics"]["decidable"] == 0
    line, report = verdicts["090"]
    assert line.startswith("Better") and report["protocol"]["judge_trust"]["trusted"]


def test_fewer_than_60_labels_and_unmatched_labels_exit_2(tmp_path: Path):
    base, _ = rollout_files(tmp_path)
    table = pd.read_parquet(base)
    few = write_labels(tmp_path / "few.jsonl", table, 59, 0)
    done = heldout("judge-trust", few, "--judged", base, "--out", tmp_path / "t.json")
    assert done.returncode == 2 and "at least 60 hand-labeled rows" in done.stderr
    stray = tmp_path / "stray.jsonl"
    stray.write_text(json.dumps({"task_id": "nope", "sample": 0, "label": True}) + "\n")
    done = heldout("judge-trust", stray, "--judged", base, "--out", tmp_path / "t.json")
    assert done.returncode == 2 and "1 labeled row(s) not in" in done.stderr
    assert "nope sample 0" in done.stderr


@needs_sandbox
def test_a_flaky_judge_flips_when_judged_again(tmp_path: Path):
    """Tests that pass a right answer on a coin's toss: judged twice, the verdicts differ."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({
        "id": f"coin{i}", "prompt": 'def f(x):\n    """Return x."""\n', "entry_point": "f",
        "tests": "import os\nassert os.urandom(1)[0] < 128 and f(1) == 1\n"}) + "\n"
        for i in range(6)))
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"task_id": f"coin{i % 6}",
                                           "completion": "    return x\n"}) + "\n"
                               for i in range(60)))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"task_id": f"coin{i}", "sample": k, "label": True})
                              + "\n" for i in range(6) for k in range(10)))
    trust = tmp_path / "out" / "TRUST.json"
    done = heldout("judge-trust", labels, "--judged", samples, "--tasks", tasks, "--out", trust)
    assert done.returncode == 0, done.stderr
    record = json.loads(trust.read_text())
    # Each of 60 verdicts flips with probability 1/2: fewer than 10 flips has p < 1e-7.
    assert record["rejudged"] == 60 and record["flips"] >= 10
    assert not record["trusted"] and "judged again:" in done.stdout


def test_one_grader_reason_in_an_arm_voids_the_compare(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    table = pd.read_parquet(base)
    table["error"] = table["error"].where(table["passed"], "error: ImportError: no module x")
    table.to_parquet(base)
    done = heldout("compare", base, candidate, "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Not decidable (one grader reason)")
    verdict = json.loads((tmp_path / "r" / "report.json").read_text())["headline"]["verdict"]
    assert "covers 100% of 60 failing rows: error: ImportError (A.parquet)" in verdict


@needs_sandbox
def test_score_says_a_file_failing_for_one_reason_is_void(tmp_path: Path):
    samples = tmp_path / "broken.jsonl"
    samples.write_text("".join(json.dumps({"task_id": f"HumanEval/{i}",
                                           "completion": "    import numpyy\n"}) + "\n"
                               for i in range(25)))
    done = heldout("score", samples, "--tasks", "humaneval", "--no-canaries")
    assert done.returncode == 0, done.stderr
    assert ("score void: one grader reason covers 100% of 25 failing rows: failed: "
            "ModuleNotFoundError") in done.stderr
