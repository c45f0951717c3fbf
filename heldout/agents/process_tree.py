"""Every process an agent started, however far it went: held while the episode runs, killed
when it ends.

A `command` agent starts in a session and process group of its own, and killing the group
takes every child that stayed in it. A child that calls setsid() (a daemon's double fork)
leaves both, so the group is not enough. `ProcessTree` holds the whole tree one of two ways,
the first this machine offers:

- **cgroup v2** (root, or a delegated cgroup; Linux's unified hierarchy mounted): the agent is
  started in a cgroup of its own, a child of heldout's (`heldout-agent-<pid>-<n>`), before it
  runs a line of its own (its fork writes itself into `cgroup.procs` before the exec). Nothing
  a process of it does, setsid, double forks or its parent's death, takes it out. At the end
  `cgroup.kill` (Linux 5.14; before it, every member is frozen and killed) ends them all, and
  the cgroup is removed once empty.
- **a keeper and /proc** otherwise: the agent is started under a keeper
  (heldout.agents.keeper), a child subreaper, so a process whose parent exits is re-parented to
  the keeper and every process of the tree stays its descendant by its parent chain. When the
  agent exits, the keeper kills what it left and exits as the agent did: heldout, which waits on
  the keeper, sees the agent's end with its tree already gone. heldout also scans /proc every
  `POLL_S` while it waits (the keeper's descendants, and every process of its session or
  group), recording each with its start time, so a pid the system reused is never killed; at
  the end it kills what the scans found, in rounds until a scan finds nothing new, and the
  keeper last, so nothing is orphaned to init on the way. The one gap: an agent that SIGKILLs
  its own keeper (its parent: same user) orphans its tree to init, and a child it started
  after the last scan is then out of reach; the cgroup has no such gap.

A PID namespace (`unshare --pid --fork --kill-child`) would hold the tree as well, but it needs
user namespaces, and the agent would see pids of its own namespace: a pid it logs would name no
process of heldout's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from heldout.agents import keeper
from heldout.agents.keeper import kill as _kill
from heldout.agents.keeper import processes as _processes
from heldout.agents.keeper import stat as _stat

POLL_S = 0.05  # how often the /proc way scans for new descendants while it waits
KILL_WAIT_S = 2.0  # how long the end waits for what it killed to be gone
MAX_ROUNDS = 20  # of scan-and-kill, the /proc way, at the end
_PREFIX = "heldout-agent-"
_numbers = itertools.count()
_cgroup_parent: list[Path | None] = []  # found once per process: [] until then


def _cgroup_base() -> Path | None:
    """The folder of heldout's own cgroup on a writable cgroup2 mount, or None."""
    if not _cgroup_parent:
        _cgroup_parent.append(_find_cgroup_base())
    return _cgroup_parent[0]


def _find_cgroup_base() -> Path | None:
    try:
        own = next((line.split(":", 2)[2].strip() for line in
                    Path("/proc/self/cgroup").read_text().splitlines()
                    if line.startswith("0::")), None)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for mount in mounts:
        fields = mount.split()
        if own is None or " - cgroup2 " not in mount or len(fields) < 5:
            continue
        root, point = fields[3], fields[4]
        if own != root and not own.startswith(root.rstrip("/") + "/"):
            continue
        base = Path(point) / own[len(root):].lstrip("/")
        if os.access(base, os.W_OK) and os.access(base / "cgroup.procs", os.W_OK):
            _remove_stale(base)
            return base
    return None


def _remove_stale(base: Path) -> None:
    """Empty cgroups an earlier heldout left (it was killed before its end): rmdir fails on any
    that still holds a process, and those are left alone."""
    for stale in base.glob(f"{_PREFIX}*"):
        with contextlib.suppress(OSError):
            stale.rmdir()


