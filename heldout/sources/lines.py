"""A JSON Lines results file of another harness, read a line at a time within heldout's input
bounds (heldout.bounded): every line an object of the tool's shape, every problem reported at
once with its line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from heldout.bounded import MAX_LINE_BYTES, file_lines
from heldout.errors import InputFileError, Problem
from heldout.json_lines import LineError, read_line

# The most records one file holds (heldout's samples files hold as many).
MAX_RECORDS = 250_000


def records(path: Path, noun: str, fits: Callable[[dict], bool],
            shape: str) -> list[tuple[int, dict]]:
    """(line number, object) for every line of `path` that `fits`, or InputFileError listing
    each line that does not (`shape` says what a line must hold)."""
    found, problems = [], []
    for number, raw in enumerate(file_lines(path, noun), start=1):
        if raw is None:
            problems.append(Problem(number, None, f"longer than {MAX_LINE_BYTES:,} bytes"))
            continue
        if not raw.strip():
            continue
        try:
            record = read_line(raw)
        except LineError as error:
            problems.append(Problem(number, None, str(error)))
            continue
        if not (isinstance(record, dict) and fits(record)):
            problems.append(Problem(number, None, f"not {shape}"))
            continue
        found.append((number, record))
        if len(found) > MAX_RECORDS:
            raise InputFileError(path, [Problem(number, None, (
                f"more than {MAX_RECORDS:,} records: split the file"))])
    if problems:
        raise InputFileError(path, problems)
    if not found:
        raise InputFileError(path, [Problem(None, None, "no records")])
    return found
