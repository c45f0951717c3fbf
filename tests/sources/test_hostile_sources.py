"""Another harness's file, hostile or broken: one sentence naming the file, within heldout's input
bounds, never a crash (issue 40, under issue 39 item 7's bounds)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from heldout.bounded import MAX_DOCUMENT_BYTES, MAX_DOCUMENT_VALUES, MAX_LINE_BYTES
from heldout.errors import HeldoutError, InputFileError
from heldout.sources import read_source
from heldout.sources.sniff import source_kind
from tests.sources.test_readers import INSPECT, SWE, lm_file


def read(path: Path):
    return read_source(path, source_kind(path))


def test_a_document_of_millions_of_values_is_refused_before_it_is_parsed(tmp_path: Path):
    path = tmp_path / "summary.json"
    path.write_text('{"resolved_ids": [' + "[]," * MAX_DOCUMENT_VALUES + '[]], '
                    '"total_instances": 1}')
    # Counted as commas and brackets outside strings: at most twice the values, never fewer.
    with pytest.raises(InputFileError, match=rf"up to {2 * MAX_DOCUMENT_VALUES + 5:,} JSON values: "
                                             rf"heldout reads a results file of at most "
                                             rf"{MAX_DOCUMENT_VALUES:,}"):
        source_kind(path)


def test_a_document_over_its_bound_is_refused_unread(tmp_path: Path):
    path = tmp_path / "eval_results.json"
    with path.open("wb") as sparse:  # no disk spent: a brace, then a hole past the bound
        sparse.write(b'{"eval": ')
    os.truncate(path, MAX_DOCUMENT_BYTES + 1)
    with pytest.raises(InputFileError, match=r"more than 67,108,864 bytes \(64 MiB\)"):
        source_kind(path)


def test_nesting_and_strings_in_a_document_are_read_safely(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"eval": ' + "[" * 100 + "]" * 100 + "}")
    with pytest.raises(InputFileError, match="nested deeper than 64 levels"):
        source_kind(deep)
    commas = tmp_path / "commas.json"  # commas inside strings are no values
    commas.write_text(json.dumps({"resolved_ids": ["," * 3_000_000], "total_instances": 1}))
    assert source_kind(commas) == "SWE-bench summary"


def test_a_long_line_of_an_lm_eval_file_is_one_problem_with_its_line(tmp_path: Path):
    lines = lm_file("seed1").read_text().splitlines()
    lines.insert(2, '{"doc_id": 99, "pad": "' + "x" * (MAX_LINE_BYTES + 10) + '"}')
    path = tmp_path / "samples_qa_mc_2026-01-01T00-00-00.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFileError, match=r":3: longer than 4,194,304 bytes"):
        read(path)


def test_a_file_of_no_known_harness_says_what_heldout_reads(tmp_path: Path):
    """Unknown to the sniff, a file keeps what each command's own reader says of it (compare
    and score: the samples reader's words); `heldout import` names what it reads."""
    from typer.testing import CliRunner

    from cli.main import app

    path = tmp_path / "results.json"
    path.write_text('{"accuracy": 0.5}')
    assert source_kind(path) == "unknown"
    done = CliRunner().invoke(app, ["import", str(path), "--out", str(tmp_path / "out")])
    assert isinstance(done.exception, InputFileError)
    assert "no harness heldout knows wrote this file; heldout reads a rollout file (.parquet)" \
        in str(done.exception)
    own = CliRunner().invoke(app, ["import", str(lm_file("seed1").parent.parent.parent /
                                                 "evalplus" / "samples_base.jsonl"),
                                   "--out", str(tmp_path / "out")])
    assert "heldout's own samples file, not another harness's results" in str(own.exception)


def test_a_broken_inspect_archive_is_one_sentence(tmp_path: Path):
    broken = tmp_path / "run.eval"
    broken.write_bytes((INSPECT / "pair-base.eval").read_bytes()[:4000])
    with pytest.raises(HeldoutError, match=r"run\.eval: inspect_ai cannot read this log: "):
        read(broken)


def test_a_swebench_summary_with_ids_that_are_not_lists_is_refused(tmp_path: Path):
    summary = json.loads((SWE / "base.heldout-fx.json").read_text())
    summary["error_ids"] = "heldout__money-split-1"
    path = tmp_path / "base.run.json"
    path.write_text(json.dumps(summary))
    with pytest.raises(HeldoutError, match=r"error_ids must be a list of instance ids"):
        read(path)
    shutil.copy(SWE / "base.heldout-fx.json", tmp_path / "ok.json")
    assert len(read(tmp_path / "ok.json").outcomes) == 12
