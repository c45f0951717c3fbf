"""The keeper: what a `command` agent is started under when no cgroup of its own holds its tree.

Run as `python -I -S keeper.py ARGV...` (standard library only: it imports nothing of heldout
and starts in about 10 ms). It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER),
runs ARGV as its child, and gives up its own copies of the pipes. From then on every process
of the agent's tree is the keeper's descendant by its parent chain, whatever it does: a process
whose parent exits (a setsid() child, a daemon's double fork) is re-parented to the keeper, not
to init. When the agent exits, the keeper kills every descendant it has left, in rounds until
none is left, reaps them, and exits as the agent did (the same code, or the same signal). So
heldout, which waits on the keeper, sees the agent's end only once its whole tree is gone and
nothing holds its pipes.

The keeper ignores every signal it can (the agent's tree may signal it; only SIGKILL and
SIGSTOP get through). An agent that SIGKILLs its keeper orphans its tree to init: heldout's own
scans of /proc (heldout.agents.process_tree) then hold what they saw. A cgroup has no such gap.

The /proc helpers here are heldout's too (process_tree imports them).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
END_WAIT_S = 5.0  # how long the keeper keeps killing before it gives up on a process (D state)


def stat(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgrp, session, start time) of a live process, or None (gone, or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except (OSError, ValueError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def processes() -> dict[int, tuple[int, int, int, int]]:
    """Every live process this one can see, by pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat(int(entry))) is not None:
            found[int(entry)] = fields
    return found


def kill(pid: int, started: int) -> bool:
    """SIGKILL `pid` if it is still the process that started at `started`; whether it was."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False
    try:  # the pidfd pins the process: checked, then signalled, with no reuse in between
        fields = stat(pid)
        if fields is None or fields[3] != started:
            return False
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def descendants(root: int) -> dict[int, int]:
    """The live descendants of `root` by their parent chain: pid -> start time."""
    found = processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _group, _session, _started) in found.items():
        children.setdefault(ppid, []).append(pid)
    tree: dict[int, int] = {}
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in tree:
                tree[child] = found[child][3]
                frontier.append(child)
    return tree


def _reap() -> None:
    """Reap every child that has ended (the orphans re-parented here included)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def end_tree(root: int) -> None:
    """Kill every descendant of `root` (the keeper), in rounds: a killed process's children come
    to the keeper and are found by the next round."""
    until = time.monotonic() + END_WAIT_S
    while (left := descendants(root)) and time.monotonic() < until:
        for pid, started in left.items():
            kill(pid, started)
        _reap()
        time.sleep(0.001)
    _reap()


def _wait_for(agent: int) -> int:
    """The agent's wait status, reaping whatever else ends meanwhile."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == agent:
            return status


def _exit_as(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # the same signal, at its default action
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


def _ignore_signals() -> list[tuple[int, object]]:
    """Ignore every catchable signal but SIGCHLD; what each was, for the agent's fork."""
    before = []
    for number in signal.valid_signals():
        if number in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            continue
        with contextlib.suppress(OSError, ValueError):
            before.append((number, signal.signal(number, signal.SIG_IGN)))
    return before


def _as_started(number: int, handler):
    """The disposition the agent would have had started straight from heldout (Popen restores
    SIGPIPE and SIGXFSZ; Python's own start ignores both and handles SIGINT)."""
    if number in (signal.SIGPIPE, signal.SIGXFSZ) or callable(handler) or handler is None:
        return signal.SIG_DFL
    return handler


def main(argv: list[str]) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.execvp(argv[0], argv)  # no subreaper here: the agent runs as it would without us
    before = _ignore_signals()
    agent = os.fork()
    if agent == 0:
        try:
            for number, handler in before:
                signal.signal(number, _as_started(number, handler))
            os.execvp(argv[0], argv)
        except OSError as error:
            os.write(2, f"{argv[0]}: cannot run: {error}\n".encode())
        os._exit(127)
    nothing = os.open(os.devnull, os.O_RDWR)
    for descriptor in (0, 1, 2):  # the pipes are the agent's: their end is its end
        os.dup2(nothing, descriptor)
    status = _wait_for(agent)
    end_tree(os.getpid())
    _exit_as(status)


if __name__ == "__main__":
    main(sys.argv[1:])
