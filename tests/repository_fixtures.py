"""A small repository task for the repository kind's suites: `calc`, whose `clamp` returns the
low bound for values above the high one. Built in memory, so each suite can derive diffs from it.
And the plain pytest run the judge is held to (the suites and benchmarks/bench_repository.py)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from heldout.tasks.patches import apply_patch, diff_trees, parse_patch
from heldout.tasks.repository import TEST_PYTHON, RepositoryTask

BASE = {
    "README.md": "# calc\n\nSmall arithmetic helpers.\n",
    "calc/__init__.py": "from calc.ops import add, clamp\n\n__all__ = [\"add\", \"clamp\"]\n",
    "calc/ops.py": ("def add(a, b):\n    return a + b\n\n\ndef clamp(value, low, high):\n"
                    "    if value < low:\n        return low\n    if value > high:\n"
                    "        return low\n    return value\n"),
    "tests/test_ops.py": ("from calc import add, clamp\n\n\ndef test_add():\n"
                          "    assert add(1, 2) == 3\n\n\ndef test_clamp_inside():\n"
                          "    assert clamp(2, 0, 3) == 2\n"),
}
FIXED_OPS = BASE["calc/ops.py"].replace("return low\n    return value",
                                        "return high\n    return value")
HIDDEN_TEST = ("from calc import clamp\n\n\ndef test_clamp_above():\n"
               "    assert clamp(5, 0, 3) == 3\n\n\ndef test_clamp_far_above():\n"
               "    assert clamp(100, -1, 7) == 7\n\n\ndef test_clamp_below():\n"
               "    assert clamp(-4, 0, 3) == 0\n")


def changed(edits: dict[str, str | None], base: dict[str, str] = BASE) -> str:
    """The diff that makes `edits` (path -> new text, None to delete) to `base`."""
    after = dict(base)
    for path, text in edits.items():
        if text is None:
            after.pop(path, None)
        else:
            after[path] = text
    return diff_trees(base, after)


def calc_task(**fields: object) -> RepositoryTask:
    record = {
        "id": "calc/clamp-above", "kind": "repository", "repo": "heldout/calc",
        "prompt": "clamp(5, 0, 3) returns 0: values above the high bound come back as the low "
                  "bound.\n",
        "files": BASE,
        "tests": changed({"tests/test_clamp.py": HIDDEN_TEST}),
        "reference": changed({"calc/ops.py": FIXED_OPS}),
        "fail_to_pass": ["tests/test_clamp.py::test_clamp_above",
                         "tests/test_clamp.py::test_clamp_far_above"],
        "pass_to_pass": ["tests/test_clamp.py::test_clamp_below", "tests/test_ops.py::test_add",
                         "tests/test_ops.py::test_clamp_inside"],
        "public_tests": '["tests/test_ops.py::test_clamp_inside"]',
        **fields,
    }
    return RepositoryTask.model_validate(record)


def require_test_python(backend: str) -> None:
    """Skip, saying how to fix it, where the subprocess backend's test interpreter lacks pytest
    (the docker image has it: scripts/container-engine.sh installs python3-pytest)."""
    if backend != "subprocess":
        return
    found = subprocess.run([TEST_PYTHON, "-c", "import pytest"], capture_output=True)
    if found.returncode != 0:
        pytest.skip(f"the repository kind runs tests with {TEST_PYTHON} and Debian's pytest: "
                    "apt-get install python3-pytest (.ci/run does)")


def plain_pytest_passes(task: RepositoryTask, diff: str) -> bool:
    """What a plain mutation-testing run says: the hidden tests with pytest, on the host, on
    the repository with the diff applied (no judge, no sandbox, no filter)."""
    tree = apply_patch(apply_patch(task.files, parse_patch(diff)), parse_patch(task.tests))
    with tempfile.TemporaryDirectory() as folder:
        for path, text in tree.items():
            (Path(folder) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / path).write_text(text)
        ran = subprocess.run([TEST_PYTHON, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              *task.expected_tests], cwd=folder, capture_output=True,
                             env={"PYTHONPATH": folder, "PATH": "/usr/bin:/bin",
                                  "PYTHONDONTWRITEBYTECODE": "1"}, timeout=120)
    return ran.returncode == 0
