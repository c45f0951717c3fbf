"""How the runner tells how a program ended: the memory cgroup's kills, a plain program's
status, the judge's verdict read back, and the judge's part passed on without being read.

Standard library only, no heldout imports: the runner (runner.py) loads this file's source as a
module of its own inside the sandbox.
"""

import collections
import json
import os
import signal

# A program's limits and what it used: `timeout_s` of CPU time, `wall_s` of wall-clock time
# (the backstop), and `cpu_s`, the CPU time it used (watch.py).
Clock = collections.namedtuple("Clock", "timeout_s wall_s cpu_s", defaults=(0.0,))

# Where the memory cgroup counts its kills: cgroup v2, then v1 (absent outside a container).
_OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def oom_kills():
    """How many processes the memory cgroup has killed so far, or None where no count can be
    read: a process that kills itself with SIGKILL is then no out-of-memory."""
    for path in _OOM_COUNTERS:
        try:
            with open(path, encoding="ascii") as counters:
                for line in counters:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def cpu_spent(who, clock):
    return f"{who} used its {clock.timeout_s:g} s of CPU"


def program_status(ended, exit_code, stderr, oom_killed, clock, output_mb):
    """A plain program's status and the note added to its stderr, from how it ended
    ("exited"; "cpu" or "wall", its limits in `clock`; "output": it wrote more than `output_mb`
    MiB). A program that used its CPU time before it exited timed out, however it exited."""
    if ended == "cpu" or (ended == "exited" and clock.cpu_s >= clock.timeout_s):
        killed = ": killed" if ended == "cpu" else ""
        return "timeout", f"\n[heldout] {cpu_spent('the program', clock)}{killed}"
    if ended == "wall":
        return "timeout", (f"\n[heldout] no exit within {clock.wall_s:g} s of wall clock, with "
                           f"{clock.cpu_s:.2f} s of CPU used: killed")
    if ended == "output":
        return "failed", f"\n[heldout] more than {output_mb} MiB of output: killed"
    if exit_code == 0:
        return "ok", ""
    if exit_code == -signal.SIGXCPU:  # one process reached the kernel's limit (RLIMIT_CPU)
        return "timeout", "\n[heldout] CPU time limit reached"
    if oom_killed:
        return "oom", "\n[heldout] killed by the memory limit"
    if stderr.rstrip().rpartition("\n")[2].startswith("MemoryError"):
        return "oom", ""
    return "failed", ""


def read_verdict(fd):
    """The judge's verdict, or None when it wrote none (or not one the judge would write)."""
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
        if len(data) > 65536:
            break
    os.close(fd)
    try:
        verdict = json.loads(data)
    except ValueError:
        return None
    shaped = (isinstance(verdict, dict) and isinstance(verdict.get("passed"), bool)
              and isinstance(verdict.get("reason"), str)
              and verdict.get("kind") in ("ok", "failed", "timeout", "oom"))
    return verdict if shaped else None


def pass_on(size, target):
    """Move the next `size` bytes of the runner's input to `target` inside the kernel (splice),
    so the judge's part never sits in the runner's memory; what a dead judge leaves of it goes
    to /dev/null, the same way."""
    discard = None
    try:
        while size > 0:
            try:
                moved = os.splice(0, discard or target, size)
            except BrokenPipeError:
                discard = discard or os.open(os.devnull, os.O_WRONLY)
                continue
            if moved == 0:
                return
            size -= moved
    finally:
        os.close(target)
        if discard is not None:
            os.close(discard)


def judged_status(ended, verdict, out_of_memory, clock):
    """The program's status and the reason's line, from how the runner saw the judge end
    ("exited"; "cpu": the judge used its own CPU time; "wall": the backstop; "output": the
    candidate wrote too much) and the candidate's CPU time (`clock`): a pass needs the
    candidate within its limit."""
    if ended == "cpu":
        return "timeout", cpu_spent("the judge", clock) + ": killed"
    if ended == "wall":
        return "timeout", f"no verdict within {clock.wall_s:g} s of wall clock: killed"
    if ended == "output":
        return "failed", "the candidate wrote too much output: killed"
    if verdict is None:
        # The memory cgroup of a container is the judge's too: its kill may fall on the judge.
        return ("oom" if out_of_memory else "failed"), "the judge ended without a verdict"
    if verdict["passed"]:
        if clock.cpu_s >= clock.timeout_s:
            return "timeout", cpu_spent("the candidate", clock)
        return "ok", verdict["reason"]
    if verdict["kind"] in ("timeout", "oom"):
        return verdict["kind"], verdict["reason"]
    if out_of_memory:
        return "oom", f"the candidate ran out of memory ({verdict['reason']})"
    return "failed", verdict["reason"]
