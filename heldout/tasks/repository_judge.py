"""The repository kind's judged program: a test run in a fresh sandbox, and a verdict taken
outside it.

The *candidate* process (the program's own user) writes the tree the host prepared (the
repository at its base, the completion's diff as filtered, the hidden tests, the sentinels) and
runs pytest on it with heldout's report plugin; it answers with how the run ended, pytest's exit
status and the report. Everything in that process, and in pytest's, is within the completion's
reach: its code is imported by the tests.

The *judge* process (another user, out of that reach) holds the tests the verdict reads and the
sentinels' names, and decides from the answer with `judge_repository`, sent as the judge's
trusted prompt. A run counts only when its three accounts agree: the report has every expected
test exactly once, the must-fail sentinel failed and the must-pass one passed (both in every
file the verdict reads, in the same process as the real tests, named with a nonce drawn for
this run), and pytest's exit status is 1, as a run with one failed test must end. Anything else
is a failure with its reason, never a pass.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

from heldout.sandbox.protocol import ExecResult
from heldout.tasks.diff_filter import Dropped

RUN_TESTS = "run_tests"  # the candidate's function the judge calls
# A reason on stderr's last line is read from a tail of 4 KiB: the judge keeps it well below.
REASON_CHARS = 3000
REPORT_LIMIT = 8 * 1024 * 1024  # bytes of report the candidate sends at most

# The test interpreter's start (`python3 -S -s -P -c START FD PYTEST-ARGS...`): no `site`, so no
# .pth file, sitecustomize or usercustomize is run, and no user site; pytest and what it imports
# come from the interpreter's own folders before the repository is on sys.path at all; then the
# repository goes after the standard library and before the installed packages (its own code
# must win over an installed copy of itself). The report is a line per test phase written to
# the pipe FD: no path to it exists in the test process's environment or file system.
START = """
import os, sys
def _start():
    import json, site
    report = os.fdopen(int(sys.argv.pop(1)), "w", encoding="utf-8")
    sys.dont_write_bytecode = True
    installed = [folder for folder in site.getsitepackages() if os.path.isdir(folder)]
    sys.path[:] = [folder for folder in sys.path if folder] + installed
    import pytest
    import _pytest.config, _pytest.main, _pytest.runner, _pytest.terminal, pluggy
    class Report:
        def _write(self, record):
            report.write(json.dumps(record) + "\\n")
            report.flush()
        def pytest_runtest_logreport(self, report):
            self._write({"test": report.nodeid, "when": report.when,
                         "outcome": report.outcome, "xfail": hasattr(report, "wasxfail")})
        def pytest_collectreport(self, report):
            if report.failed:
                self._write({"collect": report.nodeid, "outcome": "failed"})
    sys.path.insert(len(sys.path) - len(installed), os.getcwd())
    sys.argv[0] = "pytest"
    return pytest.main(sys.argv[1:], plugins=[Report()])
