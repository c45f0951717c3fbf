"""The step protocol of the `command` and `python` agents: real processes and generators through
the real episode loop, every way an agent can misbehave, and resume after a real kill -9."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from heldout.agents.protocol import AgentContext
from heldout.agents.registry import make_agent
from heldout.episodes.budgets import EpisodeBudgets
from heldout.episodes.environments import make_environment
from heldout.episodes.episode import Episode, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.loop import Outcome, run_loop
from heldout.episodes.rows import TIMING_COLUMNS
from heldout.errors import AgentError, ParamsError
from heldout.sandbox.config import SandboxConfig
from heldout.tasks.record import Task
from tests.conftest import REPO, configure_small_project, copy_project

STEP_AGENT = REPO / "examples" / "step_agent.py"
CONTEXT = AgentContext(template="{prompt}", temperature=0.8, top_p=0.95, max_tokens=512,
                       max_turns=4, timeout_s=30.0, project_root=str(REPO))
HARNESS = Harness(max_turns=4, n=1, timeout_s=5, agent_timeout_s=30, retries=0)
# The docstring names no expression, so the example drafts `pass`, fails the public test,
# memorises it, passes it, and submits: the hidden `add(2, 2) == 4` still fails.
ADD = Task(id="toy/add", group="toy/add",
           prompt='def add(a, b):\n    """Return the sum of a and b."""\n', entry_point="add",
           tests="assert add(1, 2) == 3\nassert add(2, 2) == 4\n",
           public_tests="assert add(1, 2) == 3\n")
# Here the docstring is the expression: the draft passes the public test and is submitted.
EASY = ADD.model_copy(update={"id": "toy/easy", "group": "toy/easy",
                              "prompt": 'def add(a, b):\n    """Return a + b."""\n'})


@pytest.fixture(scope="module")
def sandbox():
    opened = SandboxConfig().open()
    yield opened
    opened.close()


class Recording:
    """A step agent whose sessions the test can inspect after the loop closed them."""

    def __init__(self, agent):
        self.agent, self.sessions = agent, []

    def begin(self, *args):
        session = self.agent.begin(*args)
        self.sessions.append(session)
        return session


def command_agent(argv: list[str], **settings) -> Recording:
    return Recording(make_agent("steps", {"agent": "command", "protocol": "steps",
                                          "command": argv, **settings}, CONTEXT))


def loop(agent, sandbox, task: Task = ADD, harness: Harness = HARNESS) -> Outcome:
    budgets = EpisodeBudgets.start(harness, task)
    environment = make_environment(task, sandbox, budgets.execution, harness.template,
                                   harness.tools)
    return run_loop(agent, environment, budgets, task, 0, 7)


def state(pid: int) -> str | None:
    """The /proc state letter of `pid` (Z: a zombie), or None when no such process exists."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[2]) == pgid and fields[0] not in "ZX":
                members.append(int(entry.name))
    return members


def dead(pid: int, within_s: float = 3.0) -> bool:
    """Whether `pid` is gone or a zombie within `within_s` (SIGKILL is delivered, not awaited:
    a process of the group may take a moment to die)."""
    until = time.monotonic() + within_s
    while state(pid) not in (None, "Z"):
        if time.monotonic() > until:
            return False
        time.sleep(0.01)
    return True


def assert_nothing_left(agent: Recording) -> None:
    for session in agent.sessions:
        with pytest.raises(ProcessLookupError):  # the agent itself is reaped: not a zombie
            os.kill(session.pid, 0)
        until = time.monotonic() + 3
        while group_members(session.pid) and time.monotonic() < until:
            time.sleep(0.01)
        assert group_members(session.pid) == []


PRELUDE = """\
import json, os, subprocess, sys, time

def read():
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)

def send(action):
    sys.stdout.write(json.dumps(action) + "\\n")
    sys.stdout.flush()

def submit(code, message=""):
    send({"tool": "submit", "arguments": {"code": code}, "message": message})
"""


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "agent.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return [sys.executable, str(path)]


# --- the example agents, in both forms ------------------------------------------------------


