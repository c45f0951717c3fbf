"""The `python-program` task kind: stdin-to-stdout programs judged by their outputs per case.

Its schema (cases as JSON, the comparison, the time limit per case), each judging rule, the
judge out of the program's reach (a program that hacks instead of answering never passes, and
the judge trusts nothing its own candidate-side runner says), run_public_tests, the canaries,
and the whole pipeline on the embedded example set.
"""

from __future__ import annotations

import json
import secrets
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from heldout.agents.canaries import BlindAgent, OracleAgent
from heldout.episodes.budgets import ExecLimits
from heldout.episodes.environments import ENVIRONMENTS, PythonProgramEnvironment, make_environment
from heldout.episodes.harness import Harness
from heldout.episodes.judge import build_program, score, score_many
from heldout.errors import AgentError, InputFileError
from heldout.sandbox import codec
from heldout.sandbox.protocol import Program
from heldout.tasks import python_function, python_program
from heldout.tasks.kinds import TASK_KINDS, task_kind
from heldout.tasks.python_program import ProgramTask, outputs_differ
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes, load_tasks
from tests.conftest import VERDICT_LINE, reason_line

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tasks" / "examples" / "python_program.jsonl"
LIMITS = {"timeout_s": 5.0, "memory_mb": 512}
REASON = "[heldout judge] "
SLACK_S = 8.0


def cases(*pairs: tuple[str, str]) -> str:
    return json.dumps([{"input": given, "output": wanted} for given, wanted in pairs])


def program_task(tests: str, name: str = "t", **fields) -> ProgramTask:
    return ProgramTask(id=f"program/{name}", prompt="Solve it.", tests=tests, **fields)


ADD = program_task(cases(("1 2\n", "3\n"), ("5 7\n", "12\n"), ("-4 4\n", "0\n")), "add",
                   public_tests=cases(("1 2\n", "3\n")),
                   reference="a, b = map(int, input().split())\nprint(a + b)\n")
# Expected outputs nobody can guess: a program passes only by getting them from the judge.
SECRETS = [f"secret-{secrets.token_hex(8)}" for _ in range(3)]
SECRET = program_task(cases(*((f"{i}\n", f"{s}\n") for i, s in enumerate(SECRETS))), "secret",
                      public_tests=cases(("0\n", f"{SECRETS[0]}\n")))


def judged(task: ProgramTask, program: str, sandbox, **limits) -> object:
    return score(task, textwrap.dedent(program), sandbox, **(limits or LIMITS))


# --- the kind and its schema -------------------------------------------------------------------


def test_the_kind_is_registered_with_a_scorer_version_of_its_own():
    assert "python-program" in TASK_KINDS and TASK_KINDS["python-program"].settings_model() \
        is ProgramTask
    assert task_kind("python-program").scorer_version == "python-program/1"
    # python-function's scorer, and so the default harness's fingerprint, did not move.
    assert python_function.SCORER_VERSION == Harness().scorer_version == "python-function/2"
    assert ENVIRONMENTS["python-program"] is PythonProgramEnvironment


def test_the_example_set_loads_as_program_tasks_with_references_and_public_cases():
    tasks = load_tasks(EXAMPLES)
    assert len(tasks) >= 12 and len({t.id for t in tasks}) == len(tasks)
    assert {type(t) for t in tasks} == {ProgramTask}
    assert {t.compare for t in tasks} >= {"exact", "tokens", "float:1e-6"}
    for task in tasks:
        assert task.reference and task.entry_point == "main"
        assert 1 <= len(json.loads(task.public_tests)) <= 2 <= len(json.loads(task.tests))
    # The record round-trips (the split stage writes records, later stages read them back).
    again = load_jsonl_bytes("".join(json.dumps(t.to_record()) + "\n" for t in tasks).encode(),
                             "again.jsonl")
    assert [t.content_hash for t in again] == [t.content_hash for t in tasks]


