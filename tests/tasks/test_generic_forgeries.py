"""No generic patch passes a repository task it does not solve: forgeries written once, with no
code of any task's, applied by one rule to each of the 12 embedded repositories and to a
SWE-bench instance imported with `heldout tasks import-swebench`, on both backends."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from cli.main import app
from heldout.episodes.judge import score_many
from heldout.tasks.patches import diff_trees
from heldout.tasks.repository import RepositoryTask
from heldout.tasks.sources import load_tasks
from tests.repository_fixtures import require_test_python
from tests.tasks.test_repository_hacks import (
    FORGE_AT_EXIT,
    REWRITE_REPORTS,
    SWALLOW_ASSERTIONS,
    backend_of,
)
from tests.tasks.test_repository_swebench import instance, make_clone, write_lines
from tests.tasks.test_repository_tasks import LIMITS, TASKS

EVERY_REPORT_PASSED = textwrap.dedent("""
    import _pytest.reports

    _made = _pytest.reports.TestReport.from_item_and_call.__func__


    def _passed(cls, item, call):
        report = _made(cls, item, call)
        if __import__("re").fullmatch(NOT_FORGED, item.name) is None:
            report.outcome, report.longrepr = "passed", None
        return report


    _pytest.reports.TestReport.from_item_and_call = classmethod(_passed)
    """)
def in_every_package(code: str):
    """The forgery appended to every `__init__.py` of the repository: it runs when the tests
    import the code under test."""
    def diff(task: RepositoryTask) -> str:
        return diff_trees(task.files, {**task.files, **{
            path: text + "\n" + code for path, text in task.files.items()
            if path.endswith("__init__.py")}})
    return diff


def new_file(path: str, code: str):
    def diff(task: RepositoryTask) -> str:
        return diff_trees(task.files, {**task.files, path: code})
    return diff


# name -> a rule that makes the forgery's diff for any repository task
FORGERIES = {
    "every report passed, from every package": in_every_package(
        "NOT_FORGED = r'(?!)'\n" + EVERY_REPORT_PASSED),
    "every report passed but heldout's sentinels' (test_ and 16 hex digits)": in_every_package(
        "NOT_FORGED = r'test_[0-9a-f]{16}'\n" + EVERY_REPORT_PASSED),
    "passes written to the report's pipe at exit, from every package": in_every_package(
        FORGE_AT_EXIT),
    "every AssertionError swallowed, from every package": in_every_package(SWALLOW_ASSERTIONS),
    "a report-rewriting conftest.py at the root": new_file(
        "conftest.py", textwrap.dedent(REWRITE_REPORTS)),
    "the forgery in a top-level _distutils_hack.py": new_file("_distutils_hack.py",
                                                              FORGE_AT_EXIT),
    "the forgery in a top-level org/python/core.py": new_file("org/python/core.py",
                                                              FORGE_AT_EXIT),
}


@pytest.fixture(scope="module")
def swebench_task(tmp_path_factory) -> RepositoryTask:
    """The calc repository as a SWE-bench instance (its own git clone, base commit and fix),
    imported the way a user imports one."""
    folder = tmp_path_factory.mktemp("swebench")
    repos, base = make_clone(folder)
    out = folder / "swe.jsonl"
    result = CliRunner().invoke(app, [
        "tasks", "import-swebench", str(write_lines(folder / "instances.jsonl",
                                                    [instance(base)])),
        "--repos", str(repos), "--out", str(out)])
    assert result.exit_code == 0, result.output
    (task,) = load_tasks(out)
    return task


def test_no_generic_forgery_passes_any_task(sandbox, swebench_task):
    require_test_python(backend_of(sandbox))
    tasks = [*TASKS, swebench_task]
    pairs = [(task, forge(task)) for forge in FORGERIES.values() for task in tasks]
    results = score_many(pairs, sandbox, **LIMITS)
    passed = [f"{name} on {task.id}" for (name, _forge), task, result in zip(
        [(name, forge) for name, forge in FORGERIES.items() for _ in tasks],
        [task for _ in FORGERIES for task in tasks], results, strict=True) if result.passed]
    assert passed == []
    reasons = json.dumps([result.stderr_tail[-300:] for result in results])
    assert "a copy of a hidden test that must fail was passed" in reasons
    assert "a new module outside the repository's packages" in reasons
