"""The commit a work-pool deployment runs, and the check that a flow run runs it.

`heldout deploy` pins the pipeline to one commit: the git remote's URL at HEAD (Prefect's
GitRepository clones it at that sha), or a clone of HEAD into a local folder of its own. The
flow run is given the commit as its `commit` parameter and checks, before anything runs, that
the folder it runs in holds that commit and no edit to a tracked file: a worker that was handed
another tree refuses instead of running it.

Only the standard library and git: the CLI's deploy command and the pipeline flow import it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from heldout.errors import StageError

# What the pipeline itself writes to tracked files while it runs: they may differ from the
# commit, nothing else may.
PIPELINE_WRITES = ("dvc.lock", "ledger/")


def git(root: Path, *args: str) -> str:
    return git_output(root, *args).strip()


def git_output(root: Path, *args: str) -> str:
    """git's standard output as it printed it (a porcelain status's leading space is part of
    its first line)."""
    # A replaced object must not stand in for the commit's (git replace), nor an inherited
    # GIT_DIR for the folder's own repository.
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE")}
    done = subprocess.run(["git", "--no-replace-objects", *args], cwd=root, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise StageError(f"git {' '.join(args)} in {root}: {done.stderr.strip() or 'failed'}")
    return done.stdout


def head_commit(root: Path) -> str:
    return git(root, "rev-parse", "--verify", "HEAD^{commit}")


def repository_top(root: Path) -> Path:
    """The project must be the repository's top folder: the worker runs from the clone's."""
    top = Path(git(root, "rev-parse", "--show-toplevel")).resolve()
    if top != root.resolve():
        raise StageError(f"{root} is inside the git repository {top}: heldout deploy needs "
                         "the project (dvc.yaml, params.yaml) at the repository's top")
    return top


def uncommitted(root: Path) -> list[str]:
    """Tracked files that differ from HEAD, less what the pipeline writes itself."""
    # -z: entries end in NUL, paths are not quoted, and a rename's source is an entry of its
    # own after its destination's.
    entries = iter(git_output(root, "status", "--porcelain=v1", "-z",
                              "--untracked-files=no").split("\0"))
    paths = []
    for entry in entries:
        if not entry:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC":
            next(entries, None)
    return [path for path in paths if not path.startswith(PIPELINE_WRITES)]


def remote_url(root: Path, remote: str, commit: str) -> str:
    """The URL of `remote`, once a branch of it this clone knows holds `commit` (else the
    worker could not fetch it)."""
    try:
        url = git(root, "remote", "get-url", remote)
    except StageError as error:
        raise StageError(f"no git remote '{remote}' to deploy from ({error}); name one with "
                         "--remote, or deploy a pinned local copy with --source PATH") from None
    if not git(root, "branch", "-r", "--contains", commit, "--list", f"{remote}/*"):
        raise StageError(f"commit {commit[:12]} is on no branch of '{remote}' ({url}) that this "
                         "clone knows of: push it first (git push), so the worker can fetch it")
    return url


def pinned_copy(root: Path, folder: Path, commit: str) -> Path:
    """A clone of the repository at `commit` in `folder/<commit[:12]>`, detached, holding
    nothing else: what a `--source PATH` deployment runs. An existing copy of the same commit
    is reused when it is still that commit, untouched."""
    copy = (folder / commit[:12]).resolve()
    if copy.exists():
        if not (copy / ".git").exists() or head_commit(copy) != commit or uncommitted(copy):
            raise StageError(f"{copy} exists and is not an untouched copy of commit "
                             f"{commit[:12]}: remove it, or deploy under another --source")
        return copy
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "clone", "--quiet", "--no-checkout", "--no-hardlinks", str(root.resolve()),
        str(copy))
    git(copy, "-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", commit)
    return copy


def check_runs_deployed(root: Path, commit: str) -> None:
    """Before a deployed run does anything: the folder holds the deployed commit, unedited."""
    try:
        head = head_commit(root)
    except StageError as error:
        raise StageError(f"this run was deployed at commit {commit[:12]}, and {root} is not a "
                         f"git checkout ({error})") from None
    if head != commit:
        raise StageError(f"this run was deployed at commit {commit[:12]}, and {root} holds "
                         f"{head[:12]}: refusing to run another commit than the deployed one")
    edited = uncommitted(root)
    if edited:
        raise StageError(f"this run was deployed at commit {commit[:12]}, and {root} has edits "
                         f"to tracked files ({', '.join(edited[:5])}): refusing to run them")
