from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from heldout.errors import InputFileError
from heldout.tasks.record import Task, tasks_digest
from heldout.tasks.sources import load_tasks
from tests.conftest import REPO, task_record, write_jsonl


def test_humaneval_has_164_complete_tasks():
    tasks = load_tasks("humaneval")
    assert len(tasks) == 164
    assert len({t.id for t in tasks}) == 164
    first = next(t for t in tasks if t.id == "HumanEval/0")
    assert first.entry_point == "has_close_elements"
    assert first.group == "HumanEval/0"
    assert first.prompt.startswith("from typing import List")
    assert first.reference and "return" in first.reference
    assert all(t.tests.rstrip().endswith(f"check({t.entry_point})") for t in tasks)


def test_humaneval_reference_passes_its_hidden_tests_and_a_wrong_body_does_not():
    task = load_tasks("humaneval")[0]
    namespace: dict = {}
    exec(task.prompt + task.reference + "\n" + task.tests, namespace)
    with pytest.raises(AssertionError):
        exec(task.prompt + "    return False\n" + task.tests, {})


def test_jsonl_round_trip_keeps_content_and_hash(tmp_path: Path):
    records = [task_record("a", group="g1", reference="    return x\n"), task_record("b")]
    tasks = load_tasks(write_jsonl(tmp_path / "t.jsonl", records))
    assert [t.id for t in tasks] == ["a", "b"]
    assert tasks[1].group == "b", "a task without a group is its own group"
    again = load_tasks(write_jsonl(tmp_path / "u.jsonl", [t.to_record() for t in tasks]))
    assert [t.content_hash for t in again] == [t.content_hash for t in tasks]


def test_content_hash_changes_if_and_only_if_content_changes():
    task = Task.model_validate(task_record("a"))
    same = Task.model_validate(dict(reversed(list(task_record("a").items()))))
    edited = Task.model_validate(task_record("a", prompt="def g():\n"))
    assert task.content_hash == same.content_hash
    assert task.content_hash != edited.content_hash
    assert tasks_digest([task, edited]) == tasks_digest([edited, task])
    assert tasks_digest([task]) != tasks_digest([edited])


def test_blank_lines_are_skipped_and_a_bom_is_accepted(tmp_path: Path):
    path = tmp_path / "t.jsonl"
    write_jsonl(path, [task_record("a"), task_record("b")])
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\n\n", 1))
    assert [t.id for t in load_tasks(path)] == ["a", "b"]


GOOD = '{"id": "ok", "prompt": "p", "entry_point": "f", "tests": "t"}'

BAD_FILES = {
    "missing field": ('{"id": "a", "prompt": "p", "entry_point": "f"}', 1, "tests",
                      "required field is missing"),
    "empty field": ('{"id": "a", "prompt": "  ", "entry_point": "f", "tests": "t"}', 1,
                    "prompt", "must not be empty"),
    "duplicate id": (f"{GOOD}\n{GOOD}", 2, "id", "first on line 1"),
    "invalid json": (f'{GOOD}\n{{"id": "a", "prompt": }}', 2, None,
                     "invalid JSON: Expecting value at column 23"),
    # Python's message ends "starting at": the place follows it, once.
    "unterminated string": (f'{GOOD}\n{{"id": "a', 2, None,
                            "invalid JSON: Unterminated string starting at column 8"),
    "unknown kind": ('{"id": "a", "kind": "repo-patch", "prompt": "p", "entry_point": "f", '
                     '"tests": "t"}', 1, "kind", "unknown kind 'repo-patch'"),
    "wrong type": ('{"id": 7, "prompt": "p", "entry_point": "f", "tests": "t"}', 1, "id",
                   "expected a string, got an integer"),
    "unknown field": (GOOD[:-1] + ', "entrypoint": "f"}', 1, "entrypoint", "unknown field"),
    "not an object": ('["a"]', 1, None, "expected a JSON object, got an array"),
    "empty file": ("\n  \n", None, None, "no tasks: the file is empty"),
}


def run_validate(path: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "tasks", "validate", str(path)],
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize("case", BAD_FILES, ids=list(BAD_FILES))
def test_validate_names_file_line_and_field_and_exits_2(tmp_path: Path, case: str):
    content, line, field, message = BAD_FILES[case]
    path = tmp_path / "tasks.jsonl"
    path.write_text(content + "\n", encoding="utf-8")
    done = run_validate(path)
    assert done.returncode == 2, done.stderr
    where = f"{path}:{line}:" if line else f"{path}:"
    assert where in done.stderr
    if field:
        assert f"field '{field}'" in done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_validate_reports_non_utf8_bytes_with_line_and_column(tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(GOOD.encode() + b'\n{"id": "caf\xe9"}\n')
    done = run_validate(path)
    assert done.returncode == 2
    assert f"{path}:2: not UTF-8: byte 0xe9 at column 12" in done.stderr


def test_every_problem_is_reported_in_one_pass(tmp_path: Path):
    path = write_jsonl(tmp_path / "t.jsonl", [{"id": "a"}, task_record("b"), {"id": 3}])
    with pytest.raises(InputFileError) as caught:
        load_tasks(path)
    lines = {p.line for p in caught.value.problems}
    assert lines == {1, 3}


def test_missing_file_is_a_clear_error(tmp_path: Path):
    done = run_validate(tmp_path / "nope.jsonl")
    assert done.returncode == 2
    assert "no such file" in done.stderr and "humaneval" in done.stderr


def test_validate_prints_one_ok_line_with_the_count(tmp_path: Path):
    path = write_jsonl(tmp_path / "t.jsonl", [task_record("a", group="g"), task_record("b")])
    done = run_validate(path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"OK: 2 tasks in 2 groups in {path}")
    assert len(done.stdout.strip().splitlines()) == 1


def test_every_document_the_code_points_a_user_to_exists():
    """A hint that names a file (and a section in quotes) names one that is there (issue 27:
    a task-file error pointed at a README section that was gone)."""
    pointer = re.compile(r"((?:docs/[\w-]+|examples/README|README)\.md)(?:, '([^']+)')?")
    found = []
    for folder in ("heldout", "stages", "flows"):
        for path in (REPO / folder).rglob("*.py"):
            for document, heading in pointer.findall(path.read_text(encoding="utf-8")):
                found.append(document)
                assert (REPO / document).is_file(), f"{path}: {document}"
                if heading:
                    text = (REPO / document).read_text(encoding="utf-8")
                    assert re.search(rf"^#+ .*{re.escape(heading)}", text, re.M), \
                        f"{path}: {document} has no section {heading!r}"
    assert "docs/tasks.md" in found and len(found) > 10