def test_command_step_agent_tests_revises_and_submits(sandbox):
    completion = make_agent("c", {"agent": "command", "command": [sys.executable, "x.py"]},
                            CONTEXT)
    assert not hasattr(completion, "begin")  # the loop takes it as single-shot, as before
    agent = command_agent([sys.executable, str(STEP_AGENT)])
    outcome = loop(agent, sandbox)
    steps = outcome.trajectory()
    assert outcome.end_reason == "submitted", outcome.error
    assert [s["tool"] for s in steps] == ["run_public_tests", "run_public_tests", "submit"]
    assert [s["turn"] for s in steps] == [1, 2, 3]
    assert steps[0]["arguments"]["code"] == "    pass\n"
    assert steps[0]["data"]["passed"] is False
    assert "assert add(1, 2) == 3" in steps[0]["observation"]
    revised = steps[1]["arguments"]["code"]
    assert "if (a, b) == (1, 2):\n        return 3\n" in revised
    assert steps[1]["data"]["passed"] is True
    assert steps[1]["message"] == "revised: the public examples"
    assert outcome.program == revised == steps[2]["arguments"]["code"]
    # It exited by itself on {"type": "end"} (exit 0), before the group was killed.
    assert agent.sessions[0].process.returncode == 0
    assert_nothing_left(agent)

    easy = loop(agent, sandbox, EASY)
    assert [s["tool"] for s in easy.trajectory()] == ["run_public_tests", "submit"]
    assert easy.program == "    return a + b\n"


def test_a_step_episode_is_a_row_the_memorised_revision_passes_only_the_public_tests(sandbox):
    agent = command_agent([sys.executable, str(STEP_AGENT)])
    row = run_episode(agent, sandbox, HARNESS, Episode(ADD, 0, 7))
    assert (row["status"], row["end_reason"], row["turns"], row["tool_calls"]) == (
        "ok", "submitted", 3, 3)
    assert (row["public_passed"], row["passed"]) == (True, False)
    assert "AssertionError at tests.py line 2" in row["error"]  # the hidden add(2, 2)
    easy = run_episode(agent, sandbox, HARNESS, Episode(EASY, 0, 7))
    assert (easy["passed"], easy["turns"]) == (True, 2)


def test_python_generator_agent_has_the_same_trajectory(sandbox):
    command = loop(command_agent([sys.executable, str(STEP_AGENT)]), sandbox)
    generator = make_agent("p", {"agent": "python", "protocol": "steps",
                                 "function": "examples.python_step_agent:agent"}, CONTEXT)
    assert not hasattr(generator, "complete")
    outcome = loop(generator, sandbox)
    assert outcome.end_reason == "submitted", outcome.error
    assert outcome.trajectory() == command.trajectory()
    assert len(outcome.steps) == 3
    lazy = make_agent("p", {"agent": "python", "protocol": "steps", "options": {"revise": False},
                            "function": "examples.python_step_agent:agent"}, CONTEXT)
    assert [s["tool"] for s in loop(lazy, sandbox).trajectory()] == ["run_public_tests", "submit"]


def test_the_protocol_setting_must_match_the_function():
    with pytest.raises(ParamsError, match="is a generator function: set protocol: steps"):
        make_agent("p", {"agent": "python", "function": "examples.python_step_agent:agent"},
                   CONTEXT)
    with pytest.raises(ParamsError, match="protocol: steps needs a generator function"):
        make_agent("p", {"agent": "python", "protocol": "steps",
                         "function": "tests.agents.test_agents:python_agent"}, CONTEXT)
    with pytest.raises(ParamsError, match="protocol"):
        make_agent("c", {"agent": "command", "protocol": "chat", "command": "x"}, CONTEXT)


def quitter(task):
    yield {"tool": "run_public_tests", "arguments": {"code": "    return 3\n"}}


def patient(task, suffix=""):
    first = yield  # a bare first yield asks for observation 1
    assert first["type"] == "observation" and first["turn"] == 1 and first["tool"] is None
    told = yield {"tool": "submit", "arguments": {"code": {1, 2}}}  # a set is not JSON
    yield {"tool": "submit", "arguments": {"code": f"    return a + b{suffix}\n"},
           "message": told["text"][:60]}