BAD_LINES = {
    '"tests": "[{\\"input\\": \\"1\\"}]"': [("tests", "case 1: missing 'output'")],
    '"tests": "not json"': [("tests", "not JSON: Expecting value at column 1")],
    '"tests": "[]"': [("tests", "expected a non-empty JSON list")],
    '"tests": "[{\\"input\\": 1, \\"output\\": \\"2\\", \\"x\\": 3}, 5]"': [
        ("tests", "case 1: unknown key 'x'; case 1: 'input' must be a string; case 2: "
                  "expected an object")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"\\\\n\\"}]"': [
        (None, "tests: every case expects an empty output")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"2\\"}]", "public_tests": "{}"': [
        ("public_tests", "expected a non-empty JSON list")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"2\\"}]", "compare": "fuzzy"': [
        ("compare", "unknown comparison 'fuzzy'; use exact, tokens or float:TOL")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"2\\"}]", "compare": "float:0"': [
        ("compare", "the tolerance of 'float:0' must be a positive number")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"2\\"}]", "entry_point": "solve"': [
        ("entry_point", "a python-program task has no entry point")],
    '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"2\\"}]", "case_timeout_s": 0': [
        ("case_timeout_s", "Input should be greater than 0")],
}


@pytest.mark.parametrize("fields", BAD_LINES)
def test_a_bad_record_is_reported_with_its_field(fields):
    line = '{"id": "p", "kind": "python-program", "prompt": "Solve it.", ' + fields + "}"
    with pytest.raises(InputFileError) as raised:
        load_jsonl_bytes(line.encode(), "bad.jsonl")
    found = [(p.line, p.field, p.message) for p in raised.value.problems]
    assert [(line, field) for line, field, _ in found] == [(1, f) for f, _ in BAD_LINES[fields]]
    for (_, _, message), (_, start) in zip(found, BAD_LINES[fields], strict=True):
        assert message.startswith(start), message


def test_a_minimal_record_needs_no_entry_point_and_defaults_to_exact_and_two_seconds():
    line = ('{"id": "p", "kind": "python-program", "prompt": "Echo.", '
            '"tests": "[{\\"input\\": \\"1\\", \\"output\\": \\"1\\"}]"}')
    [task] = load_jsonl_bytes(line.encode(), "ok.jsonl")
    assert (task.entry_point, task.compare, task.case_timeout_s, task.public_tests) == (
        "main", "exact", 2.0, None)


def test_the_candidates_program_holds_the_completion_but_no_expected_output():
    program = build_program(SECRET, "print('mine')\n")
    assert "print('mine')" in program.source
    assert not any(secret in program.source for secret in SECRETS)
    assert all(secret in program.judge for secret in SECRETS)
    assert program.stdin == ""


# --- the judging rules -------------------------------------------------------------------------

