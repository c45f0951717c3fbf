"""The test-split guard: in a stage process, any open of the test split's files outside an
open TestLock (heldout.custody.lock) is refused and recorded in the ledger; so is any open of a
sealed task source (`tasks.source: ….sealed`) outside the split stage's dealing() or a TestLock.

A Python audit hook sees the opens and mmaps made from Python. It knows the test split's files
by what they are, their (device, inode), not only by their names: a hard link, a symlink, a
/proc/self/fd/N path, a name relative to a directory descriptor or a descriptor obtained some
other way all reach the same file, and the same refusal. Making a link or renaming reads
nothing, so it is let through; opening the file through the new name is not. A file that left
its place (renamed out, its mtime or size changed since) is still known by its identity, and by
its first 4 KiB, so that a new file reusing the freed inode number is not taken for it. A name
under data/split/test* that does not exist yet is refused by its path. A byte copy made outside
the stage is a new file: the guard does not know it, and it is as sealed as the original.

What the hook cannot see (C code such as pyarrow, os.read on a descriptor Python never opened,
other processes) gets the sealed file (heldout.custody.seal), which is useless without the key.
"""

from __future__ import annotations

import contextlib
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
# A sealed task source (heldout.custody.task_source) is known by its name, without reading it.
SEALED_SUFFIX = ".sealed"
LEDGER = Path("ledger/test_access.jsonl")

_EVENTS = frozenset({"open", "mmap.__new__"})
# A directory changed twice within one tick of the file system's clock keeps one mtime: until
# its mtime is this old, the guard rescans it at every look rather than trust the mtime.
_RACY_NS = 2_000_000_000

