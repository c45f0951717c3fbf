"""The ledger kept staged through a workspace `dvc exp run`, which resets git's index.

`dvc exp run` without --temp runs the stages in the workspace, commits the experiment on a
detached HEAD, and then puts HEAD back on the branch with a mixed reset of the index (scmrepo's
`Git.detach_head`, left by DVC's WorkspaceExecutor.cleanup). Whatever was staged is unstaged:
the ledger the test stage staged (`git add ledger/test_access.jsonl`, so the next commit
anchors its new lines), or staged by an earlier access and not yet committed. The reset comes
after the last stage has ended, and DVC runs nothing of the project's after it (no hook; the
experiment's commit skips git's hooks). So the first stage of a workspace experiment leaves one
small process behind, which waits for the reset and then stages the ledger again if it holds
lines HEAD does not.

What it waits on is DVC's own record of a workspace experiment: the folder
.dvc/tmp/exps/run/workspace, whose workspace.json holds the pid of the `dvc exp run` process.
DVC deletes that folder just before the reset; from then on the watcher stages the ledger as
soon as the index no longer holds it as the file is, or when DVC's process ends, whichever
comes first. The reset comes before DVC prints its last line, so the ledger is staged again
before `dvc exp run` returns, at worst a few milliseconds after. When no stage runs at all (the
experiment changed nothing), nothing of heldout's runs and the reset stands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from heldout.custody.anchor import _git, stage_ledger
from heldout.custody.guard import LEDGER
from heldout.environment import store_root, untrusted_environment

WORKSPACE_RUN = Path(".dvc/tmp/exps/run/workspace")  # DVC's pid_dir / the workspace executor
RUN_RECORD = "workspace.json"  # dvc_task's ProcessInfo of the `dvc exp run` process
# In DVC's folder, so it goes with it: the experiment's watcher is started once.
WATCHER_MARK = "heldout-restage"
_WHILE_RUNNING_S = 0.2  # the stages may run for hours: a cheap look, seldom
_AFTER_RUN_S = 0.01  # DVC's cleanup takes milliseconds: look often
_CLEANUP_AT_MOST_S = 120.0
_EXPERIMENT_AT_MOST_S = 7 * 24 * 3600.0


@contextmanager
def ledger_staged_if_written(root: Path, say: Callable[[str], None] = print) -> Iterator[None]:
    """Whatever runs inside (the test stage's access: opened and closed, refused, or stopped
    mid-way) and writes to the ledger, the ledger is then staged for the next commit, which
    anchors the new lines (heldout.custody.anchor). Staged where the export lives: the project
    that holds the store, which is not the temporary copy `dvc exp run --temp` runs a stage in
    (heldout.environment.store_root); in a workspace `dvc exp run`, staged again after DVC's
    reset (`say` tells the user so)."""
    home = store_root(root)
    before = _read(home / LEDGER)
    try:
        yield
    finally:
        if _read(home / LEDGER) != before:
            stage_ledger(home)
            started = keep_staged_after_experiment(home)
            if started is not None:
                say(after_experiment_line(started))


def after_experiment_line(started: bool, path: Path = LEDGER) -> str:
    if started:
        return (f"ledger: `dvc exp run` resets git's index as it saves the experiment; "
                f"{path.as_posix()} is staged again once it has")
    return (f"ledger: `dvc exp run` resets git's index as it saves the experiment, which "
            f"unstages {path.as_posix()}, and heldout could not wait for it: stage it when the "
            f"experiment ends: git add {path.as_posix()}")


def keep_staged_after_experiment(root: Path, path: Path = LEDGER) -> bool | None:
    """Inside a workspace `dvc exp run`: make sure one process waits for DVC's reset and then
    stages `path` again (True; False if it cannot be started). None anywhere else: a plain
    `dvc repro`, `heldout pipeline`, or the copy `dvc exp run --temp` runs in, whose index DVC
    never resets. Never raises."""
    pid = workspace_experiment_pid(root)
    if pid is None:
        return None
    try:
        mark = os.open(root / WORKSPACE_RUN / WATCHER_MARK, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return True  # an earlier stage of this experiment started it
    except OSError:
        return False
    try:
        with os.fdopen(mark, "w") as file:
            watcher = subprocess.Popen(
                [sys.executable, "-m", __name__, str(root), str(pid), path.as_posix()],
                cwd=root, env=untrusted_environment(), stdin=subprocess.DEVNULL,
                # Not DVC's pipes: DVC reads a stage's output until every holder closes it.
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            file.write(f"{watcher.pid}\n")
    except OSError:
        return False
    return True


def workspace_experiment_pid(root: Path) -> int | None:
    """The pid of the `dvc exp run` running in this workspace now, or None."""
    try:
        pid = int(json.loads((root / WORKSPACE_RUN / RUN_RECORD).read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if _alive(pid) else None


def stage_after_reset(root: Path, pid: int, path: Path = LEDGER) -> str:
    """Wait for DVC's workspace experiment `pid` to reset the index, then stage `path` if it
    holds lines HEAD does not. Returns what happened."""
    started = time.monotonic()
    record = root / WORKSPACE_RUN
    while (record.exists() and _alive(pid)
           and time.monotonic() - started < _EXPERIMENT_AT_MOST_S):
        time.sleep(_WHILE_RUNNING_S)
    if not (root / path).is_file():
        return "no ledger: nothing to stage"
    cleanup = time.monotonic()
    while (_alive(pid) and index_holds(root, path)
           and time.monotonic() - cleanup < _CLEANUP_AT_MOST_S):
        time.sleep(_AFTER_RUN_S)
    if committed(root, path):
        return "the ledger is as HEAD holds it: nothing to stage"
    said = ""
    for _ in range(50):  # git refuses while another writer holds index.lock: DVC's reset
        said = stage_ledger(root, path)
        if said.startswith("staged") or "index.lock" not in said:
            break
        time.sleep(_AFTER_RUN_S * 5)
    return said


def index_holds(root: Path, path: Path) -> bool:
    """Whether git's index holds `path` as the file is now (staged, or as committed)."""
    listed = _git(root, "ls-files", "--stage", "--", path.as_posix())
    entry = listed.stdout.split() if listed is not None and listed.returncode == 0 else []
    return len(entry) > 1 and entry[1] == _blob(root, path)


def committed(root: Path, path: Path) -> bool:
    """Whether HEAD holds `path` as the file is now."""
    listed = _git(root, "ls-tree", "HEAD", "--", path.as_posix())
    entry = listed.stdout.split() if listed is not None and listed.returncode == 0 else []
    return len(entry) > 2 and entry[2] == _blob(root, path)


def _blob(root: Path, path: Path) -> str | None:
    hashed = _git(root, "hash-object", "--", path.as_posix())
    return hashed.stdout.strip() if hashed is not None and hashed.returncode == 0 else None


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """Whether `pid` still runs: a zombie (ended, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds the pid: it runs
        return True
    try:  # "pid (name) S ...": the state follows the name, which may hold spaces
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


if __name__ == "__main__":
    stage_after_reset(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