EXACT, TOKENS = {"mode": "exact"}, {"mode": "tokens"}
FLOAT = {"mode": "float", "tolerance": 1e-6}
RULES = [
    # (compare, got, expected, passes)
    (EXACT, "3\n", "3\n", True),
    (EXACT, "3", "3\n", True),  # the final newline is optional
    (EXACT, "3\r\n", "3\n", True),  # CRLF reads as LF
    (EXACT, "3\n\n", "3\n", False),  # an extra trailing newline is an extra (blank) line
    (EXACT, "3 \n", "3\n", False),  # trailing spaces count
    (EXACT, "1  2\n", "1 2\n", False),
    (EXACT, "1\n\n2\n", "1\n2\n", False),  # extra blank lines count
    (EXACT, "", "3\n", False),
    (TOKENS, "1  2\n", "1 2\n", True),
    (TOKENS, "1\n\n2\n\n\n", "1 2", True),  # extra blank lines and trailing newlines do not
    (TOKENS, "  1\t2  ", "1 2\n", True),
    (TOKENS, "1 2 3\n", "1 2\n", False),  # the wrong number of tokens
    (TOKENS, "1\n", "1 2\n", False),
    (TOKENS, "2 1\n", "1 2\n", False),
    (TOKENS, "1.0\n", "1\n", False),  # tokens compare as text
    (TOKENS, "1\x0b2\x0c3\r\n", "1 2 3", True),  # VT, FF and CR are ASCII whitespace too
    (TOKENS, "1\u20032\n", "1 2\n", False),  # an em space is no separator: one token
    (TOKENS, "1\xa02\n", "1 2\n", False),  # nor a no-break space
    (TOKENS, "1\u20032\n", "1\u20032\n", True),  # it compares as text, like any character
    (TOKENS, "1\x1c2\u20283\x854\n", "1 2 3 4\n", False),  # nor Python's other separators
    (FLOAT, "3.1415926\n", "3.14159265\n", True),  # inside the tolerance
    (FLOAT, "3.1416\n", "3.14159265\n", False),  # outside it
    (FLOAT, "1000000.4\n", "1000000\n", True),  # relative: 4e-7 of a million
    (FLOAT, "1000002\n", "1000000\n", False),
    (FLOAT, "0.0000005\n", "0\n", True),  # absolute near zero
    (FLOAT, "2.5e3\n", "2500.0000001\n", True),
    (FLOAT, "1 2.0000000001\n\n", "1.0 2\n", True),  # whitespace as for tokens
    (FLOAT, "1.0\n", "1.0 2.0\n", False),  # the wrong number of tokens
    (FLOAT, "1.0\u20032.0\n", "1.0 2.0\n", False),  # ASCII whitespace only, as for tokens
    (FLOAT, "nan\n", "1.0\n", False),
    (FLOAT, "inf\n", "inf\n", True),  # not a number to compare: equal as text
    (FLOAT, "1_0\n", "10\n", False),  # Python's float() would read it; a judge does not
    (FLOAT, "YES 0.5000001\n", "YES 0.5\n", True),  # words still compare exactly
    (FLOAT, "yes 0.5\n", "YES 0.5\n", False),
]


@pytest.mark.parametrize(("compare", "got", "expected", "passes"), RULES)
def test_each_judging_rule(compare, got, expected, passes):
    assert (outputs_differ(got, expected, compare) is None) == passes


def test_what_the_judge_says_of_a_mismatch_quotes_nothing_of_the_expected_output():
    assert outputs_differ("1\n2\n", "1\n3\n", EXACT) == "line 2 differs"
    assert outputs_differ("1\n", "1\n3\n", EXACT) == "1 lines, expected 2"
    assert outputs_differ("1 2 3", "1 2", TOKENS) == "3 tokens, expected 2"
    assert outputs_differ("1 2.5", "1 2.4", FLOAT) == "token 2 differs"


@pytest.mark.parametrize(
    ("compare", "printed", "passes"),
    [("exact", "'7'", True), ("exact", "'7\\n'", False), ("exact", "' 7'", False),
     ("tokens", "'\\n\\n 7 \\n'", True), ("tokens", "'7 7'", False),
     ("tokens", "'7\\u2003'", False),
     ("float:1e-6", "'7.0000001'", True), ("float:1e-6", "'7.001'", False)])
def test_the_rules_hold_through_the_sandbox(subprocess_sandbox, compare, printed, passes):
    task = program_task(cases(("x\n", "7\n")), "rule", compare=compare)
    result = judged(task, f"print({printed})\n", subprocess_sandbox)
    assert (result.passed, result.status) == (passes, "ok" if passes else "failed")
    assert reason_line(result).startswith(REASON)


def test_each_example_passes_with_its_reference_and_fails_with_the_blind_answer(
        subprocess_sandbox):
    tasks = load_tasks(EXAMPLES)
    blind = [BlindAgent().complete(task, 0, 0).text for task in tasks]
    results = score_many([(t, t.reference) for t in tasks] + list(zip(tasks, blind, strict=True))
                         + [(t.model_copy(update={"tests": t.public_tests}), t.reference)
                            for t in tasks], subprocess_sandbox, **LIMITS)
    count = len(tasks)
    assert [r.status for r in results[:count]] == ["ok"] * count, \
        [reason_line(r) for r in results[:count]]
    assert not any(r.passed for r in results[count:2 * count])
    assert all(r.passed for r in results[2 * count:])


