"""Watching a running program: its output, its exit, its CPU time against its limit, and the
wall-clock backstop.

Standard library only, no heldout imports: the runner (runner.py) loads this file's source as a
module of its own inside the sandbox.

A program's time limit is CPU time, not wall-clock time: on a loaded machine a program gets a
smaller share of a CPU and takes longer by the clock, never by the CPU it uses, so its verdict
is the same however busy the machine is. What counts is the user and system time of every
process of the program (every process of its user where it runs as a user of its own, else
every process of its session), each with all its threads, live or ended, and with the children
it has collected (a process's cutime and cstime), as /proc/PID/stat gives them; a process that
ended is there until its parent collects it, and then in its parent's children's times. Not
counted: a child whose parent ignores SIGCHLD, which the kernel collects itself and whose times
it drops, once it has ended (while it runs it counts); and, where programs share the runner's
user (no root), a process that left the program's session. Each process is still held to the
kernel's own limit (RLIMIT_CPU, runner.py), and the whole program to the wall-clock backstop,
which ends a program that sleeps or blocks.

The runner reads a program's CPU again no sooner than the program could have used up what is
left of it, at one CPU per CPU this process may run on: a program far from its limit is read
rarely, one close to it every few milliseconds.
"""

import os
import selectors
import time

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
CPUS = len(os.sched_getaffinity(0))
# The shortest wait between two readings: a program overruns its limit by at most about this
# much CPU per CPU it runs on.
MIN_LOOK_S = 0.005
# Fields of /proc/PID/stat after the command's closing parenthesis: the session (field 6 of
# proc(5)), then utime, stime, cutime and cstime (fields 14 to 17).
_SESSION, _TIMES = 3, slice(11, 15)
_MIB = 1024 * 1024


class Meter:
    """The CPU time used by a program's processes (those of user `uid`, or else those of
    session `session`), against `limit_s`. `used_s` never shrinks: a process the kernel
    collected and dropped takes nothing back."""

    def __init__(self, limit_s, uid=None, session=None):
        self.limit_s, self.uid, self.session = limit_s, uid, session
        self.used_s = 0.0

    def read(self):
        """The CPU seconds used so far, read now."""
        ticks = sum(self._ticks_of(name) for name in os.listdir("/proc") if name.isdigit())
        self.used_s = max(self.used_s, ticks * TICK_S)
        return self.used_s

    def spent(self):
        return self.read() >= self.limit_s

    def _ticks_of(self, pid):
        try:
            if self.uid is not None and _real_uid(pid) != self.uid:
                return 0
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except (OSError, ValueError):
            return 0  # it ended and was collected while we looked
        if self.uid is None and int(fields[_SESSION]) != self.session:
            return 0
        return sum(int(field) for field in fields[_TIMES])


def _real_uid(pid):
    with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise ValueError(f"no Uid line for process {pid}")


class Tail:
    """The last `size` bytes of a stream, and how many bytes it had."""

    def __init__(self, size):
        self.size = size
        self.data = b""
        self.total = 0

    def add(self, chunk):
        self.total += len(chunk)
        self.data = (self.data + chunk)[-self.size :]

    def text(self):
        return self.data.decode("utf-8", "replace")


def watch(pid, pipes, meters, wall_deadline, max_output):
    """Collect output into `pipes` ({fd: Tail}) until the process `pid` exits ("exited", None),
    a meter's processes use up their CPU ("cpu", that meter), `wall_deadline` passes ("wall",
    None) or more than `max_output` bytes were written ("output", None)."""
    exit_fd = os.pidfd_open(pid)
    try:
        with selectors.DefaultSelector() as selector:
            for fd, tail in pipes.items():
                selector.register(fd, selectors.EVENT_READ, tail)
            selector.register(exit_fd, selectors.EVENT_READ, None)
            look = time.monotonic()
            while True:
                now = time.monotonic()
                if now >= look:
                    spent = next((meter for meter in meters if meter.spent()), None)
                    if spent is not None:
                        return "cpu", spent
                    left = min(meter.limit_s - meter.used_s for meter in meters)
                    look = now + max(MIN_LOOK_S, left / CPUS)
                if now >= wall_deadline:
                    return "wall", None
                for key, _ in selector.select(min(look, wall_deadline) - now):
                    if key.data is None:
                        return "exited", None
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    key.data.add(chunk)
                    if sum(tail.total for tail in pipes.values()) > max_output:
                        return "output", None
    finally:
        os.close(exit_fd)


def drain(pipes, within_s=0.5):
    """Read what was written before the end; a writer that escaped the sweep (where there is
    no sweep) must not keep us waiting."""
    give_up = time.monotonic() + within_s
    with selectors.DefaultSelector() as selector:
        for fd, tail in pipes.items():
            selector.register(fd, selectors.EVENT_READ, tail)
        while selector.get_map() and time.monotonic() < give_up:
            for key, _ in selector.select(give_up - time.monotonic()):
                chunk = os.read(key.fd, 65536)
                if chunk and key.data.total < 2 * _MIB:
                    key.data.add(chunk)
                else:
                    selector.unregister(key.fd)
    for fd in pipes:
        os.close(fd)
