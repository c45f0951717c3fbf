"""Hostile command lines and lines of files (issue 22): `heldout score` and `heldout compare` take
no option they cannot use, and no line of a samples file or of the test-access ledger makes
them, or `heldout audit`, print a traceback. A bad option is one line naming it, exit 2; a bad
samples line one line naming file:line, exit 2; a bad ledger line the audit's finding, one line
naming the ledger's line, exit 1 (the audit's own exit for what it finds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heldout.custody.guard import LEDGER
from heldout.custody.ledger import parsed_lines, verify_chain
from heldout.json_lines import LineError, read_line
from tests.pipeline.test_cli import heldout

GOOD = {"task_id": "HumanEval/0", "completion": "    return True\n"}


def samples(tmp_path: Path, second: bytes) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + second + b"\n")
    return path


def errors_only(done) -> list[str]:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done.stderr.strip().splitlines()


@pytest.mark.parametrize(("option", "named"), [
    (["--timeout-s", "nan"], "Invalid value for '--timeout-s': nan is not a number of seconds "
                             "in (0, 3600]"),
    (["--timeout-s", "inf"], "Invalid value for '--timeout-s': inf is not a number of seconds"),
    (["--timeout-s", "1e308"], "Invalid value for '--timeout-s': 1e+308 is not a number of"),
    (["--timeout-s", "0"], "Invalid value for '--timeout-s': 0 is not a number of seconds"),
    (["--workers", "-3"], "Invalid value for '--workers':"),
    (["--workers", "0"], "Invalid value for '--workers':"),
    (["--workers", "abc"], "Invalid value for '--workers':"),
    (["--memory-mb", "0"], "Invalid value for '--memory-mb':"),
    (["--memory-mb", str(2**70)], "Invalid value for '--memory-mb':"),
    (["--ks", "0"], "Invalid value for '--ks': '0': each k must be from 1 to 1000000"),
    (["--ks", str(2**70)], "Invalid value for '--ks':"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else None)
@pytest.mark.parametrize("command", ["score", "compare"])
def test_an_option_it_cannot_use_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, command: str, option: list[str], named: str
):
    if command == "compare" and option[0] == "--ks":
        pytest.skip("compare has no --ks")
    path = samples(tmp_path, json.dumps(GOOD | {"sample": 1}).encode())
    files = [path] if command == "score" else [path, path, "--out", tmp_path / "out"]
    done = heldout(command, *files, "--tasks", "humaneval", *option)
    lines = errors_only(done)
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and lines[0].startswith(f"error: {named}"), lines
    assert lines[0].endswith(f"{command} --help)")
    assert not (tmp_path / "s.parquet").exists()


HOSTILE_SAMPLES = {
    "100,000 deep": (b"[" * 100_000, "nested deeper than 64 levels of arrays and objects"),
    "deep in a field": (b'{"task_id": "HumanEval/1", "completion": "x", "passed": '
                        + b"[" * 100_000 + b"]" * 100_000 + b"}",
                        "nested deeper than 64 levels of arrays and objects"),
    "a huge sample": (json.dumps(GOOD | {"task_id": "HumanEval/1", "sample": 2**70}).encode(),
                      "field 'sample': must be a whole number ≥ 0 (at most 2**63 - 1), not "
                      "1180591620717411303424 (int)"),
    "5000 digits": (b'{"task_id": "HumanEval/1", "completion": "x", "sample": '
                    + b"9" * 5000 + b"}", "an integer of 5000 digits: at most 4000"),
    "invalid UTF-8": (b'{"task_id": "HumanEval/1", "completion": "    pass \xff\xfe"}',
                      "not UTF-8: byte 0xff at column 52; save the file as UTF-8"),
}


@pytest.mark.parametrize("case", list(HOSTILE_SAMPLES))
def test_a_hostile_samples_line_is_named_by_file_and_line_and_exit_2(tmp_path: Path, case):
    line, message = HOSTILE_SAMPLES[case]
    path = samples(tmp_path, line)
    for args in (["score", path], ["compare", path, path, "--out", tmp_path / "out"]):
        done = heldout(*args, "--tasks", "humaneval")
        lines = errors_only(done)
        assert done.returncode == 2, done.stderr
        assert lines[0] == f"error: {path}:2: {message}", lines
        assert lines[1].startswith("A samples file is JSON Lines") and len(lines) == 2


def test_the_line_reader_says_why_whatever_the_bytes():
    for raw, why in [(b"[" * 100_000, "nested deeper than 64"), (b"9" * 5000, "5000 digits"),
                     (b"\xff", "not UTF-8: byte 0xff at column 1"),
                     (b'{"a": ', "not JSON (Expecting value at column 7)")]:
        with pytest.raises(LineError, match=why.replace("(", r"\(").replace(")", r"\)")):
            read_line(raw)
    assert read_line(b'{"a": [1, "[[[["], "b": 2}') == {"a": [1, "[[[["], "b": 2}


HOSTILE_LEDGER = {
    "100,000 deep": ("[" * 100_000, "nested deeper than 64 levels of arrays and objects"),
    "5000 digits": ('{"seq": ' + "9" * 5000 + "}", "an integer of 5000 digits: at most 4000"),
}


@pytest.fixture
def project(project: Path, monkeypatch) -> Path:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    return project


@pytest.mark.parametrize("case", list(HOSTILE_LEDGER))
def test_a_hostile_ledger_line_is_the_audits_finding_at_its_line_not_a_crash(
    project: Path, case: str
):
    line, reason = HOSTILE_LEDGER[case]
    ledger = project / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(line + "\n", encoding="utf-8")
    done = heldout("audit", cwd=project)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 1, done.stderr
    assert f"ledger broken at line 1 of {LEDGER}: {reason}" in done.stderr.splitlines()


def test_a_ledger_line_that_is_not_utf8_breaks_the_chain_at_its_line(tmp_path: Path):
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes(b'{"seq": 1, "user": "\xff"}\n')
    broken = verify_chain(ledger, None)
    assert (broken.line, broken.reason) == (1, "not UTF-8 text: a byte no UTF-8 writer wrote")
    assert parsed_lines("[" * 100_000 + "\n" + '{"seq": ' + "9" * 5000 + "}\n{}") == [{}]


def test_an_export_that_is_not_utf8_is_the_audits_finding_not_a_crash(project: Path):
    ledger = project / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_bytes(b'{"seq": 1, "user": "\xff"}\n')
    done = heldout("audit", cwd=project)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 1, done.stderr
    assert (f"ledger broken at line 1 of {LEDGER}: not UTF-8 text: a byte no UTF-8 writer wrote"
            in done.stderr.splitlines()), done.stderr