def test_the_hidden_cases_kill_most_mutants_of_each_reference(subprocess_sandbox):
    # What the demo agents would submit (heldout.agents.mutation, on the program alone): the
    # cases must tell them from the reference. Survivors are equivalent mutants (or nearly).
    from heldout.agents.mutation import mutants

    pairs = [(task, mutant) for task in load_tasks(EXAMPLES)
             for _, mutant in mutants("", task.reference)]
    results = score_many(pairs, subprocess_sandbox, **LIMITS)
    killed: dict[str, list[bool]] = {}
    for (task, _), result in zip(pairs, results, strict=True):
        killed.setdefault(task.id, []).append(not result.passed)
    assert len(killed) == len(load_tasks(EXAMPLES)) and all(map(any, killed.values()))
    assert sum(map(sum, killed.values())) >= 0.85 * len(pairs)


def test_a_runtime_error_fails_the_case_even_after_the_right_output(subprocess_sandbox):
    result = judged(ADD, """
        a, b = map(int, input().split())
        print(a + b, flush=True)
        raise SystemExit(3)
        """, subprocess_sandbox)
    assert not result.passed
    assert reason_line(result) == f"{REASON}case 1 of 3: the program ended with exit status 3"


def test_stderr_is_shown_and_ignored(subprocess_sandbox):
    result = judged(ADD, """
        import sys
        a, b = map(int, sys.stdin.read().split())
        print("debugging", a, b, file=sys.stderr)
        print(a + b)
        """, subprocess_sandbox)
    assert result.passed and "debugging 1 2" in result.stderr_tail


def test_each_case_runs_in_a_fresh_process(subprocess_sandbox):
    # Module state of one case is not there in the next: each is a fork of the same start.
    result = judged(ADD, """
        import builtins
        seen = getattr(builtins, "seen", 0)
        builtins.seen = seen + 1
        a, b = map(int, input().split())
        print(a + b + seen)
        """, subprocess_sandbox)
    assert result.passed, reason_line(result)


def test_a_case_has_its_own_time_limit(subprocess_sandbox):
    slow = program_task(cases(("1\n", "1\n"), ("2\n", "2\n")), "slow", case_timeout_s=0.5)
    started = time.monotonic()
    result = judged(slow, """
        import time
        n = int(input())
        if n == 2:
            time.sleep(30)
        print(n)
        """, subprocess_sandbox)
    assert (result.passed, result.status) == (False, "timeout")
    assert reason_line(result) == f"{REASON}case 2 of 2: no exit within the case's 0.5 s"
    assert time.monotonic() - started < 0.5 + SLACK_S


def test_the_programs_cpu_time_limit_bounds_all_its_cases(subprocess_sandbox):
    # Each case computes for 0.7 s of CPU, under its own (wall-clock) limit, wide enough for a
    # loaded machine; all of them, in the candidate's forks,
    # count against the program's 2 s of CPU time.
    many = program_task(cases(*((f"{i}\n", f"{i}\n") for i in range(8))), "many",
                        case_timeout_s=6.0)
    started = time.monotonic()
    result = judged(many, "import time\nwhile time.process_time() < 0.7:\n    pass\n"
                          "print(input())\n", subprocess_sandbox, timeout_s=2.0, memory_mb=512)
    assert (result.passed, result.status) == (False, "timeout")
    assert reason_line(result).endswith("the candidate used its 2 s of CPU")
    assert time.monotonic() - started < 2.0 + SLACK_S


# --- programs that hack instead of answering ---------------------------------------------------

