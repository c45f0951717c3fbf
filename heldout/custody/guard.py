"""The test-split guard: in a stage process, any open of the test split's files outside an
open TestLock (heldout.custody.lock) is refused and recorded in the ledger.

A Python audit hook sees the opens and mmaps made from Python. It knows the test split's files
by what they are, their (device, inode), not only by their names: a hard link, a symlink, a
/proc/self/fd/N path, a name relative to a directory descriptor or a descriptor obtained some
other way all reach the same file, and the same refusal. Making a link or renaming reads
nothing, so it is let through; opening the file through the new name is not. A name under
data/split/test* that does not exist yet is refused by its path.

What the hook cannot see (C code such as pyarrow, os.read on a descriptor Python never opened,
other processes) gets the sealed file (heldout.custody.seal), which is useless without the key.
"""

from __future__ import annotations

import contextvars
import getpass
import os
import stat
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

_EVENTS = frozenset({"open", "mmap.__new__"})
# A directory changed twice within one tick of the file system's clock keeps one mtime: until
# its mtime is this old, the guard rescans it at every look rather than trust the mtime.
_RACY_NS = 2_000_000_000

_open_allowed: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "heldout_test_open_allowed", default=None
)
_in_hook = contextvars.ContextVar("heldout_in_hook", default=False)
# A plain global, not a context variable: a stage's worker threads refuse on behalf of its run.
_stage_run_id: str | None = None


class TestSetAccessError(HeldoutError):
    """An attempt to open the test split that the protocol does not allow. `recorded` says
    whether a ledger line holds it (a refusal), or nothing was written (a missing file)."""

    __test__ = False  # a name pytest would otherwise try to collect

    def __init__(self, message: str, *, recorded: bool = False):
        super().__init__(message)
        self.recorded = recorded


def stamp() -> dict[str, Any]:
    return {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "user": _user()}


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


Identity = tuple[int, int]  # (st_dev, st_ino)


class _GuardedSplit:
    """One project's test split: where it is, which files it is made of, where refusals go."""

    def __init__(self, folder: str, ledger: Path):
        self.folder = folder
        self.prefix = os.path.join(folder, "test")
        self.ledger = ledger
        # identity -> (name under the project, size, mtime_ns when last seen)
        self.files: dict[Identity, tuple[str, int, int]] = {}
        # Files that have left the split folder. A file renamed out keeps its size and mtime; a
        # new file that happens to reuse a freed inode number does not.
        self.gone: dict[Identity, tuple[str, int, int]] = {}
        self.stamps: dict[str, int | None] = {}
        self.stale = True

    def identify(self, st: os.stat_result) -> str | None:
        """The name of the test-split file `st` describes, or None."""
        if self.stale or any(_mtime(d) != mtime for d, mtime in self.stamps.items()):
            self.scan()
        key = (st.st_dev, st.st_ino)
        if key in self.files:
            return self.files[key][0]
        name, size, mtime = self.gone.get(key, (None, -1, -1))
        return name if (st.st_size, st.st_mtime_ns) == (size, mtime) else None

    def scan(self) -> None:
        files: dict[Identity, tuple[str, int, int]] = {}
        stamps: dict[str, int | None] = {}
        pending, visited = [self.folder], set()
        while pending:
            folder = pending.pop()
            # Stamped before listing: a change made while listing shows as a changed mtime.
            stamps[folder] = _mtime(folder)
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if folder == self.folder and not entry.path.startswith(self.prefix):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                if stat.S_ISDIR(st.st_mode):
                    if key not in visited:
                        visited.add(key)
                        pending.append(entry.path)
                else:
                    name = (SPLIT_DIR / os.path.relpath(entry.path, self.folder)).as_posix()
                    files[key] = (name, st.st_size, st.st_mtime_ns)
        now = time.time_ns()
        self.gone = {**self.gone, **{k: v for k, v in self.files.items() if k not in files}}
        self.files, self.stamps = files, stamps
        self.stale = any(m is not None and now - m < _RACY_NS for m in stamps.values())

    def refuse(self, verb: str, shown: str, how: str) -> None:
        # Only recording opens files, so only it needs to keep the hook from looking at them.
        token = _in_hook.set(True)
        try:
            record_refusal(self.ledger, f"{verb} of {shown}{how} outside the test lock: only "
                           "the test stage may open the test split, inside "
                           "heldout.custody.lock.TestLock",
                           {"test_version": None, "candidate": None, "base": None,
                            "harness": None})
        finally:
            _in_hook.reset(token)


# Replaced, never mutated, so the hook can iterate it while another thread installs a guard.
_splits: tuple[_GuardedSplit, ...] = ()


