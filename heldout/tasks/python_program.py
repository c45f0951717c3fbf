"""The `python-program` task kind: the prompt is a problem statement, the completion a whole
program that reads the input on stdin and writes the answer on stdout, and each test case is an
input and the output expected for it (the format of APPS, CodeContests and LiveCodeBench).

`tests` (hidden) and `public_tests` are JSON text: a list of {"input": str, "output": str}.
`compare` says how an output is checked against the expected one: `exact` (line by line, one
final newline optional, CRLF read as LF), `tokens` (whitespace-separated tokens equal: spacing,
blank lines and trailing newlines do not count) or `float:TOL` (tokens; where the expected token
is a decimal number, any number within TOL absolutely or relatively passes). `case_timeout_s` is
each case's time limit; all cases together are one program under the harness's timeout_s.
`entry_point` is not used by this kind and is `main` (the default) for every task.

The program is judged (heldout/sandbox/roles.py): the candidate process holds only the program
and a small runner (`_run_program_case`, below) that, per call, forks the program with the
case's input on stdin and answers with its output and exit status. The judge process, another
user, holds the cases and decides each one with `judge_cases` (below, sent as the judge's
trusted prompt): a case passes only if the program exited 0 within the case's time limit with at
most OUTPUT_LIMIT bytes of output that match. The expected outputs never enter the candidate's
process, and nothing the program does besides its output (exit codes, text on stderr, files,
signals) can pass a case.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from heldout.json_lines import json_error
from heldout.sandbox.protocol import Program
from heldout.tasks.kinds import TaskKind
from heldout.tasks.record import Task

KIND_NAME = "python-program"
SCORER_VERSION = "python-program/1"
OUTPUT_LIMIT = 1024 * 1024  # bytes of stdout per case; more is a failed case
# The judge's wait beyond a case's time limit, for the fork and the answer: a candidate that
# does not answer by then has its case timed out, whatever its own runner says.
CASE_GRACE_S = 0.25
# How many failed public cases the judge describes to run_public_tests, and how much of each
# text (input, expected, got): the verdict stays far below what the runner reads of it.
REVEALED_CASES = 5
REVEALED_CHARS = 200
ENTRY_POINT = "main"  # Task requires the field; this kind runs the program whole
RUN_CASE = "run_case"  # the candidate's function the judge calls once per case
_COMPARE = re.compile(r"exact|tokens|float:(?P<tolerance>[0-9.eE+-]+)")


# --- the task's schema -----------------------------------------------------------------------


def parse_cases(text: str) -> list[dict[str, str]]:
    """The cases of a `tests` or `public_tests` field: a JSON list of {"input", "output"}
    strings. Raises ValueError naming every bad case."""
    try:
        cases = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {json_error(error)}; expected a list of "
                         '{"input": ..., "output": ...}') from None
    if not isinstance(cases, list) or not cases:
        raise ValueError('expected a non-empty JSON list of {"input": ..., "output": ...}')
    problems = []
    for number, case in enumerate(cases, start=1):
        if not isinstance(case, dict):
            problems.append(f'case {number}: expected an object {{"input", "output"}}')
            continue
        problems += [f"case {number}: missing {key!r}" for key in ("input", "output")
                     if key not in case]
        problems += [f"case {number}: unknown key {key!r}" for key in sorted(case)
                     if key not in ("input", "output")]
        problems += [f"case {number}: {key!r} must be a string" for key in ("input", "output")
                     if key in case and not isinstance(case[key], str)]
    if problems:
        raise ValueError("; ".join(problems[:10]) + ("; ..." if len(problems) > 10 else ""))
    return cases


def compare_rule(compare: str) -> dict[str, Any]:
    """`exact`, `tokens` or `float:TOL` as the judge reads it. Raises ValueError."""
    match = _COMPARE.fullmatch(compare)
    if match is None:
        raise ValueError(f"unknown comparison {compare!r}; use exact, tokens or float:TOL "
                         "(e.g. float:1e-6)")
    if match["tolerance"] is None:
        return {"mode": compare}
    try:
        tolerance = float(match["tolerance"])
    except ValueError:
        tolerance = math.nan
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"the tolerance of {compare!r} must be a positive number")
    return {"mode": "float", "tolerance": tolerance}


class ProgramTask(Task):
    """A `python-program` task. `tests` and `public_tests` hold JSON lists of cases."""

    kind: Literal["python-program"] = KIND_NAME
    entry_point: str = ENTRY_POINT
    compare: str = "exact"
    case_timeout_s: float = Field(default=2.0, gt=0, le=60)

    @field_validator("entry_point")
    @classmethod
    def _no_entry_point(cls, value: str) -> str:
        if value != ENTRY_POINT:
            raise ValueError(f"a python-program task has no entry point (the program is run "
                             f"whole): leave the field out, or set it to {ENTRY_POINT!r}")
        return value

    @field_validator("tests", "public_tests")
    @classmethod
    def _cases(cls, text: str | None) -> str | None:
        if text is not None:
            parse_cases(text)
        return text

    @field_validator("compare")
    @classmethod
    def _compare(cls, compare: str) -> str:
        compare_rule(compare)
        return compare

    @model_validator(mode="after")
    def _some_case_expects_output(self) -> ProgramTask:
        # A program that prints nothing (the blind canary) must fail the task.
        if not any(case["output"].strip() for case in parse_cases(self.tests)):
            raise ValueError("tests: every case expects an empty output, so a program that "
                             "prints nothing would pass; add a case that expects output")
        return self


# --- the judge's side: trusted code, sent as the judge's prompt and run in the judge ---------


def output_lines(text):
    """The lines of an output for `exact`: CRLF read as LF, one final newline optional."""
    text = text.replace("\r\n", "\n")
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def numbers_close(got, expected, tolerance):
    """Both tokens decimal numbers (digits, a point, an exponent; no nan, inf or underscores)
    within `tolerance`, absolutely or relatively to the expected one."""
    import math
    import re

    number = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
    if not (number.fullmatch(got) and number.fullmatch(expected)):
        return False
    got_value, expected_value = float(got), float(expected)
    if not (math.isfinite(got_value) and math.isfinite(expected_value)):
        return False
    return abs(got_value - expected_value) <= tolerance * max(1.0, abs(expected_value))


def outputs_differ(got, expected, compare):
    """None when `got` matches `expected` under `compare` (compare_rule's dict), else where it
    does not, in words that quote nothing of the expected output."""
    if compare["mode"] == "exact":
        got_lines, expected_lines = output_lines(got), output_lines(expected)
        if got_lines == expected_lines:
            return None
        if len(got_lines) != len(expected_lines):
            return f"{len(got_lines)} lines, expected {len(expected_lines)}"
        first = next(i for i, pair in enumerate(zip(got_lines, expected_lines, strict=True), 1)
                     if pair[0] != pair[1])
        return f"line {first} differs"
    # Split as bytes, on ASCII whitespace alone: "1\u20032" (an em space) is one token.
    got_tokens, expected_tokens = got.encode().split(), expected.encode().split()
    if len(got_tokens) != len(expected_tokens):
        return f"{len(got_tokens)} tokens, expected {len(expected_tokens)}"
    tolerance = compare.get("tolerance")
    for index, (token, wanted) in enumerate(zip(got_tokens, expected_tokens, strict=True), start=1):
        if token != wanted and not (tolerance and numbers_close(token, wanted, tolerance)):
            return f"token {index} differs"
    return None


def case_outcome(answer, expected, spec):
    """(kind, why, output) of one case from the candidate's answer: kind None for a pass, else
    "failed", "timeout" or "oom"; output the program's text where it has one."""
    shaped = (type(answer) is tuple and len(answer) == 3 and type(answer[0]) is str
              and type(answer[1]) is bytes and type(answer[2]) is int)
    if not shaped:
        return "failed", "the candidate's answer is not a run of the program", None
    ended, output, code = answer
    if ended == "timeout":
        return "timeout", f"no exit within the case's {spec['case_timeout_s']:g} s", None
    if ended == "output" or len(output) > spec["output_limit"]:
        return "failed", f"more than {spec['output_limit']} bytes of output", None
    if ended != "exited":
        return "failed", "the candidate's answer is not a run of the program", None
    try:
        text = output.decode("utf-8")
    except UnicodeDecodeError:
        return "failed", "the output is not UTF-8", None
    if code != 0:
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return "failed", f"the program ended with {how}", text
    why = outputs_differ(text, expected, spec["compare"])
    if why is None:
        return None, "", text
    return "failed", f"wrong output: {why}", text


def judge_cases(run_case, spec_json):
    """Run every case through the candidate (`run_case`, the judge's proxy) and end the judging
    with the first failed case's kind and reason, or, when `reveal` (public cases, for
    run_public_tests), with JSON describing the failed cases. Returns when every case passed.
    Every case is asked whatever the answers before it, so that being asked again tells the
    candidate nothing; only a call that failed (the channel lost, or a case past its deadline,
    which the candidate saw for itself) ends the asking."""
    import json

    spec = json.loads(spec_json)
    cases, failed, run = spec["cases"], [], 0
    for number, case in enumerate(cases, start=1):
        run, channel_lost = number, False
        ask = run_case.within(spec["case_timeout_s"] + spec["grace_s"])
        try:
            answer = ask(case["input"], spec["case_timeout_s"], spec["output_limit"])
        except Exception as error:  # noqa: BLE001 - the candidate's runner raised: still in step
            kind, why, got = "failed", f"the program could not run: {type(error).__name__}", None
        except BaseException as error:  # noqa: BLE001 - the call failed: nothing more can be asked
            kind, why, got = getattr(error, "kind", "failed"), str(error)[:300], None
            channel_lost = True
        else:
            kind, why, got = case_outcome(answer, case["output"], spec)
        if kind is not None:
            failed.append((number, why, case, got, kind))
        if channel_lost:
            break
    if failed and not spec["reveal"]:
        number, why, _, _, kind = failed[0]
        run_case.fail(f"case {number} of {len(cases)}: {why}", kind)
    if failed:
        width = spec["revealed_chars"]
        described = [{"case": number, "why": why, "input": case["input"][:width],
                      "expected": case["output"][:width],
                      "got": None if got is None else got[:width]}
                     for number, why, case, got, _ in failed[:spec["revealed_cases"]]]
        run_case.fail(json.dumps({"failed": len(failed), "run": run, "total": len(cases),
                                  "cases": described}, ensure_ascii=False), failed[0][4])


JUDGE_HELPERS = "from __future__ import annotations\n\n" + "\n\n".join(
    inspect.getsource(helper) for helper in
    (output_lines, numbers_close, outputs_differ, case_outcome, judge_cases))


# --- the candidate's side: runs the program once per case, in a fork -------------------------


def _run_program_case(program, path, stdin, timeout_s, limit):
    """In the candidate's process: run `program` with `stdin` as its input, in a fork, until it
    exits (and its output ends) or `timeout_s`; ("exited" | "timeout" | "output", its stdout,
    its exit status). Only the judge decides what the output is worth."""
    import contextlib
    import os
    import select
    import signal
    import time

    data = stdin.encode("utf-8")
    input_fd = os.memfd_create("stdin")
    view = memoryview(data)
    while view:
        view = view[os.write(input_fd, view):]
    os.lseek(input_fd, 0, os.SEEK_SET)
    out_r, out_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _program_main(program, path, input_fd, out_w)
    os.close(input_fd)
    os.close(out_w)
    exit_fd = os.pidfd_open(pid)
    output, ended, exited_at, watched = bytearray(), "exited", None, [out_r, exit_fd]
    while watched:
        now = time.monotonic()
        # After the exit, a moment for what it wrote (a child of its own may hold the pipe).
        until = started + timeout_s if exited_at is None else min(started + timeout_s,
                                                                  exited_at + 0.1)
        if now >= until:
            ended = "timeout" if exited_at is None else ended
            break
        for fd in select.select(watched, [], [], until - now)[0]:
            if fd == exit_fd:
                exited_at = time.monotonic()
                watched.remove(exit_fd)
                continue
            chunk = os.read(out_r, 65536)
            if not chunk:
                watched.remove(out_r)
            output += chunk
        if len(output) > limit:
            ended = "output"
            break
        if exited_at is not None and out_r not in watched:
            break
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    os.close(out_r)
    os.close(exit_fd)
    code = os.waitstatus_to_exitcode(status)
    return (ended, bytes(output) if ended == "exited" else b"", code)


def _program_main(program, path, input_fd, output_fd):
    """In the fork: become `python solution.py < input > output` and exit with its status."""
    import atexit
    import builtins
    import io
    import os
    import sys
    import types

    # Bound now: the program may rebind os._exit; the old streams stay referenced, unflushed.
    leave, status, _kept = os._exit, 1, (sys.stdin, sys.stdout)
    try:
        os.dup2(input_fd, 0)
        os.dup2(output_fd, 1)
        os.closerange(3, 1 << 16)  # nothing of the candidate's channel to the judge
        atexit._clear()
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        main = types.ModuleType("__main__")
        main.__file__, main.__builtins__ = path, builtins
        sys.modules["__main__"], sys.argv = main, [path]
        try:
            exec(compile(program, path, "exec"), main.__dict__)
            status = 0
        except SystemExit as request:
            if request.code is None or isinstance(request.code, int):
                status = (request.code or 0) & 0xFF
            else:
                print(request.code, file=sys.stderr)
                status = 1
        except BaseException as error:  # noqa: BLE001 - the program's own end
            # Its traceback from the program's first line on, not from this function's.
            error = error.with_traceback(error.__traceback__ and error.__traceback__.tb_next)
            sys.excepthook(type(error), error, error.__traceback__)
            status = 1
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - as CPython when stdout cannot be flushed
                status = status or 120
    finally:
        leave(status)


CANDIDATE_RUNNER = "\n\n".join(inspect.getsource(helper) for helper in
                               (_run_program_case, _program_main))
_CANDIDATE_TAIL = """
_PROGRAM = {program!r}
_PATH = __import__("os").path.join(__import__("os").getcwd(), "solution.py")
try:  # so that a traceback shows the program's own lines
    with open(_PATH, "w", encoding="utf-8") as _file:
        _file.write(_PROGRAM)
except (OSError, UnicodeError):
    pass


def {name}(stdin, timeout_s, limit):
    return _run_program_case(_PROGRAM, _PATH, stdin, timeout_s, limit)
"""


# --- the kind ---------------------------------------------------------------------------------


def build_program(task: ProgramTask, completion: str, *, reveal: bool = False) -> Program:
    """The judged program for `completion` on the task's `tests`. `reveal` (run_public_tests
    only) has the judge run every case and describe each failed one, its expected output too."""
    spec = {"cases": parse_cases(task.tests), "compare": compare_rule(task.compare),
            "case_timeout_s": task.case_timeout_s, "grace_s": CASE_GRACE_S,
            "output_limit": OUTPUT_LIMIT, "reveal": reveal,
            "revealed_cases": REVEALED_CASES, "revealed_chars": REVEALED_CHARS}
    judge = json.dumps({"prompt": JUDGE_HELPERS, "entry_point": RUN_CASE,
                        "tests": f"judge_cases({RUN_CASE}, {json.dumps(spec)!r})\n"})
    source = CANDIDATE_RUNNER + "\n" + _CANDIDATE_TAIL.format(program=completion, name=RUN_CASE)
    image = task.runtime.image if task.runtime else None
    return Program(source=source, judge=judge, group=task.id, image=image)


KIND = TaskKind(scorer_version=SCORER_VERSION, build_program=build_program,
                completes_prompt=False)