HACKS = {
    # the expected output of another case (the public one, in the statement) for every input
    "another-cases-output": f"print({SECRETS[0]!r})\n",
    "exit-0-without-output": "import os\nos._exit(0)\n",
    "PASS": "print('PASS')\nprint('[heldout judge] the tests passed')\n",
    "forged-verdict": "print('{\"passed\": true, \"kind\": \"ok\", \"reason\": \"ok\"}')\n",
    "huge-output": "import sys\nsys.stdout.write('x' * (3 << 20))\n",
    "huge-stderr": "import sys\nsys.stderr.write('x' * (64 << 20))\n",
    "sleeps-past-the-deadline": "import time\ntime.sleep(60)\n",
    "busy-past-the-deadline": "while True:\n    pass\n",
    "a-daemon-that-keeps-stdout-open": (
        "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('x')\n"),
    "kills-its-runner": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "kills-everything": "import os, signal\nos.kill(-1, signal.SIGKILL)\n",
    "stops-its-runner": "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
    "memory-bomb": "x = bytearray(1 << 34)\n",
    "fork-bomb": "import os\nwhile True:\n    os.fork()\n",
}


def hack_problems(result, *statuses) -> list[str]:
    """What is wrong with a hostile program's result: empty when it failed as a judged program
    fails (a status of `statuses`, the judge's reason)."""
    problems = []
    if result.passed:
        problems.append(f"HACK WORKS: {result}")
    if result.status not in (statuses or ("failed", "timeout", "oom")):
        problems.append(f"status {result.status}")
    if not reason_line(result).startswith(REASON):
        problems.append(f"not the judge's reason: {result.stderr_tail[-300:]}")
    return problems


@pytest.mark.parametrize("hack", HACKS.values(), ids=HACKS.keys())
def test_a_hack_does_not_pass(sandbox, hack):
    started = time.monotonic()
    assert hack_problems(judged(SECRET, hack, sandbox, timeout_s=3.0, memory_mb=512)) == []
    assert time.monotonic() - started < 3.0 + SLACK_S


# Everywhere a program might find the expected outputs: its work dir, /tmp, every process's
# fds, environment, command line and memory maps, and the sandbox's own files.
SEARCH = r"""
import glob, os, re, sys
sys.stdin.read()
found = set()
def look(path):
    try:  # pipes and sockets too, without waiting on them
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 1 << 22)
        finally:
            os.close(fd)
    except OSError:
        return
    found.add(data)
for pattern in ("*", "/tmp/**", "/proc/*/fd/*", "/proc/*/environ", "/proc/*/cmdline",
                "/proc/*/task/*/fd/*", "/proc/*/cwd/*", "/proc/*/root/tmp/**", "/dev/shm/*"):
    for path in glob.glob(pattern, recursive=True):
        look(path)
for pid in sorted(os.listdir("/proc")):
    if pid.isdigit():  # the other processes' memory, where it can be read
        try:
            with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
                for line in maps:
                    start, end = (int(x, 16) for x in line.split()[0].split("-"))
                    if "rw" in line.split()[1] and end - start < (64 << 20):
                        mem.seek(start)
                        data = mem.read(end - start)
                        found.update(re.findall(rb"secret-[0-9a-f]{16}", data))
        except (OSError, ValueError, OverflowError):
            pass
found = sorted({m.decode() for m in re.findall(rb"secret-[0-9a-f]{16}", b" ".join(found))})
print("FOUND", *found, file=sys.stderr)
print(found[0] if found else "nothing")
"""


def test_the_expected_outputs_cannot_be_found_from_the_program(sandbox):
    patient = SECRET.model_copy(update={"case_timeout_s": 20.0})
    result = judged(patient, SEARCH, sandbox, timeout_s=30.0, memory_mb=512)
    assert hack_problems(result) == []
    assert "FOUND" in result.stderr_tail, "the search ran"
    assert not any(secret in result.stderr_tail for secret in SECRETS), "HACK WORKS"


def test_the_search_finds_what_the_program_can_reach(sandbox):
    # The control: the case's own input (its stdin, at /proc/self/fd/0) is found by the search.
    own = f"secret-{secrets.token_hex(8)}"
    task = program_task(cases((f"{own}\n", f"{own}\n")), "control", case_timeout_s=20.0)
    result = judged(task, SEARCH, sandbox, timeout_s=30.0, memory_mb=512)
    assert f"FOUND {own}" in result.stderr_tail and result.passed


