"""The embedded repository set (tasks/examples/repository.jsonl, 12 repositories written here):
current with its sources, sound, the oracle passing every task and the blind canary none, and
every mutant of every reference patch judged as a plain pytest run of the hidden tests judges
it, with the same verdicts on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from heldout.agents.canaries import BLIND_ANSWERS
from heldout.agents.patch_mutation import patch_mutants
from heldout.episodes.judge import score_many
from heldout.errors import InputFileError
from heldout.tasks.repository import RepositoryTask
from heldout.tasks.repository_checks import check_repository_tasks
from heldout.tasks.sources import load_jsonl_bytes, load_tasks
from tests.repository_fixtures import plain_pytest_passes, require_test_python

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tasks" / "examples" / "repository.jsonl"
TASKS: list[RepositoryTask] = load_tasks(EXAMPLES)
LIMITS = {"timeout_s": 30.0, "memory_mb": 1024}
MUTANTS = [(task, mutant) for task in TASKS for group in patch_mutants(task.files, task.reference)
           for mutant in group]


def backend_of(sandbox) -> str:
    return "docker" if "Docker" in type(sandbox).__name__ else "subprocess"


def test_the_set_is_what_its_script_writes():
    require_test_python("subprocess")
    checked = subprocess.run([sys.executable, "scripts/make_repository_tasks.py", "--check"],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_twelve_repositories_each_its_own_group_with_tests_both_ways():
    assert len(TASKS) == 12 and len({task.group for task in TASKS}) == 12
    assert all(task.fail_to_pass and task.pass_to_pass and task.reference for task in TASKS)
    assert sum(bool(task.public_tests) for task in TASKS) == 6
    assert all(len([p for p in task.files if p.endswith(".py")]) >= 5 for task in TASKS)


def test_validate_refuses_a_task_the_base_already_passes(subprocess_sandbox):
    require_test_python("subprocess")
    task = TASKS[0]
    passing_at_base = task.pass_to_pass[0]
    unsound = task.model_copy(update={"fail_to_pass": [*task.fail_to_pass, passing_at_base],
                                      "pass_to_pass": task.pass_to_pass[1:]})
    found = check_repository_tasks([task, unsound], subprocess_sandbox, **LIMITS)
    assert found == {task.id: [f"fail_to_pass test {passing_at_base} already passes at the "
                               "base"]}


def test_a_snapshot_path_that_is_not_there_is_reported_on_its_line(tmp_path):
    line = EXAMPLES.read_bytes().splitlines()[0].replace(b"/base", b"/nowhere")
    with pytest.raises(InputFileError) as refused:
        load_jsonl_bytes(line + b"\n", "tasks.jsonl", folder=EXAMPLES.parent)
    [problem] = refused.value.problems
    assert problem.line == 1 and "snapshot:" in problem.message and "nowhere" in problem.message


def test_the_oracle_passes_every_task_and_the_blind_canary_none(sandbox):
    require_test_python(backend_of(sandbox))
    pairs = [(task, task.reference) for task in TASKS]
    pairs += [(task, BLIND_ANSWERS["repository"](task)) for task in TASKS]
    results = score_many(pairs, sandbox, **LIMITS)
    assert [r.passed for r in results] == [True] * 12 + [False] * 12, [
        r.stderr_tail[-300:] for r in results if r.passed != (results.index(r) < 12)]


@pytest.fixture(scope="module")
def plain_verdicts() -> list[bool]:
    require_test_python("subprocess")
    return [plain_pytest_passes(task, mutant) for task, mutant in MUTANTS]


def test_every_mutant_is_judged_as_plain_pytest_judges_it(sandbox, plain_verdicts):
    require_test_python(backend_of(sandbox))
    assert len(MUTANTS) >= 60
    results = score_many(MUTANTS, sandbox, **LIMITS)
    judged = [result.passed for result in results]
    disagreements = [(task.id, result.stderr_tail[-200:])
                     for (task, _), result, plain in zip(MUTANTS, results, plain_verdicts,
                                                         strict=True)
                     if result.passed != plain]
    assert disagreements == []
    assert sum(judged) <= len(judged) * 0.1  # the hidden tests kill at least 90% of them


def test_a_sealed_repository_source_holds_its_trees_not_paths_outside_the_seal(tmp_path):
    import shutil

    from heldout.custody.keys import TestKey
    from heldout.custody.seal import unseal
    from heldout.custody.task_source import seal_tasks

    folder = tmp_path / "tasks" / "examples"
    folder.mkdir(parents=True)
    shutil.copy2(EXAMPLES, folder / "repository.jsonl")
    shutil.copytree(REPO / "tasks" / "repositories", tmp_path / "tasks" / "repositories")
    key = TestKey(bytes.fromhex("55" * 32))
    sealed, tasks = seal_tasks(folder / "repository.jsonl", key.public)
    shutil.rmtree(tmp_path / "tasks" / "repositories")  # the seal needs nothing outside it
    plain = unseal(sealed, key)
    assert b'"snapshot"' not in plain
    assert load_jsonl_bytes(plain, "repository.sealed") == tasks == TASKS


def test_a_snapshot_with_a_symlink_or_a_binary_file_is_refused_naming_it(tmp_path):
    from heldout.tasks.snapshots import SnapshotError, read_snapshot

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "ok.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "link.py").symlink_to("/etc/passwd")
    with pytest.raises(SnapshotError, match=r"pkg/link.py: a symlink"):
        read_snapshot(tmp_path)
    (tmp_path / "pkg" / "link.py").unlink()
    (tmp_path / "pkg" / "blob.bin").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SnapshotError, match=r"pkg/blob.bin: not UTF-8 text"):
        read_snapshot(tmp_path)
