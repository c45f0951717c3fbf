"""The test stage stages the ledger it wrote, so the next commit anchors it, and it stays staged
after `dvc exp run` in the workspace, which resets git's index as it saves the experiment
(issue 39 item 5). Real DVC on a one-stage project (tests/tiny_dvc.py): the stage writes a
ledger line through the test stage's own wrapper (heldout.custody.restage)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from heldout.custody.guard import LEDGER, TestSetAccessError
from heldout.custody.restage import WORKSPACE_RUN, stage_after_reset
from stages import test as test_stage
from tests.tiny_dvc import dvc_environment, porcelain, run, tiny_project

# What `heldout stage` and the test stage do, and nothing else: the watcher started first (every
# stage, cli/main.py), a ledger line written inside the wrapper the test stage runs its access
# in (`wrapped: false`: neither, as before: the line staged, no more).
STAGE = '''
import json
from pathlib import Path

import yaml

from heldout.custody.anchor import stage_ledger
from heldout.custody.restage import keep_staged_after_experiment, ledger_staged_if_written
from heldout.environment import store_root

root = Path.cwd()
params = yaml.safe_load(Path("params.yaml").read_text())
ledger = store_root(root) / "ledger" / "test_access.jsonl"


def write():
    if params["ledger"]["write"]:
        ledger.parent.mkdir(exist_ok=True)
        with ledger.open("a") as file:
            file.write(json.dumps({"x": params["ledger"]["x"]}) + "\\n")


if params["ledger"]["wrapped"]:
    keep_staged_after_experiment(root)
    with ledger_staged_if_written(root, say=lambda line: print(f"test: {line}")):
        write()
else:
    write()
    stage_ledger(root)
Path("out.txt").write_text(str(params["ledger"]["x"]))
'''
PARAMS = {"ledger": {"x": 1, "write": True, "wrapped": True}}


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    return dvc_environment(tmp_path / "home")


def project_with_ledger(tmp_path: Path, environment: dict[str, str], **tracked) -> Path:
    return tiny_project(tmp_path / "project", environment, STAGE, PARAMS, ["out.txt"], **tracked)


def test_a_workspace_experiment_leaves_the_ledger_staged(tmp_path: Path, environment):
    project = project_with_ledger(tmp_path, environment)
    assert porcelain(project, environment, str(LEDGER)) == ""
    # DVC alone, as the test stage left it before: staged by the stage, unstaged by DVC.
    before = run(["dvc", "exp", "run", "-n", "plain", "-S", "ledger.x=2",
                  "-S", "ledger.wrapped=false"], project, environment)
    assert porcelain(project, environment, str(LEDGER)) == f" M {LEDGER}", before.stdout
    # Through the wrapper: staged again once DVC has reset the index, before it returns. (The
    # workspace still holds the last experiment's params: DVC leaves them there.)
    after = run(["dvc", "exp", "run", "-n", "kept", "-S", "ledger.x=3",
                 "-S", "ledger.wrapped=true"], project, environment)
    assert porcelain(project, environment, str(LEDGER)) == f"M  {LEDGER}"
    assert ("test: ledger: `dvc exp run` resets git's index as it saves the experiment; "
            f"{LEDGER} is staged again once it has") in after.stdout
    assert [json.loads(line)["x"] for line in (project / LEDGER).read_text().splitlines()] == [
        1, 2, 3]
    # The experiment holds the lines too: DVC committed them before its reset.
    shown = run(["git", "show", "refs/exps/" + experiment_ref(project, environment, "kept")
                 + f":{LEDGER}"], project, environment).stdout
    assert shown == (project / LEDGER).read_text()


def test_a_first_ledger_in_a_workspace_experiment_is_added(tmp_path: Path, environment):
    """A ledger git has never held (the first access ever) is added, not left untracked."""
    project = project_with_ledger(tmp_path, environment, untracked=[str(LEDGER)])
    assert porcelain(project, environment, str(LEDGER)) == f"?? {LEDGER}"
    run(["dvc", "exp", "run", "-n", "first", "-S", "ledger.x=2"], project, environment)
    assert porcelain(project, environment, str(LEDGER)) == f"A  {LEDGER}"


def test_a_ledger_staged_before_stays_staged_through_a_sweep(tmp_path: Path, environment):
    """An access's lines staged and not yet committed, then a sweep (no ledger line): DVC's
    reset would unstage them; the watcher the first stage started stages them again."""
    project = project_with_ledger(tmp_path, environment)
    (project / LEDGER).write_text('{"x": 1}\n{"x": 7}\n')
    run(["git", "add", str(LEDGER)], project, environment)
    done = run(["dvc", "exp", "run", "-n", "sweep", "-S", "ledger.write=false"], project,
               environment)
    assert "resets git's index" not in done.stdout  # the stage wrote nothing: nothing to say
    assert porcelain(project, environment, str(LEDGER)) == f"M  {LEDGER}"
    # A ledger as HEAD holds it is left alone.
    run(["git", "commit", "-qm", "anchored"], project, environment)
    run(["dvc", "exp", "run", "-n", "sweep-2", "-S", "ledger.x=4", "-S", "ledger.write=false"],
        project, environment)
    assert porcelain(project, environment, str(LEDGER)) == ""


def test_a_temporary_experiment_stages_the_projects_ledger(tmp_path: Path, environment):
    """`dvc exp run --temp` runs the stage in a copy; the line goes to the project's ledger
    (the store's export), so that is the one staged, and DVC never resets that index."""
    project = project_with_ledger(tmp_path, environment)
    done = run(["dvc", "exp", "run", "--temp", "-n", "copy", "-S", "ledger.x=5"], project,
               environment)
    assert "resets git's index" not in done.stdout
    assert porcelain(project, environment, str(LEDGER)) == f"M  {LEDGER}"
    assert (project / LEDGER).read_text().splitlines()[-1] == '{"x": 5}'
    assert yaml.safe_load((project / "params.yaml").read_text()) == PARAMS


def experiment_ref(project: Path, environment: dict[str, str], name: str) -> str:
    refs = run(["git", "for-each-ref", "--format=%(refname)", "refs/exps/"], project,
               environment).stdout.split()
    (found,) = [ref for ref in refs if ref.endswith(f"/{name}")]
    return found.removeprefix("refs/exps/")


def test_the_watcher_of_an_experiment_already_gone_stages_at_once(
        tmp_path: Path, environment):
    """Without DVC: its run record names a process that is gone, and the index was never reset;
    the watcher stages at once rather than wait."""
    project = project_with_ledger(tmp_path, environment)
    (project / LEDGER).write_text('{"x": 1}\n{"x": 9}\n')
    ended = subprocess.Popen(["true"])
    ended.wait()
    (project / WORKSPACE_RUN).mkdir(parents=True)
    (project / WORKSPACE_RUN / "workspace.json").write_text(json.dumps({"pid": ended.pid}))
    assert stage_after_reset(project, ended.pid).startswith("staged")
    assert porcelain(project, environment, str(LEDGER)) == f"M  {LEDGER}"


def test_a_refused_access_is_staged_too(selected_copy: Path, environment):
    """A refusal is a ledger line like any other: the commit that anchors the ledger holds it."""
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        run(command, selected_copy, environment)
    params = yaml.safe_load((selected_copy / "params.yaml").read_text())
    params["test"]["spend"] = {"candidates": [], "reason": ""}  # the plan refuses 40 tasks
    (selected_copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(TestSetAccessError, match="^refused: "):
        test_stage.run(selected_copy)
    outcomes = [json.loads(line)["outcome"]
                for line in (selected_copy / LEDGER).read_text().splitlines()]
    assert outcomes == ["refused"]
    assert porcelain(selected_copy, environment, str(LEDGER)) == f"A  {LEDGER}"