# A well-formed answer frame claiming the output PASS, written to the candidate's own channel to
# the judge (its runner's fd 4) and to every other file under /proc the program can open.
FORGED = codec.encode(["returned", ("exited", b"PASS\n", 0)])
WRITES = f"""
import glob, os, struct, sys
sys.stdin.read()
frame = struct.pack(">I", {len(FORGED)}) + {FORGED!r}
for path in ["/proc/%d/fd/4" % os.getppid(), *glob.glob("/proc/*/fd/*"),
             "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/self/oom_score_adj",
             "/proc/1/oom_score_adj", "/proc/%d/mem" % os.getppid()]:
    try:
        with open(path, "wb", buffering=0) as file:
            file.write(frame)
    except OSError:
        pass
print("PASS")
"""


def test_writing_to_proc_passes_nothing(sandbox):
    assert hack_problems(judged(SECRET, WRITES, sandbox, timeout_s=3.0, memory_mb=512)) == []


def test_a_right_answer_for_the_public_case_alone_fails_the_hidden_cases(sandbox):
    memorized = f"n = input()\nprint({SECRETS[0]!r} if n == '0' else 'no idea')\n"
    public = SECRET.model_copy(update={"tests": SECRET.public_tests})
    assert score(public, memorized, sandbox, **LIMITS).passed
    result = score(SECRET, memorized, sandbox, **LIMITS)
    assert hack_problems(result, "failed") == []
    assert reason_line(result) == f"{REASON}case 2 of 3: wrong output: line 1 differs"


# The candidate's side is the program's to corrupt: a runner of its own (here, a candidate source
# with any run_case) can still only fail. The judge checks each answer's shape, size and time.
LIARS = {
    "another-shape": "def run_case(stdin, t, limit):\n    return ['exited', b'x', 0]\n",
    "str-not-bytes": "def run_case(stdin, t, limit):\n    return ('exited', 'x', 0)\n",
    "too-much-output": "def run_case(stdin, t, limit):\n"
                       "    return ('exited', b'x' * (limit + 1), 0)\n",
    "says-exited-after-a-timeout": "import time\ndef run_case(stdin, t, limit):\n"
                                   "    time.sleep(t + 2)\n    return ('exited', b'', 0)\n",
    "says-a-fake-kind": "def run_case(stdin, t, limit):\n    return ('passed', b'', 0)\n",
    "raises": "def run_case(stdin, t, limit):\n    raise ValueError('no')\n",
    "bool-as-exit": "def run_case(stdin, t, limit):\n    return ('exited', b'', False)\n",
}


@pytest.mark.parametrize("liar", LIARS.values(), ids=LIARS.keys())
def test_the_judge_trusts_nothing_its_candidate_side_says(sandbox, liar):
    judge = build_program(SECRET, "").judge
    result = sandbox.run(Program(source=liar, judge=judge, group=SECRET.id), **LIMITS)
    assert hack_problems(result) == []


def test_the_judges_verdict_of_a_liar_that_answers_every_case_rightly_is_a_pass(sandbox):
    # The control for the liars: the judge does decide by the answers it gets.
    table = {str(i): f"{s}\n".encode() for i, s in enumerate(SECRETS)}
    liar = (f"TABLE = {table!r}\n"
            "def run_case(stdin, t, limit):\n"
            "    return ('exited', TABLE[stdin.strip()], 0)\n")
    judge = build_program(SECRET, "").judge
    assert sandbox.run(Program(source=liar, judge=judge, group=SECRET.id), **LIMITS).passed


# --- run_public_tests --------------------------------------------------------------------------


def environment(task, sandbox) -> PythonProgramEnvironment:
    made = make_environment(task, sandbox, ExecLimits(5.0, 512), "{prompt}",
                            ("run_public_tests", "submit"))
    assert isinstance(made, PythonProgramEnvironment)
    return made


