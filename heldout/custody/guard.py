"""The test-split guard: in a stage process, any open of the test split's files outside an
open TestLock (heldout.custody.lock) is refused and recorded in the ledger.

A Python audit hook sees opens made from Python; the file itself is sealed
(heldout.custody.seal) against readers the hook cannot see.
"""

from __future__ import annotations

import contextvars
import getpass
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from heldout.custody.ledger import append
from heldout.errors import HeldoutError

SPLIT_DIR = Path("data/split")
SEALED_TEST = SPLIT_DIR / "test.sealed"
LEDGER = Path("ledger/test_access.jsonl")

_open_allowed: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "heldout_test_open_allowed", default=None
)
_guarded: dict[str, Path] = {}  # test-split path prefix -> ledger
_in_hook = contextvars.ContextVar("heldout_in_hook", default=False)


class TestSetAccessError(HeldoutError):
    """An attempt to open the test split that the protocol does not allow."""

    __test__ = False  # a name pytest would otherwise try to collect


def stamp() -> dict[str, Any]:
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "user": _user()}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def install_guard(root: Path) -> None:
    """From now on in this process, opening the test split of the project at `root` outside a
    TestLock raises TestSetAccessError and is recorded as refused. Idempotent."""
    prefix = os.path.join(os.path.realpath(root / SPLIT_DIR), "test")
    if prefix in _guarded:
        return
    _guarded[prefix] = root / LEDGER
    if len(_guarded) == 1:
        sys.addaudithook(_audit)


def _audit(event: str, args: tuple) -> None:
    if event != "open" or _in_hook.get() or _open_allowed.get() is not None:
        return
    target = args[0]
    if not isinstance(target, str | bytes | os.PathLike):
        return
    token = _in_hook.set(True)
    try:
        path = os.path.realpath(os.fsdecode(target))
        for prefix, ledger in _guarded.items():
            if path.startswith(prefix):
                record_refusal(ledger, f"open of {path} outside the test lock: only the test stage "
                                "may open the test split, inside heldout.custody.lock.TestLock",
                        {"test_version": None, "candidate": None, "base": None, "harness": None})
    finally:
        _in_hook.reset(token)


def record_refusal(ledger: Path, why: str, fields: dict[str, Any]) -> None:
    empty = {"access_id": None, "result_digest": None, "mlflow_run_id": None,
             "git_commit": None, "selection_digest": None}
    entry = append(ledger, {**empty, **fields, **stamp(), "outcome": "refused", "reason": why})
    raise TestSetAccessError(f"refused: {why}. (Recorded as line {entry['seq']} of {ledger}.)")


@contextmanager
def sealing() -> Iterator[None]:
    """Let the split stage write the sealed file: writing the test split is not reading it."""
    token = _open_allowed.set("sealing")
    try:
        yield
    finally:
        _open_allowed.reset(token)


@contextmanager
def opening(access_id: str) -> Iterator[None]:
    """Let this context open the test split, for the access `access_id` (TestLock only)."""
    token = _open_allowed.set(access_id)
    try:
        yield
    finally:
        _open_allowed.reset(token)
