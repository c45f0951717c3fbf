"""A samples file is read a line at a time, within bounds (issue 39, item 7): a packed file is
refused as soon as it unpacks past 64 MiB, a line over 4 MiB is one problem passed over in
pieces, and neither the file nor such a line is ever held whole."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from heldout.bounded import MAX_LINE_BYTES
from heldout.episodes.samples import read_samples
from heldout.errors import InputFileError
from tests.memory import peak_growth_mib


def sample(task_id: str, completion: str) -> bytes:
    return json.dumps({"task_id": task_id, "completion": completion}).encode() + b"\n"


def test_a_line_over_4_mib_is_one_problem_and_the_lines_around_it_are_read(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(sample("HumanEval/0", "    return 1\n")
                     + sample("HumanEval/1", "#" * (MAX_LINE_BYTES + 10))
                     + sample("HumanEval/2", "    return 2\n")
                     + b'{"task_id": 3}\n')
    with pytest.raises(InputFileError) as refused:
        read_samples(path)
    problems = [(problem.line, problem.message) for problem in refused.value.problems]
    assert problems[0] == (2, "longer than 4,194,304 bytes (4 MiB); one sample's line is far "
                              "shorter")
    assert sorted({line for line, _ in problems}) == [2, 4]  # line 3 was read, line 4 checked


def test_a_line_of_exactly_4_mib_is_read(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    head = sample("HumanEval/0", "")
    padding = MAX_LINE_BYTES + 1 - len(head)  # the line, without its newline, is 4 MiB
    path.write_bytes(sample("HumanEval/0", "#" * padding))
    assert len(path.read_bytes()) == MAX_LINE_BYTES + 1
    [row] = read_samples(path)
    assert len(row.completion) == padding


def test_a_packed_file_of_128_mib_is_refused_holding_neither_it_nor_its_line(tmp_path: Path):
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as file:  # 128 KiB that unpack to 128 MiB
        for _ in range(128):
            file.write(b" " * 2**20)
    assert path.stat().st_size < 2**18
    growth, said = peak_growth_mib("samples", path)
    assert said == (f"refused: {path}: more than 67,108,864 bytes (64 MiB) unpacked: heldout "
                    "reads a samples file of at most that; split it")
    # Read whole, as before, it held 64 MiB and then split it: 79 MiB measured.
    assert growth < 24, f"reading grew the process by {growth} MiB"


def test_a_plain_file_of_60_mib_is_read_without_holding_it_whole(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    line = sample("HumanEval/0", "#" * (2**20 - 40))
    with path.open("wb") as file:
        for _ in range(60):
            file.write(line)
    growth, said = peak_growth_mib("samples", path)
    assert said == "read: 60"
    # Each kept completion is its own 1 MiB: 60 of them; the file's bytes and its split lines
    # (121 MiB measured when it was read whole) are not held.
    assert growth < 90, f"reading grew the process by {growth} MiB"


def test_a_file_of_more_than_250_000_samples_is_refused_as_it_passes_the_mark(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    line = b'{"task_id": "HumanEval/0", "completion": ""}\n'
    path.write_bytes(line * ((64 << 20) // len(line)))  # 1.5 million samples in 64 MiB
    growth, said = peak_growth_mib("samples", path)
    assert said == f"refused: {path}:250001: more than 250,000 samples: heldout reads a " \
                           "samples file of at most that; split it"
    assert growth < 128, f"reading grew the process by {growth} MiB"  # 580 MiB read whole