def _mtime(folder: str) -> int | None:
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None


def _stat(path: str, dir_fd: int | None = None) -> os.stat_result | None:
    try:
        return os.stat(path, dir_fd=dir_fd)
    except (OSError, ValueError):
        return None


def install_guard(root: Path) -> None:
    """From now on in this process, opening the test split of the project at `root` outside a
    TestLock raises TestSetAccessError and is recorded as refused. Idempotent."""
    global _splits
    folder = os.path.realpath(root / SPLIT_DIR)
    if any(split.folder == folder for split in _splits):
        return
    split = _GuardedSplit(folder, root / LEDGER)
    split.scan()
    _splits = (*_splits, split)
    if len(_splits) == 1:
        sys.addaudithook(_audit)


def _audit(event: str, args: tuple) -> None:
    if event not in _EVENTS or _in_hook.get() or _open_allowed.get() is not None:
        return
    if event == "mmap.__new__":
        _check_descriptor("mmap", args[0])
    elif isinstance(args[0], int):
        _check_descriptor("open", args[0])
    elif isinstance(args[0], str | bytes | os.PathLike):
        # os.open is the one opener whose event has no mode, and the one that takes a dir_fd.
        _check_path(os.fsdecode(args[0]), by_os_open=args[1] is None)


def _check_path(name: str, by_os_open: bool) -> None:
    st = _stat(name)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        for split in _splits:
            match = split.identify(st)
            if match:
                shown = os.path.abspath(name)
                split.refuse("open", shown, "" if _in_split(shown, split) else
                             f" (same file as {match})")
    else:
        real = os.path.realpath(name)
        for split in _splits:
            if real.startswith(split.prefix):
                split.refuse("open", real, "")
    if by_os_open and not os.path.isabs(name):
        _check_directory_descriptors(name)


def _check_directory_descriptors(name: str) -> None:
    """The audit event of os.open carries a relative name without its dir_fd: try the name
    against every directory this process holds open."""
    try:
        descriptors = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in descriptors:
        st = _stat(name, dir_fd=fd)  # None for the descriptors that are not directories
        if st is None or stat.S_ISDIR(st.st_mode):
            continue
        for split in _splits:
            match = split.identify(st)
            if match:
                shown = os.path.join(_descriptor_path(fd), name)
                split.refuse("open", shown, " (through a directory descriptor" + (
                    ")" if _in_split(shown, split) else f", same file as {match})"))


def _check_descriptor(verb: str, fd: int) -> None:
    if fd < 0:  # an anonymous mmap
        return
    try:
        st = os.fstat(fd)
    except OSError:
        return
    for split in _splits:
        match = split.identify(st)
        if match:
            where = _descriptor_path(fd)
            split.refuse(verb, f"descriptor {fd}", f" ({where})" if _in_split(where, split)
                         else f" ({where}, same file as {match})")


def _descriptor_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"descriptor {fd}"


def _in_split(path: str, split: _GuardedSplit) -> bool:
    """Whether `path` names the file in the split folder itself, rather than another way to it."""
    return not os.path.islink(path) and os.path.realpath(path).startswith(split.prefix)


def record_refusal(ledger: Path, why: str, fields: dict[str, Any]) -> None:
    empty = {"access_id": None, "result_digest": None, "mlflow_run_id": _stage_run_id,
             "git_commit": None, "selection_digest": None}
    entry = append(ledger, {**empty, **fields, **stamp(), "outcome": "refused", "reason": why})
    raise TestSetAccessError(f"refused: {why}. (Recorded as line {entry['seq']} of {ledger}.)",
                             recorded=True)


@contextmanager
def recording_run(run_id: str) -> Iterator[None]:
    """Refusals recorded in this context name the MLflow run `run_id`, so `heldout audit`
    finds the ledger line of every run tagged heldout.test_access_refused."""
    global _stage_run_id
    previous, _stage_run_id = _stage_run_id, run_id
    try:
        yield
    finally:
        _stage_run_id = previous


@contextmanager
def sealing() -> Iterator[None]:
    """Let the split stage write the sealed file: writing the test split is not reading it."""
    token = _open_allowed.set("sealing")
    try:
        yield
    finally:
        _open_allowed.reset(token)
        # A file rewritten in place leaves its folder's mtime as it was: look again.
        for split in _splits:
            split.stale = True


@contextmanager
def opening(access_id: str) -> Iterator[None]:
    """Let this context open the test split, for the access `access_id` (TestLock only)."""
    token = _open_allowed.set(access_id)
    try:
        yield
    finally:
        _open_allowed.reset(token)
