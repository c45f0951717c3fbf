"""`heldout params use FILE`: keys set with params.yaml's comments kept; a key params.yaml does
not have, or a result that does not pass the params check, leaves the file as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def use(project: Path, text: str, monkeypatch) -> tuple[int, str]:
    (project / "overrides.yaml").write_text(text)
    heldout = Path(sys.executable).parent / "heldout"
    ran = subprocess.run([str(heldout), "params", "use", "overrides.yaml"], cwd=project,
                         capture_output=True, text=True, timeout=120)
    return ran.returncode, ran.stdout + ran.stderr


def test_keys_are_set_and_every_comment_stays(project, monkeypatch):
    before = (project / "params.yaml").read_text()
    code, output = use(project, "set:\n  harness.n: 3\n  select.rule: one_se\n", monkeypatch)
    assert code == 0, output
    after = (project / "params.yaml").read_text()
    assert "  n: 3\n" in after and "  rule: one_se\n" in after
    changed = [(old, new) for old, new in zip(before.splitlines(), after.splitlines(),
                                              strict=True) if old != new]
    assert changed == [("  n: 10", "  n: 3"), ("  rule: best", "  rule: one_se")]


def test_an_unknown_key_or_a_bad_value_changes_nothing(project, monkeypatch):
    before = (project / "params.yaml").read_text()
    code, output = use(project, "set:\n  harness.nn: 3\n", monkeypatch)
    assert code != 0 and "params.yaml has no harness.nn" in output
    code, output = use(project, "set:\n  harness.n: -1\n", monkeypatch)
    assert code != 0 and "harness.n" in output
    assert (project / "params.yaml").read_text() == before
    assert os.path.exists(project / "params.yaml")


def test_a_list_written_as_dvc_writes_it_is_replaced_whole(project, monkeypatch):
    """params.yaml's lists are block lists at their key's indent (DVC's `-S` style): setting
    one replaces all its items, and the file stays YAML (examples/repository.yaml sets
    sensitivity.checkpoints to [])."""
    before = (project / "params.yaml").read_text()
    assert "  checkpoints:\n  - agent_tester\n" in before
    code, output = use(project, "set:\n  sensitivity.checkpoints: []\n", monkeypatch)
    assert code == 0, output
    after = (project / "params.yaml").read_text()
    assert after == before.replace("  checkpoints:\n  - agent_tester\n", "  checkpoints: []\n")
    code, output = use(project, "set:\n  sensitivity.checkpoints: [agent_tester, step_10]\n",
                       monkeypatch)
    assert code == 0, output
    assert "  checkpoints: [agent_tester, step_10]\n" in (project / "params.yaml").read_text()