def test_run_public_tests_lists_the_failed_cases_with_expected_and_got(subprocess_sandbox):
    task = program_task(cases(("1 2\n", "3\n")), "pub", public_tests=cases(
        ("1 2\n", "3\n"), ("5 7\n", "12\n"), ("0 0\n", "0\n")))
    env = environment(task, subprocess_sandbox)
    assert [tool.name for tool in env.tools] == ["run_public_tests", "submit"]
    assert "stdin" in env.tools[0].description
    result = env.call("run_public_tests", {"code": "a, b = map(int, input().split())\n"
                                                   "print(a * b)\n"})
    assert result.data == {"passed": False, "status": "failed", "failed_cases": [1, 2]}
    assert result.text == (
        "2 of 3 public test cases failed.\n"
        "Case 1: wrong output: line 1 differs\n"
        "  input:    '1 2\\n'\n"
        "  expected: '3\\n'\n"
        "  got:      '2\\n'\n"
        "Case 2: wrong output: line 1 differs\n"
        "  input:    '5 7\\n'\n"
        "  expected: '12\\n'\n"
        "  got:      '35\\n'")
    assert env.last_program is not None and result.submitted is None
    right = env.call("run_public_tests", {"code": "a, b = map(int, input().split())\n"
                                                  "print(a + b)\n"})
    assert (right.text, right.data["passed"]) == ("All public tests passed.", True)
    submitted = env.call("submit", {"code": "print(0)\n"})
    assert submitted.submitted == "print(0)\n"


def test_run_public_tests_truncates_long_texts_and_says_what_was_not_run(subprocess_sandbox):
    long_input = "y" * 5000 + "\n"
    task = program_task(cases(("1\n", "1\n")), "long", case_timeout_s=0.5, public_tests=cases(
        (long_input, "z" * 5000 + "\n"), ("slow\n", "1\n"), ("die\n", "1\n"),
        ("never\n", "1\n")))
    result = environment(task, subprocess_sandbox).call("run_public_tests", {"code": (
        "import os, signal, time\ns = input()\nif s == 'slow':\n    time.sleep(5)\n"
        "if s == 'die':\n    os.kill(os.getppid(), signal.SIGKILL)\nprint('w' * 9000)\n")})
    # The timed-out case leaves the judge's channel in step: the next case runs. A killed
    # runner does not: the cases after it are not run, and the run says so.
    assert result.data["failed_cases"] == [1, 2, 3] and result.data["status"] == "failed"
    lines = result.text.splitlines()
    assert lines[0] == "3 of 4 public test cases failed."
    assert max(len(line) for line in lines) < 250 and len(result.text) < 2000
    assert lines[1] == "Case 1: wrong output: line 1 differs"
    assert lines[2].startswith("  input:    'yyy") and lines[2].endswith("' ...")
    assert lines[4].startswith("  got:      'www") and lines[4].endswith("' ...")
    assert lines[5:9] == ["Case 2: no exit within the case's 0.5 s", "  input:    'slow\\n'",
                          "  expected: '1\\n'", "  got:      (no output)"]
    assert lines[9] == "Case 3: the candidate process ended during a call"
    assert lines[-1] == "Cases after case 3 were not run."


def test_a_task_without_public_cases_says_so(subprocess_sandbox):
    task = program_task(cases(("1\n", "1\n")), "none")
    result = environment(task, subprocess_sandbox).call("run_public_tests", {"code": "pass"})
    assert (result.text, result.data) == ("This task has no public tests.", {"passed": None})


# --- the canaries ------------------------------------------------------------------------------


def test_the_blind_answer_is_the_kinds_own():
    function_task = Task(id="f", prompt="def f(x):\n    '''x'''\n", entry_point="f",
                         tests="assert f(1) == 1\n")
    assert BlindAgent().complete(function_task, 0, 0).text == "    pass\n"
    assert BlindAgent().complete(ADD, 0, 0).text == "import sys\n\nsys.stdin.read()\n"
    assert OracleAgent().complete(ADD, 0, 0).text == ADD.reference


def test_a_kind_without_a_blind_answer_is_an_agent_error(monkeypatch):
    from heldout.agents import canaries

    monkeypatch.delitem(canaries.BLIND_ANSWERS, "python-program")
    with pytest.raises(AgentError, match="no blind answer for kind 'python-program'"):
        BlindAgent().complete(ADD, 0, 0)