class ProcessTree:
    """The processes of one agent: the agent is started as `command(argv)`, `preexec` goes to
    Popen (with start_new_session=True), `adopt` is told the started process's pid, `watch` is
    called while waiting on it, `kill` at the end (however the episode ended; more than once is
    harmless)."""

    def __init__(self) -> None:
        base = _cgroup_base()
        self.cgroup: Path | None = None
        self._procs_fd: int | None = None
        if base is not None:
            path = base / f"{_PREFIX}{os.getpid()}-{next(_numbers)}"
            try:
                path.mkdir()
                self._procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
                self.cgroup = path
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        self.known: dict[int, int] = {}  # pid -> start time, the /proc way
        self.session: int | None = None
        self._scanned = 0.0
        self._ended = False

    @property
    def poll_s(self) -> float | None:
        """How long a wait on the agent may last before `watch` (None: as long as it likes)."""
        return None if self.cgroup is not None else POLL_S

    def command(self, argv: list[str]) -> list[str]:
        """What to start for the agent's `argv`: under a keeper, unless a cgroup holds it."""
        if self.cgroup is not None:
            return argv
        return [sys.executable, "-I", "-S", keeper.__file__, *argv]

    def preexec(self) -> Callable[[], None] | None:
        """What the agent's fork runs before its exec: it enters the cgroup."""
        if self._procs_fd is None:
            return None
        fd = self._procs_fd

        def enter() -> None:
            with contextlib.suppress(OSError):  # checked in adopt: the /proc way then
                os.write(fd, b"0")

        return enter

    def adopt(self, pid: int) -> None:
        """The agent started as `pid` (it has exec'd: its fork has already entered the cgroup,
        or failed to)."""
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None
        self.session = pid
        if self.cgroup is not None and not self._holds(pid):
            self._remove_cgroup()
        stat = _stat(pid)
        if stat is not None:
            self.known[pid] = stat[3]

    def watch(self) -> None:
        """Record the agent's new descendants (the /proc way; at most once per POLL_S)."""
        if self.cgroup is None and time.monotonic() - self._scanned >= POLL_S:
            self._scan()

    def record(self) -> None:
        """Record the agent's descendants now (the /proc way): called before the episode's end
        is sent, since an agent that exits on it orphans its children, and an orphan's parent
        chain no longer leads to the agent."""
        if self.cgroup is None and self.session is not None:
            self._scan()

    def kill(self) -> None:
        """SIGKILL every process of the tree and wait (up to KILL_WAIT_S) until none is left."""
        if self._ended:
            return
        self._ended = True
        if self.cgroup is not None:
            self._kill_cgroup()
            return
        if self.session is None:
            return
        killed: dict[int, int] = {}
        for _round in range(MAX_ROUNDS):  # what a process forked before its SIGKILL: the next
            self._scan()
            fresh = {pid: started for pid, started in self.known.items()
                     if pid not in killed and pid != self.session}
            if not fresh:
                break
            for pid, started in fresh.items():
                _kill(pid, started)
                killed[pid] = started
            self._wait_until_gone(killed)  # their children are the keeper's now: found next
        if self.session in self.known:  # the keeper last: nothing is orphaned to init
            _kill(self.session, self.known[self.session])
            self._wait_until_gone({self.session: self.known[self.session]})

    @staticmethod
    def _wait_until_gone(killed: dict[int, int]) -> None:
        end = time.monotonic() + KILL_WAIT_S
        while any((stat := _stat(pid)) is not None and stat[3] == started
                  for pid, started in killed.items()) and time.monotonic() < end:
            time.sleep(0.005)

    # --- the /proc way ------------------------------------------------------------------------

    def _scan(self) -> None:
        self._scanned = time.monotonic()
        processes = _processes()
        groups = {self.session} | {processes[pid][1] for pid in self.known if pid in processes}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, pgrp, session, started) in processes.items():
                if pid in self.known:
                    continue
                parent = self.known.get(ppid)
                if ((parent is not None and started >= parent) or session == self.session
                        or pgrp in groups):
                    self.known[pid] = started
                    grew = True

    # --- the cgroup way -----------------------------------------------------------------------

    def _holds(self, pid: int) -> bool:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return False
        assert self.cgroup is not None
        return any(line.startswith("0::") and line.endswith("/" + self.cgroup.name)
                   for line in lines)

    def _members(self) -> list[int]:
        assert self.cgroup is not None
        try:
            return [int(pid) for pid in (self.cgroup / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def _kill_cgroup(self) -> None:
        assert self.cgroup is not None
        try:
            (self.cgroup / "cgroup.kill").write_text("1")
        except OSError:  # before Linux 5.14: frozen (no fork in between), then each killed
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.freeze").write_text("1")
            for pid in self._members():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + KILL_WAIT_S
        while self._members() and time.monotonic() < end:
            time.sleep(0.01)
        self._remove_cgroup()

    def _remove_cgroup(self) -> None:
        """rmdir the cgroup; one that is still busy (a process not yet gone) is left for the
        next heldout to remove (`_remove_stale`). The tree falls back to the /proc way."""
        assert self.cgroup is not None
        end = time.monotonic() + 0.5
        while True:
            try:
                self.cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > end:
                    break
                time.sleep(0.01)
        self.cgroup = None
