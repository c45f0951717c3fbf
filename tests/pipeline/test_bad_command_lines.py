"""Every bad input issue 39 item 7 found: one line naming what is wrong, exit 2, nothing written
(a traceback, an input silently ignored or a file half-written are each a failure here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report.test_compare_cli import rollout_files
from tests.report.test_score_cli import heldout


def refused(done, *expected: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for text in expected:
        assert text in lines[0]


@pytest.fixture
def bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {"missing": tmp_path / "missing.yaml", "folder": tmp_path / "folder",
             "latin1": tmp_path / "latin1.yaml", "deep": tmp_path / "deep.yaml",
             "file": tmp_path / "a-file"}
    files["folder"].mkdir()
    files["latin1"].write_bytes(b"set:\n  harness.n: \xff\n")
    files["deep"].write_text("set: " + "[" * 10_000 + "]" * 10_000 + "\n")
    files["file"].write_text("not a folder\n")
    return files


@pytest.mark.parametrize(("bad", "expected"), [
    ("missing", "does not exist"), ("folder", "is a directory"),
    ("latin1", "not UTF-8 text (byte 18)"), ("deep", "nested too deeply"),
])
def test_params_use_refuses_what_it_cannot_read_and_leaves_params_alone(project, bad_files,
                                                                        bad, expected):
    before = (project / "params.yaml").read_bytes()
    refused(heldout("params", "use", bad_files[bad], cwd=project), expected)
    assert (project / "params.yaml").read_bytes() == before


def test_compare_and_score_refuse_an_out_folder_that_is_a_file(tmp_path, bad_files):
    base, candidate = rollout_files(tmp_path)
    refused(heldout("compare", base, candidate, "--out", bad_files["file"]),
            "'--out'", "is a file")
    refused(heldout("score", base, "--out", bad_files["file"]), "'--out'", "is a file")
    assert bad_files["file"].read_text() == "not a folder\n"


def test_a_negative_target_effect_is_refused(tmp_path):
    base, candidate = rollout_files(tmp_path)
    refused(heldout("compare", base, candidate, "--out", tmp_path / "out", "--target-effect",
                    "-1"), "'--target-effect'", "in (0, 1]")
    assert not (tmp_path / "out").exists()


def test_import_swebench_of_a_missing_file(tmp_path):
    refused(heldout("tasks", "import-swebench", tmp_path / "none.jsonl", "--repos", tmp_path,
                    "--out", tmp_path / "tasks.jsonl"), "'instances'", "does not exist")
    assert not (tmp_path / "tasks.jsonl").exists()


def test_ledger_merge_of_missing_files_and_of_garbage(tmp_path):
    refused(heldout("ledger", "merge", tmp_path / "a", tmp_path / "b", tmp_path / "c"),
            "no such file")
    assert not (tmp_path / "b").exists()
    # Nested 100,000 deep: kept as a line of its own (the audit names it), never a crash.
    sides = [tmp_path / name for name in ("base", "ours", "theirs")]
    for side in sides:
        side.write_text("[" * 100_000 + "\n")
    done = heldout("ledger", "merge", *sides)
    assert done.returncode == 0, done.stderr
    assert sides[1].read_text() == "[" * 100_000 + "\n"


def test_audit_reason_without_resolve_is_refused(project):
    done = heldout("audit", "--reason", "looked at it", cwd=project)
    refused(done, "--reason", "--resolve")
    assert "audit OK" not in done.stdout  # refused before the audit ran, not after it