def test_a_generator_that_stops_without_submitting_is_an_error(sandbox):
    agent = make_agent("q", {"agent": "python", "protocol": "steps",
                             "function": "tests.agents.test_agent_steps:quitter"}, CONTEXT)
    outcome = loop(agent, sandbox)
    assert outcome.end_reason == "error" and outcome.turns == 1
    assert "the agent stopped without submitting (turn 2)" in outcome.error
    row = run_episode(agent, sandbox, HARNESS, Episode(ADD, 0, 7))
    assert (row["status"], row["passed"], row["completion"]) == ("error", False, "")


def test_a_generator_may_ask_for_observation_1_and_its_malformed_yield_is_a_problem(sandbox):
    agent = make_agent("q", {"agent": "python", "protocol": "steps", "options": {"suffix": " "},
                             "function": "tests.agents.test_agent_steps:patient"}, CONTEXT)
    outcome = loop(agent, sandbox, EASY)
    steps = outcome.trajectory()
    assert outcome.end_reason == "submitted", outcome.error
    assert steps[0]["data"] == {"error": "malformed call"}
    assert steps[1]["message"].startswith("an action must be JSON data")
    assert outcome.program == "    return a + b \n"


# --- misbehaving external agents: an outcome each, never a hang, nothing left behind -------


def test_malformed_lines_are_problems_the_agent_is_told_and_the_episode_goes_on(
    tmp_path, sandbox
):
    agent = command_agent(script(tmp_path, """
        read(); read()
        told = []
        for line in ["hello, I am thinking", "[1, 2]", '{"type": "thought"}',
                     '{"tool": "submit", "arguments": {"code": 3}, "extra": 1}']:
            sys.stdout.write(line + "\\n\\n")  # blank lines are skipped, not actions
            sys.stdout.flush()
            told.append(read()["text"])
        submit("    return a + b\\n", " | ".join(told))
        read()
    """))
    outcome = loop(agent, sandbox, EASY, HARNESS.model_copy(update={"max_turns": 5}))
    steps = outcome.trajectory()
    assert outcome.end_reason == "submitted" and outcome.turns == 5, outcome.error
    assert [s["data"] for s in steps[:4]] == [{"error": "malformed call"}] * 4
    assert "not a JSON action" in steps[0]["observation"]
    assert "stdout is for protocol messages only" in steps[0]["observation"]
    assert "an action is a JSON object, not list" in steps[1]["observation"]
    assert "of type 'thought'" in steps[2]["observation"]
    assert "unknown fields ['extra']" in steps[3]["observation"]
    assert steps[4]["message"].count("not a JSON action") == 1  # what the agent was told
    assert outcome.tool_calls == 5 and outcome.program == "    return a + b\n"
    assert_nothing_left(agent)


def test_an_agent_that_exits_mid_episode_is_an_error_with_its_stderr(tmp_path, sandbox):
    agent = command_agent(script(tmp_path, """
        read(); read()
        send({"tool": "run_public_tests", "arguments": {"code": "    pass\\n"}})
        read()
        print("giving up: boom", file=sys.stderr)
        sys.exit(3)
    """))
    started = time.monotonic()
    outcome = loop(agent, sandbox)
    assert time.monotonic() - started < 10
    assert (outcome.end_reason, outcome.turns) == ("error", 1)
    assert "exited 3 during turn 2 without an action" in outcome.error
    assert "giving up: boom" in outcome.error
    assert_nothing_left(agent)
    row = run_episode(agent, sandbox, HARNESS, Episode(ADD, 0, 7))
    assert (row["status"], row["end_reason"]) == ("error", "error")
    assert "giving up: boom" in row["error"]


def test_an_agent_that_cannot_start_is_an_error(sandbox):
    outcome = loop(command_agent([str(REPO / "no-such-agent")]), sandbox)
    assert outcome.end_reason == "error" and "cannot run" in outcome.error


NEVER_ANSWERS = """
    read(); read()
    # A child of its own: killing the process group must take it too.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"child {child.pid}", file=sys.stderr, flush=True)
    time.sleep(600)
"""


