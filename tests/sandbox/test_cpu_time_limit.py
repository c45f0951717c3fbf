"""A program's time limit is CPU time, so a verdict does not depend on how busy the machine is
(heldout/sandbox/watch.py): the same CPU-bound programs get the same verdicts idle and beside
busy processes; a program's CPU counts over its threads and its processes, the judge's apart;
a program that sleeps meets the wall-clock backstop instead, with a reason of its own. On both
backends (the docker half needs a container engine, as in test_sandbox.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from heldout.agents.protocol import Completion
from heldout.episodes.episode import plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.judge import score
from heldout.episodes.rows import TIMING_COLUMNS
from heldout.sandbox.base import WALL_FACTOR
from heldout.sandbox.config import make_sandbox
from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks
from tests.conftest import SANDBOX_BACKENDS, reason_line

LIMIT_S = 1.0
LIMITS = {"timeout_s": LIMIT_S, "memory_mb": 512}
WALL_S = LIMIT_S * WALL_FACTOR
USED_ITS_CPU = f"used its {LIMIT_S:g} s of CPU"
# Shares of the limit the CPU-bound programs need: well inside it, and well past it.
INSIDE, PAST = 0.4, 2.5
# Busy processes beside the programs: 8 on this 2-core machine, as many per core elsewhere.
BUSY = max(8, 4 * (os.cpu_count() or 1))

SPIN = Task(id="cpu/spin", group="cpu", prompt='def spin(x):\n    """Return x."""\n',
            entry_point="spin", tests="assert spin(3) == 3\n")
# Counts `n` loops of CPU time in this process; prints loops per CPU second.
CALIBRATE = ("import time\ndef work(n):\n    for _ in range(n):\n        pass\n"
             "started = time.process_time()\nwork(10_000_000)\n"
             "print(10_000_000 / (time.process_time() - started))\n")


def loops_per_cpu_second(sandbox) -> float:
    """How fast the sandbox's interpreter loops, measured where the programs will run."""
    rates = sorted(float(sandbox.run(CALIBRATE, timeout_s=30, memory_mb=256).stdout_tail)
                   for _ in range(3))
    return rates[1]


def cpu_bound_programs(rate: float) -> list[tuple[str, float, str]]:
    """(how it is run, its share of the limit, its source): the same loop as a plain program
    and as a judged completion."""
    programs = []
    for share in (INSIDE, PAST):
        loops = int(rate * LIMIT_S * share)
        programs.append(("plain", share, f"def work():\n    for _ in range({loops}):\n"
                                         "        pass\nwork()\n"))
        programs.append(("judged", share, f"    for _ in range({loops}):\n        pass\n"
                                          "    return x\n"))
    return programs


def run_each(sandbox, programs):
    return [sandbox.run(source, **LIMITS) if how == "plain" else
            score(SPIN, source, sandbox, **LIMITS) for how, _, source in programs]


class busy_processes:
    """`count` processes that only compute, each in a session of its own, as other jobs'
    processes are: the kernel's autogroup gives a session, not a process, its share of the CPUs,
    so busy processes in this test's own session would slow the sandbox far less."""

    def __init__(self, count: int):
        self.count = count

    def __enter__(self):
        self.processes = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                           start_new_session=True) for _ in range(self.count)]
        time.sleep(0.5)  # all of them computing
        return self

    def __exit__(self, *exc_info):
        for process in self.processes:
            process.kill()
        for process in self.processes:
            process.wait()


@pytest.mark.parametrize("backend", SANDBOX_BACKENDS)
def test_the_same_cpu_bound_programs_get_the_same_verdicts_idle_and_beside_busy_processes(
        request, backend):
    request.getfixturevalue(f"{backend}_sandbox")  # skips where the backend cannot run
    # A backstop far past what the load stretches them to: every ending is the CPU's.
    with make_sandbox(backend, workers=1, wall_factor=20) as sandbox:
        programs = cpu_bound_programs(loops_per_cpu_second(sandbox))
        idle = run_each(sandbox, programs)
        with busy_processes(BUSY):
            loaded = run_each(sandbox, programs)
    expected = ["ok" if share == INSIDE else "timeout" for _, share, _ in programs]
    figures = [(how, share, r.status, r.exec_s, r.cpu_s)
               for (how, share, _), r in zip(programs * 2, idle + loaded, strict=True)]
    assert [r.status for r in idle] == [r.status for r in loaded] == expected, figures
    # For the same reasons: each timeout is the program's CPU, never the clock.
    assert [reason_line(r) for r in idle] == [reason_line(r) for r in loaded], figures
    assert all(USED_ITS_CPU in reason_line(r) for r in loaded if r.status == "timeout"), figures
    # The load was real: by the clock the programs took several times their CPU time (enough,
    # here, for those inside their limit to take longer than it: a timeout under a wall-clock
    # limit, as docs/sandbox.md measured).
    assert all(r.exec_s > 2 * r.cpu_s for r in loaded), figures


