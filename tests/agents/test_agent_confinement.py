"""A `command` agent cannot find the test key (issue 23, item 2): not in its environment, not
in the key files (covered in a mount namespace of its own, where it cannot uncover them), not
through /proc (its user namespace keeps every other process's entries out of reach), whatever
it tries. The same probe run as a plain process finds the key everywhere, so the probe would
see it if it were there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from heldout.agents.confinement import confined, namespaces_available
from tests.conftest import REPO

SEEKER = REPO / "tests" / "data" / "key_seeker.py"
HEX_KEY, FILE_KEY, CACHE_KEY = "0a1b" * 16, "2c3d" * 16, "4e5f" * 16
needs_namespaces = pytest.mark.skipif(not namespaces_available(),
                                      reason="user namespaces are not available here")


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch) -> list[Path]:
    """A user key file and cache key under the config folder, a key file named by
    HELDOUT_TEST_KEY beside a key given as hex digits; the paths the agent must not read."""
    config = tmp_path / "config"
    (config / "heldout").mkdir(parents=True)
    (config / "heldout" / "test-key").write_text(FILE_KEY)
    (config / "heldout" / "cache-key").write_text(CACHE_KEY)
    named = tmp_path / "team-secrets" / "key"
    named.parent.mkdir()
    named.write_text(FILE_KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HELDOUT_TEST_KEY", f"{HEX_KEY},{named}")
    return [config / "heldout", named]


def seeker_argv(paths: list[Path]) -> list[str]:
    reversed_keys = (key[::-1] for key in (HEX_KEY, FILE_KEY, CACHE_KEY))
    return [sys.executable, str(SEEKER), ",".join(reversed_keys),
            ",".join(map(str, paths))]


# A stage's process: it loads the test key (so holds it in its memory and environment), then
# runs the agent; it prints what the agent found.
STAGE = """
import json, sys
from heldout.agents.command import CommandSettings, make
from heldout.agents.protocol import AgentContext
from heldout.custody.keys import load_keys
from heldout.tasks.record import Task
load_keys()
task = Task(id="t/1", group="t", prompt="def f():\\n", entry_point="f",
            reference="    pass\\n", tests="def check(candidate):\\n    pass\\n")
agent = make(CommandSettings(command=json.loads(sys.argv[1])),
             AgentContext("{prompt}", 0.8, 0.95, 64, 1, 60.0, sys.argv[2]))
print(agent.complete(task, 0, 0).text)
"""


def test_the_probe_finds_the_key_in_a_plain_process(secrets, tmp_path):
    # Its parent holds the key in its environment, as a stage's process does.
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; "
                               "subprocess.run(sys.argv[1:], input='{}', text=True)",
                               *seeker_argv(secrets)], stdout=subprocess.PIPE, text=True)
    found = json.loads(parent.communicate(timeout=60)[0])
    assert "environ" in found
    assert f"path {secrets[1]}" in found and f"path {secrets[0]}/test-key" in found
    assert any(place.startswith("home ") for place in found)
    assert f"/proc/{parent.pid}/environ" in found


@needs_namespaces
def test_a_command_agent_finds_the_key_nowhere(secrets, tmp_path):
    done = subprocess.run([sys.executable, "-c", STAGE, json.dumps(seeker_argv(secrets)),
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []


@needs_namespaces
def test_the_agent_keeps_its_user_and_its_files(secrets, tmp_path):
    argv, environment = confined(["sh", "-c", "id -u; id -g; echo made > made.txt; cat made.txt"],
                                 str(tmp_path))
    done = subprocess.run(argv, env=environment, cwd=tmp_path, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(os.getuid()), str(os.getgid()), "made"]
    assert (tmp_path / "made.txt").stat().st_uid == os.getuid()
    assert "HELDOUT_TEST_KEY" not in environment