def test_an_agent_that_never_answers_ends_at_its_deadline_with_its_children(tmp_path, sandbox):
    # The episode's wall budget is the deadline: a timeout, a budget's end.
    agent = command_agent(script(tmp_path, NEVER_ANSWERS))
    harness = HARNESS.model_copy(update={"agent_timeout_s": 1.5})
    started = time.monotonic()
    outcome = loop(agent, sandbox, ADD, harness)
    elapsed = time.monotonic() - started
    assert outcome.end_reason == "timeout" and outcome.turns == 0
    assert 1.4 < elapsed < 1.5 + 1.0
    # The checkpoint's own per-action timeout_s: the agent failed, an error.
    # (2 s: the child must have started and said its pid on stderr by then, on a busy machine)
    agent = command_agent(script(tmp_path, NEVER_ANSWERS), timeout_s=2.0)
    started = time.monotonic()
    outcome = loop(agent, sandbox)
    assert time.monotonic() - started < 2.0 + 2.0
    assert outcome.end_reason == "error"
    assert "no action within 2 s (turn 1)" in outcome.error
    child = int(outcome.error.rpartition("child ")[2].split()[0])  # from the stderr tail
    assert dead(child)  # killed with its group (a zombie until init reaps it)
    assert_nothing_left(agent)


def test_a_command_completion_agent_ends_by_the_episodes_wall_time(tmp_path, sandbox):
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    # Its own timeout_s is 30 s; the episode has 1.
    agent = make_agent("c", {"agent": "command", "command": [sys.executable, str(slow)],
                             "timeout_s": 30}, CONTEXT)
    harness = HARNESS.model_copy(update={"agent_timeout_s": 1.0})
    started = time.monotonic()
    outcome = loop(agent, sandbox, ADD, harness)
    assert outcome.end_reason == "timeout", outcome.error
    assert time.monotonic() - started < 3


@pytest.fixture(params=["cgroup", "proc"])
def tree_way(request, monkeypatch):
    """Each way heldout.agents.process_tree holds an agent's processes: a cgroup of its own
    where this machine offers one (else skipped), and the /proc scan everywhere."""
    from heldout.agents import process_tree

    if request.param == "proc":
        monkeypatch.setattr(process_tree, "_cgroup_parent", [None])
    elif process_tree._cgroup_base() is None:
        pytest.skip("no writable cgroup v2 here: the /proc way holds the tree")
    return request.param


def test_an_agent_that_closes_its_stdout_and_stays_ends_its_turn_and_is_killed(
    tmp_path, sandbox, tree_way
):
    agent = command_agent(script(tmp_path, """
        read(); read()
        os.close(1)
        time.sleep(30)
    """))
    harness = HARNESS.model_copy(update={"agent_timeout_s": 2.0})
    started = time.monotonic()
    outcome = loop(agent, sandbox, ADD, harness)
    elapsed = time.monotonic() - started
    assert outcome.end_reason in ("error", "timeout") and outcome.turns == 0
    assert elapsed < 2.0 + 2.0, elapsed
    assert "closed its stdout during turn 1 without an action" in outcome.error
    assert_nothing_left(agent)


SETSID_CHILD = """
    import os, sys, time
    if sys.argv[2] == "double":  # a daemon: fork, the child leaves, the grandchild stays
        if os.fork():
            os._exit(0)
    os.setsid()
    with open(sys.argv[1] + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    time.sleep(600)
"""


def started_setsid_child(tmp_path: Path, how: str) -> str:
    """An agent body that starts a child which leaves its session (setsid), waits until the
    child is there (its pid in a file), then submits."""
    (tmp_path / "child.py").write_text(textwrap.dedent(SETSID_CHILD))
    return f"""
        read(); read()
        subprocess.Popen([sys.executable, {str(tmp_path / "child.py")!r},
                          {str(tmp_path / "child.pid")!r}, {how!r}])
        while not os.path.exists({str(tmp_path / "child.pid")!r}):
            time.sleep(0.01)
        submit("    return a + b\\n")
        read()
    """


def child_pid(tmp_path: Path) -> int:
    return int((tmp_path / "child.pid").read_text())