THREADS = """
import hashlib, threading, time
data = b"x" * (1 << 22)
def burn():  # hashlib lets go of the GIL: the two threads compute at once where they can
    while time.thread_time() < 0.7:
        hashlib.sha256(data).digest()
threads = [threading.Thread(target=burn) for _ in range(2)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""
BURN = "import os, time\ndef burn(seconds):\n    while time.process_time() < seconds:\n" \
       "        pass\n"
CHILD = BURN + "pid = os.fork()\nif pid == 0:\n    burn(0.7)\n    os._exit(0)\nburn(0.7)\n" \
               "os.waitpid(pid, 0)\n"
# Each under the limit alone, and under the kernel's per-process limit (RLIMIT_CPU) by far.
CHILDREN_IN_TURN = BURN + "for _ in range(3):\n    pid = os.fork()\n    if pid == 0:\n" \
                          "        burn(0.45)\n        os._exit(0)\n    os.waitpid(pid, 0)\n"
# Out of the program's session and process group, its parent gone: still the program's user.
DAEMON = BURN + "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n" \
                "        burn(5)\n    os._exit(0)\ntime.sleep(3)\n"


@pytest.mark.parametrize("program", [THREADS, CHILD, CHILDREN_IN_TURN, DAEMON],
                         ids=["two-threads", "a-child-beside-it", "children-in-turn",
                              "a-daemon-out-of-its-session"])
def test_the_cpu_of_every_thread_and_process_of_a_program_counts(sandbox, program):
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "timeout"), result
    assert USED_ITS_CPU in result.stderr_tail and result.cpu_s >= LIMIT_S, result
    assert result.exec_s < WALL_S, "ended by its CPU, before the wall-clock backstop"


ADD = Task(id="cpu/add", group="cpu", prompt='def add(a, b):\n    """Return a + b."""\n',
           entry_point="add", tests="assert add(2, 3) == 5\n")


def assert_the_candidates_cpu_ran_out(result) -> None:
    assert (result.passed, result.status) == (False, "timeout"), result
    assert reason_line(result) == f"[heldout judge] the candidate {USED_ITS_CPU}"


def test_a_candidate_that_computes_in_a_child_process_times_out_by_its_cpu(sandbox):
    completion = "    " + CHILD.replace("\n", "\n    ") + "\n    return a + b\n"
    assert_the_candidates_cpu_ran_out(score(ADD, completion, sandbox, **LIMITS))


@pytest.mark.parametrize("backend", SANDBOX_BACKENDS)
def test_a_candidate_that_computes_between_calls_times_out_at_the_next_call(request, backend):
    # The judge's tests sleep (no CPU of the candidate's) while the candidate's thread spins:
    # the runner's word that its CPU is spent waits for the judge's next call.
    request.getfixturevalue(f"{backend}_sandbox")  # skips where the backend cannot run
    spinning = Task(id="cpu/later", group="cpu", prompt=ADD.prompt, entry_point="add",
                    tests="import time\ntime.sleep(5)\nassert add(2, 3) == 5\n")
    completion = ("    return a + b\nimport threading\n"
                  "threading.Thread(target=lambda: sum(iter(int, 1)), daemon=True).start()\n")
    # The sleep leaves the spinning thread 5 s by the clock for its 1 s of CPU on a loaded
    # machine, and a backstop of 10 s (not WALL_S, 4 s) leaves start-up and IPC 5 s more: the
    # CPU limit, not the wall clock, ends it.
    with make_sandbox(backend, workers=1, wall_factor=10) as sandbox:
        result = score(spinning, completion, sandbox, **LIMITS)
    assert_the_candidates_cpu_ran_out(result)


def test_the_judges_own_cpu_is_limited_apart_from_the_candidates(sandbox):
    slow_tests = Task(id="cpu/judge", group="cpu", prompt=ADD.prompt, entry_point="add",
                      tests="assert add(2, 3) == 5\nwhile True:\n    pass\n")
    result = score(slow_tests, "    return a + b\n", sandbox, **LIMITS)
    assert (result.passed, result.status) == (False, "timeout"), result
    assert reason_line(result) == f"[heldout judge] the judge {USED_ITS_CPU}: killed"
    assert result.cpu_s < LIMIT_S, "the candidate answered and waited"


def test_a_program_that_sleeps_meets_the_wall_clock_backstop_with_a_reason_of_its_own(sandbox):
    plain = sandbox.run("import time\ntime.sleep(60)\n", **LIMITS)
    judged = score(ADD, "    import time\n    time.sleep(60)\n", sandbox, **LIMITS)
    for result in (plain, judged):
        assert (result.passed, result.status) == (False, "timeout"), result
        assert WALL_S <= result.exec_s < WALL_S + 2 and result.cpu_s < LIMIT_S / 2, result
    assert reason_line(plain) == (f"[heldout] no exit within {WALL_S:g} s of wall clock, with "
                                  f"{plain.cpu_s:.2f} s of CPU used: killed")
    assert reason_line(judged) == f"[heldout judge] no answer from add within {WALL_S:g} s " \
                                  "of wall clock"


class _Spinner:
    """An agent whose completion computes until its CPU time is spent."""

    def complete(self, task, sample, seed):
        return Completion("    while True:\n        pass\n")


def test_an_episode_row_keeps_the_programs_cpu_time_beside_its_wall_clock_time(
        subprocess_sandbox):
    harness = Harness(n=1, timeout_s=LIMIT_S)
    task = load_tasks("humaneval")[0]
    row = run_episode(_Spinner(), subprocess_sandbox, harness, plan_episodes([task], harness)[0])
    assert (row["status"], row["passed"]) == ("timeout", False)
    assert LIMIT_S <= row["exec_cpu_s"] <= row["exec_s"] < WALL_S, row
    # A timing: it differs a little from run to run, and no digest of results holds it.
    assert {"exec_s", "exec_cpu_s"} <= set(TIMING_COLUMNS)