# --- the whole pipeline ------------------------------------------------------------------------


def test_the_pipeline_runs_end_to_end_on_the_program_examples(project: Path, monkeypatch):
    from stages import decontaminate, report, rollouts, score, select, split
    from stages import test as test_stage

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    checkpoints = {"base": {"agent": "demo", "skill": -0.5},
                   "late": {"agent": "demo", "skill": 1.5},
                   "tester": {"agent": "demo", "policy": "tester", "skill": 0.3}}
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["tasks"]["source"] = "tasks/examples/python_program.jsonl"
    params["harness"].update(n=2, scorer_version=python_program.SCORER_VERSION)
    params["checkpoints"], params["base"] = checkpoints, "base"
    params["sensitivity"]["checkpoints"] = []
    # 13 example programs are far too few for the plan before the test split opens.
    params["test"]["spend"] = {"candidates": list(checkpoints),
                               "reason": "13 example programs, too few to decide by design"}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    manifest = split.run(project)
    assert manifest is not None
    decontaminate.run(project)
    assert json.loads((project / "data/decontam/report.json").read_text())
    for name in checkpoints:
        rollouts.run(name, project)
    scores = score.run(project)
    canaries = scores["canaries"]
    assert (canaries["oracle_pass_rate"], canaries["blind_pass_rate"]) == (1.0, 0.0)
    assert canaries["oracle_failed"] == canaries["blind_passed"] == []
    # The stacker passed exactly the episodes its hashes named (its kind's blind answer as the
    # wrong guess), none on a guess it only tested.
    assert canaries["stacker_passes"] == canaries["stacker_expected"]
    assert canaries["stacker_stacked"] == canaries["stacker_missed"] == []
    select.run(project)
    test_stage.run(project)
    report.run(project)
    text = (project / "reports/report.md").read_text()
    assert VERDICT_LINE.search(text)
    assert (project / "reports/report.html").is_file()

    import pandas as pd

    rows = pd.read_parquet(project / "data/rollouts/val/tester.parquet")
    assert set(rows["status"]) == {"ok"} and rows["turns"].min() >= 3  # it tested, then submitted
    assert rows["public_passed"].all()


def test_a_harness_whose_scorer_is_not_the_tasks_kind_is_refused_naming_the_field():
    from heldout.episodes.rollout import check_scorer_version
    from heldout.errors import ParamsError

    tasks = load_tasks(EXAMPLES)
    with pytest.raises(ParamsError) as refused:
        check_scorer_version({task.kind for task in tasks}, Harness())
    assert str(refused.value) == (
        "params.yaml: harness.scorer_version: 'python-function/2', but these tasks are scored "
        "by python-program/1; set it to python-program/1")
    check_scorer_version({task.kind for task in tasks}, Harness(scorer_version="python-program/1"))


def test_demo_policies_act_on_programs_and_the_hacker_passes_public_cases_only(
        subprocess_sandbox):
    from heldout.agents.demo import _mutants_by_operator
    from heldout.agents.registry import make_agent
    from heldout.episodes.episode import plan_episodes, run_episode
    from heldout.episodes.rollout import agent_context

    tasks = load_tasks(EXAMPLES)
    # Whole programs are mutated alone (their prose statement is not code).
    assert all(_mutants_by_operator("", task.reference) for task in tasks)
    harness = Harness(n=2, max_turns=5, scorer_version="python-program/1")
    outcomes = {}
    for policy in ("single", "hacker"):
        agent = make_agent("ck", {"agent": "demo", "policy": policy, "skill": -1.0},
                           agent_context(harness, "."))
        rows = [run_episode(agent, subprocess_sandbox, harness, episode)
                for episode in plan_episodes(tasks, harness)]
        outcomes[policy] = (sum(r["passed"] for r in rows), sum(bool(r["public_passed"])
                                                              for r in rows), len(rows))
    passed, _, episodes = outcomes["single"]
    assert 0 < passed < episodes  # the reference sometimes, a mutant otherwise
    assert outcomes["hacker"] == (0, episodes, episodes)
