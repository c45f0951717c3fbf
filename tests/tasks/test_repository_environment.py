"""The repository kind's agent environment: the tools, a tree with no future in it, commands in
a fresh sandbox, public tests through the judge, and whole episodes judged by the hidden tests."""

from __future__ import annotations

import pytest

from heldout.agents.canaries import BlindAgent, OracleAgent
from heldout.episodes.budgets import ExecLimits
from heldout.episodes.environments import make_environment
from heldout.episodes.episode import plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.tasks.patches import MAX_DIFF_BYTES, apply_patch, parse_patch
from tests.repository_fixtures import FIXED_OPS, HIDDEN_TEST, calc_task, require_test_python

TASK = calc_task()
LIMITS = ExecLimits(timeout_s=15.0, memory_mb=1024)


@pytest.fixture
def environment(subprocess_sandbox):
    require_test_python("subprocess")
    return make_environment(TASK, subprocess_sandbox, LIMITS, "{prompt}",
                            ("run_public_tests", "submit"))


def test_the_tools_and_the_opening(environment):
    assert [tool.name for tool in environment.tools] == [
        "list_files", "read_file", "write_file", "edit", "run", "run_public_tests", "submit"]
    assert environment.opening() == TASK.prompt
    assert environment.last_program is None


def test_the_tree_holds_the_base_and_nothing_of_the_verdict(environment):
    listed = environment.call("list_files", {"path": ""}).text.splitlines()
    assert listed == sorted(TASK.files)
    assert "tests/test_clamp.py" not in listed  # the hidden tests are not there
    assert environment.call("read_file", {"path": "tests/test_clamp.py"}).data == {
        "error": "no such file"}
    ran = environment.call("run", {"command": "ls -a; ls -a ..; cat tests/test_clamp.py; "
                                              "git log -1 || echo no-history"})
    assert ".git" not in ran.text.split() and "no-history" in ran.text
    assert "test_clamp_above" not in ran.text and HIDDEN_TEST not in ran.text
    assert "return high" not in ran.text  # nor the reference


def test_read_write_and_edit(environment):
    assert environment.call("read_file", {"path": "calc/ops.py"}).text == TASK.files["calc/ops.py"]
    edited = environment.call("edit", {"path": "calc/ops.py", "old": "return low",
                                       "new": "return high"})
    assert edited.data == {"error": "not unique", "occurrences": 2}
    fixed = environment.call("edit", {"path": "calc/ops.py",
                                      "old": "return low\n    return value",
                                      "new": "return high\n    return value"})
    assert fixed.data == {"edited": "calc/ops.py"}
    assert environment.call("write_file", {"path": "../escape.py", "content": "x"}).data == {
        "error": "a path outside the repository"}
    assert environment.call("write_file", {"path": "calc/extra.py", "content": "X = 1\n"}).data \
        == {"written": "calc/extra.py"}
    diff = environment.last_program
    assert apply_patch(TASK.files, parse_patch(diff)) == {
        **TASK.files, "calc/ops.py": FIXED_OPS, "calc/extra.py": "X = 1\n"}
    assert environment.call("read_file", {"path": "calc/ops.py"}).text == FIXED_OPS
    bad = environment.call("read_file", {"path": "calc/ops.py", "extra": "1"})
    assert bad.data == {"error": "bad arguments"}


def test_run_sees_the_edits_and_keeps_nothing_it_writes(environment):
    environment.call("write_file", {"path": "calc/ops.py", "content": FIXED_OPS})
    ran = environment.call("run", {"command": "python3 -c 'from calc import clamp; "
                                              "print(clamp(5, 0, 3))'; echo x > made.txt; "
                                              "exit 7"})
    assert ran.data == {"exit": 7, "changed": 1}
    assert ran.text.startswith("[exit status 7]\n3\n") and "made.txt" in ran.text
    assert "made.txt" not in environment.call("list_files", {"path": ""}).text
    slow = environment.call("run", {"command": "sleep 60"})
    assert slow.data["exit"] is None and slow.text.startswith("[timed out]")


def test_public_tests_run_through_the_judge(environment):
    ran = environment.call("run_public_tests", {})
    assert ran.data == {"passed": True, "failed": []}
    environment.call("write_file", {"path": "calc/ops.py",
                                    "content": TASK.files["calc/ops.py"].replace(
                                        "return value", "return value + 1")})
    broken = environment.call("run_public_tests", {})
    assert broken.data == {"passed": False, "failed": ["tests/test_ops.py::test_clamp_inside"]}
    assert "test_clamp_inside: failed" in broken.text
    # heldout's checks are the judge's business, not the agent's: kept out of what it reads
    assert "::test_" not in broken.text.replace("tests/test_ops.py::test_clamp_inside", "")


def test_submit_ends_with_the_diff_or_the_diff_given(environment):
    environment.call("write_file", {"path": "calc/ops.py", "content": FIXED_OPS})
    submitted = environment.call("submit", {})
    assert submitted.submitted == TASK.reference
    given = environment.call("submit", {"code": "diff --git a/x b/x\n"})
    assert given.submitted == "diff --git a/x b/x\n"


def test_a_diff_over_1_mib_is_not_submitted_and_the_agent_is_told_in_a_line(environment):
    environment.call("write_file", {"path": "data.txt", "content": "0123456789\n" * 100_000})
    refused = environment.call("submit", {})
    assert refused.submitted is None and refused.data["error"] == "diff too large"
    assert refused.text == ("The diff is 1,200,104 bytes; heldout reads a diff of at most "
                            "1,048,576 bytes (1 MiB). Not submitted: make a smaller change.")
    given = environment.call("submit", {"code": "+" * (MAX_DIFF_BYTES + 1)})
    assert given.submitted is None and given.text.startswith("The diff given is 1,048,577 bytes;")
    environment.call("write_file", {"path": "data.txt", "content": "0123456789\n" * 80_000})
    assert environment.call("submit", {}).submitted == environment.diff()  # 960,104 bytes


@pytest.mark.parametrize(("agent", "passed"), [(OracleAgent(), True), (BlindAgent(), False)])
def test_whole_episodes_are_judged_by_the_hidden_tests(subprocess_sandbox, agent, passed):
    require_test_python("subprocess")
    harness = Harness(n=1, timeout_s=20.0, scorer_version="repository/2")
    episode = plan_episodes([TASK], harness)[0]
    row = run_episode(agent, subprocess_sandbox, harness, episode)
    assert (row["passed"], row["status"]) == (passed, "ok")  # ok: it ran to a verdict
    assert row["public_passed"] is True  # the public test passes at the base and after the fix