@pytest.mark.parametrize("how", ["setsid", "double"])
def test_a_child_that_left_the_agents_session_is_killed_at_the_episodes_end(
    tmp_path, sandbox, tree_way, how
):
    agent = command_agent(script(tmp_path, started_setsid_child(tmp_path, how)))
    outcome = loop(agent, sandbox)
    assert outcome.end_reason == "submitted", outcome.error
    child = child_pid(tmp_path)
    assert Path(f"/proc/{child}/stat").exists() or dead(child)  # it was there
    assert dead(child, within_s=0.5)  # gone with the episode, not 600 s later
    assert_nothing_left(agent)


def test_a_child_born_after_the_last_scan_is_held_when_the_agent_exits_on_the_end(
    tmp_path, sandbox, monkeypatch
):
    """The /proc way with no scan while the episode runs: the setsid child was never seen
    before the end, and the agent exits on the end message and orphans it. The scan made
    before the end is sent still holds it (CI once lost this race with a 50 ms POLL_S)."""
    from heldout.agents import process_tree

    monkeypatch.setattr(process_tree, "_cgroup_parent", [None])
    monkeypatch.setattr(process_tree.ProcessTree, "watch", lambda self: None)
    agent = command_agent(script(tmp_path, started_setsid_child(tmp_path, "setsid")))
    outcome = loop(agent, sandbox)
    assert outcome.end_reason == "submitted", outcome.error
    assert dead(child_pid(tmp_path), within_s=0.5)
    assert_nothing_left(agent)


def completion_agent_with_setsid_child(tmp_path: Path):
    """A completion agent that starts a child which leaves its session (setsid) and inherits its
    stdout, waits until the child is there, prints its completion and exits."""
    (tmp_path / "child.py").write_text(textwrap.dedent(SETSID_CHILD))
    agent_path = tmp_path / "agent.py"
    agent_path.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, {str(tmp_path / "child.py")!r},
                          {str(tmp_path / "child.pid")!r}, "setsid"])
        while not os.path.exists({str(tmp_path / "child.pid")!r}):
            time.sleep(0.01)
        print("    return a + b")
    """))
    return make_agent("c", {"agent": "command", "command": [sys.executable, str(agent_path)]},
                      CONTEXT)


def test_a_completion_agents_child_that_left_its_session_is_killed_when_it_is_done(
    tmp_path, tree_way
):
    agent = completion_agent_with_setsid_child(tmp_path)
    started = time.monotonic()
    assert agent.complete(ADD, 0, 7).text == "    return a + b\n"
    assert time.monotonic() - started < 10  # not the 30 s deadline: the agent is done
    assert dead(child_pid(tmp_path), within_s=0.5)


def test_the_keeper_alone_holds_a_completion_agents_setsid_child(tmp_path, monkeypatch):
    """The /proc way with no scan at all: the child left the agent's session and the agent
    exited, so neither its parent chain to the agent nor its session leads to it any more; the
    keeper, its parent now, kills it before it exits itself. (Before the keeper this lost the
    race in 3 runs of 10 here: the agent exits a few ms after the child appears.)"""
    from heldout.agents import process_tree

    monkeypatch.setattr(process_tree, "_cgroup_parent", [None])
    monkeypatch.setattr(process_tree.ProcessTree, "watch", lambda self: None)
    monkeypatch.setattr(process_tree.ProcessTree, "_scan", lambda self: None)
    agent = completion_agent_with_setsid_child(tmp_path)
    assert agent.complete(ADD, 0, 7).text == "    return a + b\n"
    assert dead(child_pid(tmp_path), within_s=0.5)


HOLDER = """
import socket, sys, time
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
server.listen()
print("ready", flush=True)
held = []
while True:
    connection, _ = server.accept()
    held.append(socket.recv_fds(connection, 16, 4))
