"""A sealed task source: a task file (JSON lines) sealed for the test key, as the test split is.

With a public source (HumanEval) anyone can recompute the test split from the source and the
salt; with a sealed one, whoever lacks the key cannot, and inside heldout only the split stage
(under guard.dealing()) and the test stage (inside its lock) may open it: the guard watches it
as it watches the test split (heldout.custody.guard). A source is sealed when its name ends in
`.sealed`, so the guard knows it without reading it.
"""

from __future__ import annotations

from pathlib import Path

from heldout.canonical import jsonl_bytes
from heldout.custody.guard import SEALED_SUFFIX, dealing
from heldout.custody.keys import TestKey, TestKeyError
from heldout.custody.seal import MAGIC, SealBrokenError, WrongKeyError, seal, unseal
from heldout.errors import InputFileError, Problem
from heldout.tasks.record import Task
from heldout.tasks.sources import HUMANEVAL, load_jsonl_bytes

__all__ = ["SEALED_SUFFIX", "is_sealed_source", "load_sealed_tasks", "seal_tasks"]


def is_sealed_source(source: str | Path) -> bool:
    """Whether `params.tasks.source` names a sealed task file."""
    return str(source) != HUMANEVAL and str(source).endswith(SEALED_SUFFIX)


def seal_tasks(path: Path, public: bytes) -> tuple[bytes, list[Task]]:
    """The task file at `path`, checked (every line a task) and sealed for `public`; and its
    tasks. Raises InputFileError for a missing file, a sealed one, or lines that are not tasks."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(path, [Problem(None, None, "no such file")]) from None
    except (IsADirectoryError, PermissionError) as error:
        raise InputFileError(path, [Problem(None, None, f"cannot read it "
                                                        f"({type(error).__name__})")]) from None
    if data.startswith(MAGIC):
        raise InputFileError(path, [Problem(None, None, "already sealed")])
    tasks = load_jsonl_bytes(data, path, folder=path.parent)
    if b'"snapshot"' in data:
        # A repository task's snapshot path names files outside the seal: the sealed lines
        # hold the trees themselves (the records as loaded).
        data = jsonl_bytes(task.to_record() for task in tasks)
    return seal(data, public), tasks


def load_sealed_tasks(path: Path, key: TestKey) -> list[Task]:
    """The tasks of the sealed task file at `path`, unsealed in memory with `key`: the split
    stage's way to deal from a sealed source (the guard lets only dealing() open it)."""
    try:
        with dealing():
            data = path.read_bytes()
    except FileNotFoundError:
        raise InputFileError(path, [Problem(None, None, "no such file")],
                             hint="`heldout tasks seal TASKS.jsonl --out "
                                  f"{path.name}` makes it") from None
    try:
        plain = unseal(data, key)
    except WrongKeyError as error:
        raise TestKeyError(f"{path}: {error}; set HELDOUT_TEST_KEY to the key it was sealed "
                           "for") from None
    except SealBrokenError as error:
        raise InputFileError(path, [Problem(None, None, f"{error} (a sealed task source is "
                                                        "made by `heldout tasks seal`)")]) from None
    return load_jsonl_bytes(plain, path)
