"""Every judged program starts from nothing: no state, memory or verdict crosses from one
program to the next (docs/sandbox.md, "A world of its own").

A writer program plants a secret in every channel it can (System V shared memory, message
queues and semaphores, POSIX message queues, the user, session and persistent keyrings, a file
in every folder it may write, its own memory) and reads each plant back; a reader program,
later, looks in every channel. The writer's hidden test quotes a second secret in its failure
message, so the verdict the runner held is a plant too. The reader must find neither, on one
sandbox (the same worker or container), across sandboxes, and from another process.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from heldout.episodes.judge import score, score_many
from heldout.sandbox.config import make_sandbox
from heldout.tasks.record import Task
from tests.conftest import REPO

PROBE = (Path(__file__).parents[1] / "data" / "world_probe.py").read_text(encoding="utf-8")
PREFIX = "HELDOUT-" + "PLANT-"
LIMITS = {"timeout_s": 30.0, "memory_mb": 512}


def probe_task(hidden: str) -> Task:
    return Task(id="world/probe", group="world",
                prompt='def probe():\n    """Return the word."""\n',
                entry_point="probe", reference=f"    return {hidden!r}\n",
                tests=(f"def check(candidate):\n    assert candidate() == {hidden!r}, "
                       f"'want ' + {hidden!r}\n\ncheck(probe)\n"))


def probe_completion(mode: str, secret: str = "") -> str:
    return f"    return 'wrong'\n\nMODE = {mode!r}\nSECRET = {secret!r}\n{PROBE}"


def report(result) -> dict:
    lines = [line for line in result.stdout_tail.splitlines() if line.startswith("{")]
    assert lines, f"the probe printed nothing: {result.stderr_tail[-800:]!r}"
    return json.loads(lines[-1])


def plant() -> tuple[str, str]:
    return PREFIX + secrets.token_hex(16), PREFIX + secrets.token_hex(16)


def writer_shortfalls(written: dict, secret: str) -> list[str]:
    """Each channel the writer planted in must show its plant to the writer itself (the
    reader's search works there), and its own memory must hold the secret."""
    problems = [f"{channel}: planted but not read back" for channel in written["planted"]
                if secret not in written["found"].get(channel, [])]
    if secret not in written["found"].get("memory", []):
        problems.append("the memory search does not find the writer's own secret")
    return problems


def leaks(read: dict, *planted: str) -> dict:
    return {channel: tokens for channel, tokens in read["found"].items()
            if set(tokens) & set(planted) or not all(t.startswith(PREFIX) for t in tokens)}


@pytest.fixture(params=("subprocess", "docker"))
def one_worker(request):
    """A sandbox of one worker, so that the writer and the reader share it: the subprocess
    backend's one worker process, or the docker backend's one container per task."""
    # Only this parameter's backend: skip, saying why, where it is missing.
    request.getfixturevalue(f"{request.param}_sandbox")
    with make_sandbox(request.param, workers=1) as sandbox:
        yield sandbox


def test_no_channel_carries_a_plant_to_the_next_program_on_one_sandbox(one_worker):
    secret, hidden = plant()
    task = probe_task(hidden)
    written, read = score_many([(task, probe_completion("write", secret)),
                                (task, probe_completion("read"))], one_worker, **LIMITS)
    assert not written.passed and hidden in written.stderr_tail, "the verdict quotes the test"
    written_report, read_report = report(written), report(read)
    assert writer_shortfalls(written_report, secret) == []
    assert leaks(read_report, secret, hidden) == {}, read_report
    # The shared-state calls are refused, not merely emptied.
    for channel in ("sysv_shm", "sysv_msg", "sysv_sem", "posix_mq", "keyring_user",
                    "keyring_session"):
        assert channel not in written_report["planted"], written_report
    # The only folder a program may write is its own work directory, which goes with it.
    folders = [p for p in written_report["planted"] if p.startswith("file:")]
    assert len(folders) == 1 and "/program-" in folders[0], written_report["planted"]


def test_the_reader_in_a_new_sandbox_and_another_process_finds_nothing(subprocess_sandbox):
    del subprocess_sandbox
    secret, hidden = plant()
    with make_sandbox("subprocess", workers=1) as sandbox:
        written = report(score(probe_task(hidden), probe_completion("write", secret), sandbox,
                               **LIMITS))
    assert writer_shortfalls(written, secret) == []
    # Another heldout process leases the same program user (the first free one) again.
    reader = (
        "import json, sys\n"
        "from heldout.episodes.judge import score\n"
        "from heldout.sandbox.config import make_sandbox\n"
        "from tests.sandbox.test_fresh_world import LIMITS, probe_completion, probe_task\n"
        "with make_sandbox('subprocess', workers=1) as sandbox:\n"
        "    result = score(probe_task(sys.argv[1]), probe_completion('read'), sandbox,"
        " **LIMITS)\n"
        "print(result.stdout_tail)\n"
    )
    done = subprocess.run([sys.executable, "-c", reader, hidden], cwd=REPO, text=True,
                          capture_output=True, timeout=120, check=True)
    line = [text for text in done.stdout.splitlines() if text.startswith("{")][-1]
    assert leaks(json.loads(line), secret, hidden) == {}, line


CALLS_TASK = Task(
    id="world/calls", group="world",
    prompt='def sign(x):\n    """Return -1, 0 or 1, the sign of x."""\n',
    entry_point="sign", reference="    return (x > 0) - (x < 0)\n",
    tests=("def check(candidate):\n"
           "    assert candidate(5) == 1\n"
           "    for x in (-3, 0, 7):\n"
           "        assert candidate(x) == (x > 0) - (x < 0), x\n"
           "    assert candidate(-1) == -1\n\ncheck(sign)\n"))


def calls_seen(completion: str, sandbox) -> list[str]:
    body = ("    print('called with', x, flush=True)\n" + completion)
    result = score(CALLS_TASK, body, sandbox, timeout_s=10, memory_mb=256)
    return [line for line in result.stdout_tail.splitlines() if line.startswith("called")]


@pytest.mark.parametrize("answer", ["    return 0\n", "    return 1 / 0\n",
                                    "    return 'no'\n", "    return -x\n"])
def test_the_judge_makes_every_call_whatever_the_answers(sandbox, answer):
    """The oracle: a candidate called again knew its last answer was right. Now the calls a
    wrong candidate receives are the right one's, in the same order."""
    right = calls_seen("    return (x > 0) - (x < 0)\n", sandbox)
    assert right == ["called with 5", "called with -3", "called with 0", "called with 7",
                     "called with -1"]
    assert calls_seen(answer, sandbox) == right
    wrong = score(CALLS_TASK, answer, sandbox, timeout_s=10, memory_mb=256)
    assert not wrong.passed and "tests.py line" in wrong.stderr_tail


def test_the_first_failed_assert_is_the_reason(sandbox):
    result = score(CALLS_TASK, "    return 1 if x != 0 else 5\n", sandbox, timeout_s=10,
                   memory_mb=256)
    assert not result.passed and result.stderr_tail.rstrip().endswith(
        "AssertionError at tests.py line 4: -3")


def test_public_test_feedback_shows_nothing_a_hidden_run_left(one_worker):
    """run_public_tests reports what the program printed: a hidden-test run's plants must not
    reach that observation, on the worker (or container) that ran both."""
    from heldout.episodes.budgets import ExecLimits
    from heldout.episodes.environments import make_environment

    secret, hidden = plant()
    task = probe_task(hidden).model_copy(update={"public_tests": "assert probe() == 'public'\n"})
    written = score(task, probe_completion("write", secret), one_worker, **LIMITS)
    assert writer_shortfalls(report(written), secret) == []
    environment = make_environment(task, one_worker, ExecLimits(**LIMITS), "{prompt}",
                                   ("run_public_tests", "submit"))
    observation = environment.call("run_public_tests", {"code": probe_completion("read")})
    assert '"planted": []' in observation.text, observation.text  # the reader's own line
    assert secret not in observation.text and hidden not in observation.text


def test_an_assert_the_tests_guard_themselves_is_left_to_them(sandbox):
    """A test that catches an assert's failure decides for itself (the public tests' feedback
    records each failure and goes on, then fails with the list)."""
    guarded = CALLS_TASK.model_copy(update={"tests": (
        "def check(candidate):\n"
        "    try:\n"
        "        assert candidate(5) == 1\n"
        "    except AssertionError:\n"
        "        raise ValueError('five is positive')\n\ncheck(sign)\n")})
    result = score(guarded, "    return 0\n", sandbox, timeout_s=10, memory_mb=256)
    assert not result.passed and result.stderr_tail.rstrip().endswith(
        "ValueError at tests.py line 5: five is positive")
    assert score(guarded, CALLS_TASK.reference, sandbox, timeout_s=10, memory_mb=256).passed