"""


@pytest.fixture
def holder(tmp_path):
    """A process outside every agent's tree that keeps whatever file descriptor an agent sends
    it over its socket (SCM_RIGHTS): what no tree-killing can close."""
    path = tmp_path / "holder.sock"
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline() == "ready\n"
    yield path
    process.kill()
    process.wait()


def hand_stdout_to(path: Path) -> str:
    """Agent code that gives its stdout to the holder at `path`."""
    return textwrap.dedent(f"""
        import socket
        handing = socket.socket(socket.AF_UNIX)
        handing.connect({str(path)!r})
        socket.send_fds(handing, [b"x"], [1])
        handing.close()
    """)


def test_a_completion_agent_is_read_until_it_exits_not_until_its_stdout_closes(
    tmp_path, tree_way, holder
):
    """Its stdout held open by a process outside the tree: heldout reads what the agent wrote
    and stops, it does not wait for an end of file that never comes."""
    agent_path = tmp_path / "agent.py"
    agent_path.write_text(hand_stdout_to(holder) + 'print("    return a + b")\n')
    agent = make_agent("c", {"agent": "command", "command": [sys.executable, str(agent_path)]},
                       CONTEXT)
    started = time.monotonic()
    assert agent.complete(ADD, 0, 7).text == "    return a + b\n"
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("ending, said", [("sys.exit(5)", "exited 5 "),
                                           ("os.kill(os.getpid(), 15)", "exited -15 ")])
def test_a_completion_agent_ends_as_it_ended_whoever_holds_its_tree(tmp_path, tree_way, ending,
                                                                   said):
    """Under the keeper (the /proc way) the process heldout waits on is the keeper: it exits with
    the agent's code, or by the agent's signal."""
    agent_path = tmp_path / "agent.py"
    agent_path.write_text(f"import os, sys\nprint('partial')\n{ending}\n")
    agent = make_agent("c", {"agent": "command", "command": [sys.executable, str(agent_path)]},
                       CONTEXT)
    with pytest.raises(AgentError, match=said):
        agent.complete(ADD, 0, 7)


def test_the_keeper_starts_the_agent_with_the_signals_heldout_would(tmp_path, tree_way):
    """Ignored signals are inherited across exec: under the keeper (the /proc way) the agent
    must ignore exactly what it ignores when heldout starts it (the cgroup way), SIGPIPE not."""
    agent = make_agent("c", {"agent": "command", "command": [
        "/bin/sh", "-c", "grep SigIgn /proc/$$/status"]}, CONTEXT)
    ignored = int(agent.complete(ADD, 0, 7).text.split()[1], 16)
    assert ignored & (1 << (signal.SIGPIPE - 1)) == 0
    assert ignored == int(subprocess.run(
        ["/bin/sh", "-c", "grep SigIgn /proc/$$/status"], capture_output=True, text=True,
        start_new_session=True).stdout.split()[1], 16)


def test_a_step_agent_that_exits_without_an_action_ends_its_turn_though_its_stdout_is_held(
    tmp_path, sandbox, tree_way, holder
):
    agent = command_agent(script(tmp_path, "read(); read()\n" + hand_stdout_to(holder)
                                 + "sys.exit(3)\n"))
    started = time.monotonic()
    outcome = loop(agent, sandbox)
    assert time.monotonic() - started < 10  # not the 30 s turn deadline
    assert outcome.end_reason == "error" and outcome.turns == 0
    assert "exited 3 during turn 1 without an action" in outcome.error
    assert_nothing_left(agent)


def test_a_step_agents_last_action_before_it_exits_is_taken_though_its_stdout_is_held(
    tmp_path, sandbox, tree_way, holder
):
    agent = command_agent(script(tmp_path, "read(); read()\n" + hand_stdout_to(holder)
                                 + 'submit("    return a + b\\n")\n'))
    started = time.monotonic()
    outcome = loop(agent, sandbox, EASY)
    assert time.monotonic() - started < 10
    assert outcome.end_reason == "submitted", outcome.error
    assert_nothing_left(agent)


def test_an_agent_that_prints_a_huge_line_is_an_error(tmp_path, sandbox):
    agent = command_agent(script(tmp_path, """
        read(); read()
        sys.stdout.write("x" * (17 * 2**20) + "\\n")
        sys.stdout.flush()
        time.sleep(600)
    """))
    started = time.monotonic()
    outcome = loop(agent, sandbox)
    assert time.monotonic() - started < 10
    assert outcome.end_reason == "error"
    assert f"a stdout line longer than {16 * 2**20} bytes (turn 1)" in outcome.error
    assert_nothing_left(agent)


# --- resume after a real kill -9 in the middle of a multi-turn episode ----------------------

SLOW_AGENT = PRELUDE + """
log = open(sys.argv[1], "a")