raise SystemExit(_start())
"""


# --- the judge's side: trusted code, run in the judge --------------------------------------


def test_outcomes(report):
    """{node id: "passed" | "failed" | "skipped" | "xfailed"} from the report's lines, and the
    problems that make the report untrustworthy (a line that is no record, a test reported
    twice in one phase, a file that did not collect)."""
    import json

    phases, problems, outcomes = {}, [], {}
    for number, line in enumerate(report.splitlines(), start=1):
        try:
            record = json.loads(line)
        except ValueError:
            problems.append(f"report line {number} is not JSON")
            continue
        if type(record) is not dict:
            problems.append(f"report line {number} is not a record")
            continue
        if "collect" in record:
            problems.append(f"{str(record['collect'])[:120]} did not collect")
            continue
        test, when, outcome = record.get("test"), record.get("when"), record.get("outcome")
        if not (type(test) is str and when in ("setup", "call", "teardown")
                and outcome in ("passed", "failed", "skipped")):
            problems.append(f"report line {number} is not a test's phase")
            continue
        if (test, when) in phases:
            problems.append(f"{test[:120]} is reported twice")
            continue
        phases[test, when] = (outcome, record.get("xfail") is True)
    for (test, when), (outcome, xfail) in phases.items():
        current = outcomes.get(test, "passed")
        if outcome == "failed" or current == "failed":
            outcomes[test] = "failed"
        elif outcome == "skipped" or current in ("skipped", "xfailed"):
            outcomes[test] = "xfailed" if xfail or current == "xfailed" else "skipped"
        elif when == "call" or test in outcomes:
            outcomes[test] = current
    # Passed only with a passed call phase: setup alone (the call never reported) is not a run.
    for test in list(outcomes):
        if outcomes[test] == "passed" and (test, "call") not in phases:
            outcomes[test] = "skipped"
    return outcomes, problems


def untrustworthy(outcomes, problems, code, spec):
    """Why the run's accounts disagree (its verdict cannot be read), or None. When every
    expected test passed, every check (a copy of a real test that must fail, or a sentinel)
    must have run and failed in one of its cases at least: a run where one passed reported
    outcomes that are not the tests' own. (With a real test failed, the verdict is a failure
    whatever the checks say; a wrong solution may pass a copy honestly.)"""
    if problems:
        return f"the report cannot be trusted: {problems[0]}"
    expected = spec["fail_to_pass"] + spec["pass_to_pass"]
    checked = all(outcomes.get(test) == "passed" for test in expected)
    for check in spec["checks"] if checked else ():
        cases = [outcome for test, outcome in outcomes.items()
                 if test == check or test.startswith(check + "[")]
        if not cases:
            return "the report cannot be trusted: one of heldout's checks is missing"
        if "failed" not in cases:
            return ("the report cannot be trusted: a copy of a hidden test that must fail "
                    f"was {cases[0]}, so the outcomes are not the tests' own")
    if code != 1:
        return (f"pytest's exit status {code} disagrees with its report (a run with a failed "
                "test ends with 1)")
    return None


def judge_repository(run_tests, spec_json):
    """Run the tests through the candidate (`run_tests`, the judge's proxy) and end with the
    verdict: a return is a pass. With `reveal` (validation), every expected test's outcome is
    the reason, as JSON."""
    import json

    spec = json.loads(spec_json)
    dropped = spec["dropped_note"]
    try:
        answer = run_tests()
    except Exception as error:  # noqa: BLE001 - the candidate's runner raised
        run_tests.fail(f"the test run could not start: {type(error).__name__}{dropped}")
    shaped = (type(answer) is tuple and len(answer) == 3 and type(answer[0]) is str
              and (answer[1] is None or type(answer[1]) is int) and type(answer[2]) is str)
    if not shaped:
        run_tests.fail("the candidate's answer is not a test run" + dropped)
    ended, code, report = answer
    if ended == "timeout":
        run_tests.fail("the tests did not end in time" + dropped, "timeout")
    if ended != "exited":
        run_tests.fail(f"the test run did not start: {ended[:200]}{dropped}")
    outcomes, problems = test_outcomes(report)
    distrust = untrustworthy(outcomes, problems, code, spec)
    expected = spec["fail_to_pass"] + spec["pass_to_pass"]
    if spec["reveal"]:
        # A letter per expected test, in their order: thousands of tests fit in the reason.
        letters = "".join({"passed": "p", "failed": "f", "skipped": "s", "xfailed": "x"}.get(
            outcomes.get(test), "m") for test in expected)
        run_tests.fail(json.dumps({"distrust": distrust, "exit_status": code,
                                   "outcomes": letters[:spec["reason_chars"]]}))
    if distrust:
        run_tests.fail(distrust + dropped)
    not_passed = [(test, outcomes.get(test, "missing")) for test in expected
                  if outcomes.get(test) != "passed"]
    if not_passed:
        listed = ", ".join(f"{spec['names'].get(test, test)} ({outcome})"
                           for test, outcome in not_passed[:3])
        more = f" and {len(not_passed) - 3} more" if len(not_passed) > 3 else ""
        run_tests.fail(f"{len(not_passed)} of {len(expected)} tests did not pass: "
                       f"{listed}{more}"[:spec["reason_chars"]] + dropped)
    if dropped:
        run_tests.succeed("the tests passed" + dropped)


JUDGE_HELPERS = "from __future__ import annotations\n\n" + "\n\n".join(
    inspect.getsource(helper) for helper in (test_outcomes, untrustworthy, judge_repository))


OUTCOMES = {"p": "passed", "f": "failed", "s": "skipped", "x": "xfailed", "m": "missing"}


def revealed(result: ExecResult, expected: list[str]) -> dict[str, Any] | None:
    """The judge's account of a revealing run: {"distrust": why or None, "outcomes": {test:
    outcome}} for the `expected` tests, or None when the run gave no account."""
    reason = result.stderr_tail.strip().rpartition("\n")[2].removeprefix("[heldout judge] ")
    try:
        account = json.loads(reason)
        letters = account["outcomes"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(letters, str) or len(letters) != len(expected):
        return None
    return {"distrust": account.get("distrust"),
            "outcomes": {test: OUTCOMES.get(letter, "missing")
                         for test, letter in zip(expected, letters, strict=True)}}


def dropped_note(dropped: list[Dropped]) -> str:
    """What the reason adds about the changes the judge did not apply."""
    if not dropped:
        return ""
    listed = "; ".join(f"{item.path} ({item.why})" for item in dropped[:3])
    more = f"; and {len(dropped) - 3} more" if len(dropped) > 3 else ""
    return f"; {len(dropped)} change(s) not applied: {listed}{more}"[:600]


# --- the candidate's side: writes the tree and runs pytest on it ---------------------------


def _run_repository_tests(tree, argv, report_limit):
    """In the candidate's process: write `tree` under ./repo, run `argv` (the interpreter's
    start, then pytest's arguments) in ./repo with the report's pipe, and answer ("exited" |
    "timeout" | why it did not start, pytest's exit status, the report's text). The pipe is
    read until pytest exits, then what is in it: a process the tests left holding it is not
    waited on. Only the judge decides what the report is worth."""
    import os
    import select
    import subprocess

    here = os.getcwd()
    repo = os.path.join(here, "repo")
    for path, text in tree.items():
        target = os.path.join(repo, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as file:
            file.write(text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": here,
           "TMPDIR": here, "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    reading, writing = os.pipe()
    try:
        process = subprocess.Popen([*argv[:-1], str(writing), *argv[-1]], cwd=repo, env=env,
                                   stdin=subprocess.DEVNULL, pass_fds=(writing,))
    except OSError as error:
        return (f"{type(error).__name__}: {error}", None, "")
    finally:
        os.close(writing)
    os.set_blocking(reading, False)
    report = bytearray()
    while True:
        ready = select.select([reading], [], [], 0.05)[0]
        exited = not ready and process.poll() is not None
        try:
            data = os.read(reading, 65536)
        except BlockingIOError:
            data = None
        if data:
            report += data[:max(report_limit - len(report), 0)]
        elif data == b"" or exited:
            break
    os.close(reading)
    return ("exited", process.wait(), report.decode("utf-8", "replace"))


CANDIDATE_RUNNER = inspect.getsource(_run_repository_tests)
CANDIDATE_TAIL = """
_TREE = {tree!r}
_ARGV = {argv!r}


def {name}():
    return _run_repository_tests(_TREE, _ARGV, {limit})
"""
