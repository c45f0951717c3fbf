"""SWE-bench's own formats: instances imported as repository tasks from a real git clone whose
history holds the fix, and predictions files scored and compared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from cli.main import app
from heldout.bounded import MAX_FILE_BYTES
from heldout.tasks.patches import MAX_DIFF_BYTES
from heldout.tasks.sources import load_tasks
from heldout.tasks.swebench import as_sample, node_list
from tests.repository_fixtures import BASE, FIXED_OPS, calc_task, require_test_python

TASK = calc_task()
GIT = ["git", "-c", "user.name=heldout", "-c", "user.email=heldout@localhost"]


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, str]:
    return make_clone(tmp_path)


def make_clone(tmp_path: Path) -> tuple[Path, str]:
    """A clone at repos/heldout__calc: the base commit, then the fix, a tag and a branch; the
    repos folder and the base commit."""
    folder = tmp_path / "repos" / "heldout__calc"
    for path, text in BASE.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)

    def git(*arguments: str) -> str:
        return subprocess.run([*GIT, *arguments], cwd=folder, check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    (folder / "calc/ops.py").write_text(FIXED_OPS)
    git("commit", "-qam", "fix clamp above the high bound")
    git("tag", "v1.0.1")
    git("branch", "fix-backup")
    return folder.parent, base


def instance(base: str, **fields: object) -> dict:
    return {"instance_id": "heldout__calc-1", "repo": "heldout/calc", "base_commit": base,
            "patch": TASK.reference, "test_patch": TASK.tests, "problem_statement": TASK.prompt,
            "FAIL_TO_PASS": json.dumps(TASK.fail_to_pass), "PASS_TO_PASS": TASK.pass_to_pass,
            "version": "1.0", **fields}


def write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_instances_import_as_tasks_with_nothing_of_the_future(tmp_path, clone):
    repos, base = clone
    instances = write_lines(tmp_path / "instances.jsonl", [
        instance(base), instance(base, instance_id="unittest-style",
                                 FAIL_TO_PASS='["test_clamp (calc.tests.Clamp)"]'),
        instance(base, instance_id="no-clone", repo="someone/else")])
    out = tmp_path / "tasks" / "swe.jsonl"
    result = CliRunner().invoke(app, ["tasks", "import-swebench", str(instances), "--repos",
                                      str(repos), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "instances.jsonl:2 (unittest-style): FAIL_TO_PASS: 'test_clamp (calc.tests.Clamp)' " \
           "is not a pytest node id" in result.output
    assert "instances.jsonl:3 (no-clone): repo: no git clone of someone/else" in result.output
    assert "wrote 1 repository tasks from 3 instances" in result.output
    [task] = load_tasks(out)
    assert (task.id, task.group, task.kind) == ("heldout__calc-1", "heldout/calc", "repository")
    assert task.files == BASE  # the base commit's tree: not the fix, no .git, no tag, no branch
    assert task.fail_to_pass == TASK.fail_to_pass and task.metadata["source"] == "swe-bench"


def test_json_encoded_lists_and_predictions_read_as_samples():
    assert node_list('["a.py::t"]', "FAIL_TO_PASS") == ["a.py::t"]
    with pytest.raises(ValueError, match="not a JSON list"):
        node_list("a.py::t", "FAIL_TO_PASS")
    assert as_sample({"instance_id": "i", "model_patch": None, "model_name_or_path": "m"}) == {
        "task_id": "i", "completion": ""}
    assert as_sample({"task_id": "t", "completion": "c"}) == {"task_id": "t", "completion": "c"}


def test_predictions_are_scored_and_compared(tmp_path, clone, monkeypatch):
    require_test_python("subprocess")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    repos, base = clone
    tasks = tmp_path / "swe.jsonl"
    runner = CliRunner()
    imported = runner.invoke(app, ["tasks", "import-swebench", str(write_lines(
        tmp_path / "instances.jsonl", [instance(base)])), "--repos", str(repos), "--out",
        str(tasks)])
    assert imported.exit_code == 0, imported.output
    fixed = write_lines(tmp_path / "fixed.jsonl", [
        {"instance_id": "heldout__calc-1", "model_patch": TASK.reference,
         "model_name_or_path": "fixer"}])
    empty = write_lines(tmp_path / "empty.jsonl", [
        {"instance_id": "heldout__calc-1", "model_patch": None, "model_name_or_path": "noop"}])
    for predictions, passed in ((fixed, True), (empty, False)):
        scored = runner.invoke(app, ["score", str(predictions), "--tasks", str(tasks)])
        assert scored.exit_code == 0, scored.output
        rows = pd.read_parquet(predictions.with_suffix(".parquet"))
        assert rows["passed"].tolist() == [passed]
    compared = runner.invoke(app, ["compare", str(fixed), str(empty), "--tasks", str(tasks),
                                   "--out", str(tmp_path / "compared")])
    assert compared.exit_code == 0, compared.output
    report = json.loads((tmp_path / "compared" / "report.json").read_text())
    assert "not decidable" in json.dumps(report)  # one task: far too few, and it says so


def heldout(*arguments: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, arguments)],
                          capture_output=True, text=True, timeout=300)


def test_an_instance_with_a_patch_over_1_mib_is_refused_in_a_line_naming_it(tmp_path, clone):
    repos, base = clone
    huge = TASK.tests + "+" * MAX_DIFF_BYTES
    instances = write_lines(tmp_path / "instances.jsonl", [
        instance(base), instance(base, instance_id="huge-tests", test_patch=huge)])
    out = tmp_path / "swe.jsonl"
    result = CliRunner().invoke(app, ["tasks", "import-swebench", str(instances), "--repos",
                                      str(repos), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (f"skipped {instances}:2 (huge-tests): test_patch is {len(huge):,} bytes; "
            "heldout reads a diff of at most 1,048,576 bytes (1 MiB)\n") in result.output
    assert [task.id for task in load_tasks(out)] == ["heldout__calc-1"]
    alone = write_lines(tmp_path / "alone.jsonl", [
        instance(base, instance_id="huge-fix", patch=TASK.reference + "é" * (2**19 + 1))])
    refused = heldout("tasks", "import-swebench", alone, "--repos", repos, "--out", out)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"error: no instance could be imported: {alone}:1 (huge-fix): patch is "
        f"{len(TASK.reference.encode()) + 2**20 + 2:,} bytes; heldout reads a diff of at most "
        "1,048,576 bytes (1 MiB)"]


def test_a_model_patch_over_1_mib_fails_its_own_instance_in_one_line(tmp_path, clone):
    require_test_python("subprocess")
    repos, base = clone
    tasks = tmp_path / "swe.jsonl"
    imported = CliRunner().invoke(app, ["tasks", "import-swebench", str(write_lines(
        tmp_path / "instances.jsonl", [instance(base), instance(base, instance_id="calc-2")])),
        "--repos", str(repos), "--out", str(tasks)])
    assert imported.exit_code == 0, imported.output
    predictions = write_lines(tmp_path / "predictions.jsonl", [
        {"instance_id": "heldout__calc-1", "model_patch": TASK.reference},
        {"instance_id": "calc-2", "model_patch": TASK.reference + "\n" * MAX_DIFF_BYTES}])
    scored = CliRunner().invoke(app, ["score", str(predictions), "--tasks", str(tasks),
                                      "--no-canaries"])
    assert scored.exit_code == 0, scored.output
    rows = pd.read_parquet(predictions.with_suffix(".parquet")).set_index("task_id")
    assert rows["passed"].to_dict() == {"heldout__calc-1": True, "calc-2": False}
    reason = rows.loc["calc-2", "error"]
    assert "\n" not in reason and reason.endswith(
        f"the diff is {len(TASK.reference) + MAX_DIFF_BYTES:,} bytes; heldout reads "
        "a diff of at most 1,048,576 bytes (1 MiB)"), reason


def test_a_predictions_file_over_64_mib_is_refused_unread_in_one_line(tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    with predictions.open("wb") as file:  # sparse: nothing of it is written, or read
        file.truncate(MAX_FILE_BYTES + 1)
    refused = heldout("score", predictions, "--tasks", "humaneval")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: {predictions}: more than 67,108,864 bytes (64 MiB): heldout reads a samples "
        "file of at most that; split it"]