def note(text):
    log.write(text + "\\n")
    log.flush()

view = read()["task"]
key = f"{view['id']}#{view['sample']}"
note(f"start {key} {os.getpid()}")
read()
for turn in (1, 2):
    time.sleep(0.15)
    note(f"turn {turn} {key}")
    send({"tool": "run_public_tests", "arguments": {"code": f"    return {turn}\\n"}})
    read()
time.sleep(0.15)
note(f"turn 3 {key}")
submit(f"    return {view['sample']}\\n", "third turn")
read()
"""
STEPS = {"steps": {"agent": "command", "protocol": "steps",
                   "command": [sys.executable, "slow_agent.py", "agent.log"]}}
STAGE_IN_CHILD = "import sys; from stages import rollouts; rollouts.run(sys.argv[1])"


def step_project(project: Path) -> Path:
    configure_small_project(project, tasks=12, n=2, checkpoints=STEPS, harness={"max_turns": 4},
                            rollouts={"in_flight": 1, "chunk_episodes": 1})
    (project / "slow_agent.py").write_text(SLOW_AGENT)
    return project


def log_lines(project: Path) -> list[str]:
    path = project / "agent.log"
    return path.read_text().splitlines() if path.exists() else []


def cached(cache: Path) -> int:
    try:
        with sqlite3.connect(cache) as db:
            return db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_resume_after_kill_9_mid_episode_reruns_only_unfinished_episodes_whole(
    tmp_path: Path, monkeypatch
):
    from stages import catalog, rollouts, split

    killed = step_project(copy_project(tmp_path / "killed"))
    clean = step_project(copy_project(tmp_path / "clean"))
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env["MLFLOW_TRACKING_URI"])
    for project in (killed, clean):
        split.run(project)

    child = subprocess.Popen([sys.executable, "-c", STAGE_IN_CHILD, "steps"], cwd=killed,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    cache = killed / ".heldout" / "episodes.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        lines = log_lines(killed)
        # Mid-episode: two finished episodes in the cache, and one at its second turn.
        if lines and lines[-1].startswith("turn 2 ") and cached(cache) >= 2:
            os.killpg(child.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    child.wait()
    assert child.returncode == -signal.SIGKILL, child.stderr.read().decode()[-2000:]
    assert not (killed / catalog.rollout_file("steps")).exists()

    # The orphaned agent of the interrupted episode reads EOF (or EPIPE) and exits by itself.
    orphan = int(next(line for line in reversed(log_lines(killed))
                      if line.startswith("start ")).split()[2])
    assert dead(orphan, within_s=10)
    # (Woken after the kill, it may log its next turn first: the log says what started, the
    # cache what finished.)
    before = log_lines(killed)
    started_before = [line.split()[1] for line in before if line.startswith("start ")]
    interrupted, finished_before = started_before[-1], set(started_before[:-1])
    in_cache = cached(cache)
    assert in_cache == len(finished_before) >= 2

    resumed = rollouts.run("steps", killed)
    uninterrupted = rollouts.run("steps", clean)
    total = uninterrupted["episodes"]
    assert total >= 6 and uninterrupted["resumed"] == 0
    assert resumed["resumed"] == in_cache < total

    after = log_lines(killed)[len(before):]
    started_after = [line.split()[1] for line in after if line.startswith("start ")]
    assert len(started_after) == len(set(started_after)) == total - in_cache
    assert finished_before.isdisjoint(started_after) and interrupted in started_after
    # The interrupted episode ran again whole: its turns start again at 1.
    assert [line.split()[1] for line in after if line.endswith(f" {interrupted}")] == [
        "1", "2", "3"]
    assert len([line for line in log_lines(clean) if line.startswith("start ")]) == total

    a = pd.read_parquet(killed / catalog.rollout_file("steps"))
    b = pd.read_parquet(clean / catalog.rollout_file("steps"))
    assert len(a) == total and set(a.end_reason) == {"submitted"} and set(a.turns) == {3}
    pd.testing.assert_frame_equal(a.drop(columns=list(TIMING_COLUMNS)),
                                  b.drop(columns=list(TIMING_COLUMNS)))