# The kinds of watched file ("split", "source") this context may open.
_open_allowed: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar(
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


_PRINT_BYTES = 4096
SPLIT_RULE = ("outside the test lock: only the test stage may open the test split, inside "
              "heldout.custody.lock.TestLock")
SOURCE_RULE = ("outside the split stage: only the split stage may load the sealed task source "
               "(and the test stage, inside heldout.custody.lock.TestLock)")


class _Guarded:
    """Files the guard refuses: one project's test split (the `test*` entries of its folder,
    kind "split") or one sealed task source (kind "source"); where refusals go."""

    def __init__(self, kind: str, folder: str, ledger: Path, *, label: str, exact: str | None):
        self.kind, self.folder, self.ledger, self.label = kind, folder, ledger, label
        # The split refuses every name under its prefix, made yet or not; a source only itself.
        self.exact = exact
        self.prefix = exact or os.path.join(folder, "test")
        self.rule = SOURCE_RULE if kind == "source" else SPLIT_RULE
        # identity -> (name under the project, its first bytes when last seen)
        self.files: dict[Identity, tuple[str, bytes | None]] = {}
        # Files that have left their place (renamed out, their mtime changed or not): known by
        # their identity and their first bytes, so a new file that reuses a freed inode number
        # is not taken for one.
        self.gone: dict[Identity, tuple[str, bytes | None]] = {}
        self.stamps: dict[str, int | None] = {}
        self.stale = True

    def identify(self, st: os.stat_result, read: Any = None) -> str | None:
        """The name of the watched file `st` describes, or None. `read()` gives the first
        bytes of the file `st` describes, for a file that has left its place."""
        if self.stale or any(_mtime(d) != mtime for d, mtime in self.stamps.items()):
            self.scan()
        key = (st.st_dev, st.st_ino)
        if key in self.files:
            return self.files[key][0]
        if key not in self.gone or read is None or not stat.S_ISREG(st.st_mode):
            return None
        name, head = self.gone[key]
        return name if head is not None and _quietly(read) == head else None

    def _wanted(self, folder: str, path: str) -> bool:
        if folder != self.folder:
            return True
        return path == self.exact if self.exact else path.startswith(self.prefix)

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
                if not self._wanted(folder, entry.path):
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
                    name = os.path.join(self.label, os.path.relpath(entry.path, self.folder))
                    files[key] = (name, _quietly(lambda path=entry.path: _head(path)) or None
                                  if stat.S_ISREG(st.st_mode) else None)
        now = time.time_ns()
        self.gone = {**self.gone, **{k: v for k, v in self.files.items() if k not in files}}
        self.files, self.stamps = files, stamps
        self.stale = any(m is not None and now - m < _RACY_NS for m in stamps.values())

    def refuse(self, verb: str, shown: str, how: str) -> None:
        # Only recording opens files, so only it needs to keep the hook from looking at them.
        token = _in_hook.set(True)
        try:
            record_refusal(self.ledger, f"{verb} of {shown}{how} {self.rule}",
                           {"test_version": None, "candidate": None, "base": None,
                            "harness": None})
        finally:
            _in_hook.reset(token)


def _head(path: str, dir_fd: int | None = None) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        return os.pread(fd, _PRINT_BYTES, 0)
    finally:
        os.close(fd)


def _quietly(read: Any) -> bytes | None:
    """`read()`, with the hook looking away from its own opens; None where it fails."""
    token = _in_hook.set(True)
    try:
        return read()
    except (OSError, ValueError):
        return None
    finally:
        _in_hook.reset(token)


# Replaced, never mutated, so the hook can iterate it while another thread installs a guard.
_splits: tuple[_Guarded, ...] = ()


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


def install_guard(root: Path, sealed_source: Path | None = None) -> None:
    """From now on in this process, opening the test split of the project at `root` outside a
    TestLock raises TestSetAccessError and is recorded as refused; so does opening
    `sealed_source` (the project's sealed task source) outside dealing() or a TestLock.
    Idempotent."""
    global _splits
    ledger = root / LEDGER
    wanted = [_Guarded("split", os.path.realpath(root / SPLIT_DIR), ledger,
                       label=SPLIT_DIR.as_posix(), exact=None)]
    if sealed_source is not None:
        real = os.path.realpath(root / sealed_source)
        wanted.append(_Guarded("source", os.path.dirname(real), ledger, exact=real,
                               label=_relative(os.path.dirname(real), root)))
    for guarded in wanted:
        if any((g.kind, g.prefix) == (guarded.kind, guarded.prefix) for g in _splits):
            continue
        guarded.scan()
        first = not _splits
        _splits = (*_splits, guarded)
        if first:
            sys.addaudithook(_audit)


def _relative(folder: str, root: Path) -> str:
    relative = os.path.relpath(folder, os.path.realpath(root))
    return folder if relative.startswith("..") else relative


def _watched() -> tuple[_Guarded, ...]:
    """The watched files this context may not open."""
    allowed = _open_allowed.get()
    return _splits if allowed is None else tuple(g for g in _splits if g.kind not in allowed)


def _audit(event: str, args: tuple) -> None:
    if event not in _EVENTS or _in_hook.get():
        return
    watched = _watched()
    if not watched:
        return
    if event == "mmap.__new__":
        _check_descriptor(watched, "mmap", args[0])
    elif isinstance(args[0], int):
        _check_descriptor(watched, "open", args[0])
    elif isinstance(args[0], str | bytes | os.PathLike):
        # os.open is the one opener whose event has no mode, and the one that takes a dir_fd.
        _check_path(watched, os.fsdecode(args[0]), by_os_open=args[1] is None)


def _check_path(watched: tuple[_Guarded, ...], name: str, by_os_open: bool) -> None:
    st = _stat(name)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        for split in watched:
            match = split.identify(st, lambda: _head(name))
            if match:
                shown = os.path.abspath(name)
                split.refuse("open", shown, "" if _in_split(shown, split) else
                             f" (same file as {match})")
    else:
        real = os.path.realpath(name)
        for split in watched:
            if real == split.prefix or (not split.exact and real.startswith(split.prefix)):
                split.refuse("open", real, "")
    if by_os_open and not os.path.isabs(name):
        _check_directory_descriptors(watched, name)


def _check_directory_descriptors(watched: tuple[_Guarded, ...], name: str) -> None:
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
        for split in watched:
            match = split.identify(st, lambda fd=fd: _head(name, dir_fd=fd))
            if match:
                shown = os.path.join(_descriptor_path(fd), name)
                split.refuse("open", shown, " (through a directory descriptor" + (
                    ")" if _in_split(shown, split) else f", same file as {match})"))


def _check_descriptor(watched: tuple[_Guarded, ...], verb: str, fd: int) -> None:
    if fd < 0:  # an anonymous mmap
        return
    try:
        st = os.fstat(fd)
    except OSError:
        return
    for split in watched:
        match = split.identify(st, lambda: os.pread(fd, _PRINT_BYTES, 0))
        if match:
            where = _descriptor_path(fd)
            split.refuse(verb, f"descriptor {fd}", f" ({where})" if _in_split(where, split)
                         else f" ({where}, same file as {match})")


def _descriptor_path(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return f"descriptor {fd}"


def _in_split(path: str, split: _Guarded) -> bool:
    """Whether `path` names the watched file itself, rather than another way to it."""
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
def _allowing(kinds: frozenset[str]) -> Iterator[None]:
    token = _open_allowed.set(kinds)
    try:
        yield
    finally:
        _open_allowed.reset(token)
        # A file rewritten in place leaves its folder's mtime as it was: look again.
        for split in _splits:
            split.stale = True


def sealing() -> contextlib.AbstractContextManager[None]:
    """Let the split stage write the sealed file: writing the test split is not reading it."""
    return _allowing(frozenset({"split"}))


def dealing() -> contextlib.AbstractContextManager[None]:
    """Let the split stage read the sealed task source it deals the split from."""
    return _allowing(frozenset({"source"}))


def opening(access_id: str) -> contextlib.AbstractContextManager[None]:
    """Let this context open the test split and the sealed task source, for the access
    `access_id` (TestLock only)."""
    return _allowing(frozenset({"split", "source"}))
