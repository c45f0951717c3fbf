"""The git anchor: once the ledger's lines are committed, nobody, the key's holder included, can
change or drop them without the audit naming the commit that holds them.

The MACs (heldout.custody.ledger) stop a writer without the key; they do not stop one with it,
who could rewrite the ledger and re-MAC it. Git history is the witness the writer does not
control alone: it is pushed, reviewed and copied. So every committed version of the ledger must
be a prefix of the current file, line for line. Lines not yet committed are listed, with the
command that anchors them: a note, not a failure, because a commit is a person's act. The test
stage only stages the ledger (`git add`), as DVC's autostage does for dvc.lock.

The check is a pure function of the committed versions; reading them from git is a thin layer
that never raises (no git, no repository, no commits yet: each is a note).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from heldout.custody.guard import LEDGER
from heldout.custody.store import ledger_text

ANCHOR_COMMAND = f'git add {LEDGER.as_posix()} && git commit -m "test access"'
_GIT_TIMEOUT_S = 60


@dataclass(frozen=True)
class CommittedVersion:
    commit: str
    text: str


@dataclass
class Anchor:
    """What git says about the ledger: broken anchors fail the audit, notes do not."""

    lines: int = 0
    anchored: int = 0  # lines 1..anchored are in a commit
    latest: str | None = None  # the newest commit that holds the ledger
    problems: list[str] = field(default_factory=list)
    unavailable: str | None = None  # why git cannot anchor the ledger here

    @property
    def unanchored(self) -> list[int]:
        return list(range(self.anchored + 1, self.lines + 1))

    @property
    def notes(self) -> list[str]:
        if self.unavailable:
            return [self.unavailable]
        if self.unanchored:
            return [f"ledger lines {_ranges(self.unanchored)} are not committed yet, so not "
                    f"anchored: {ANCHOR_COMMAND}"]
        return []

    def summary(self) -> str:
        if self.unavailable:
            return "git anchor: none"
        if self.latest is None:
            return "git anchor: no commit holds the ledger yet"
        state = (f"{len(self.problems)} committed line(s) changed or gone" if self.problems
                 else "every committed line unchanged")
        return (f"git anchor: {self.anchored} of {self.lines} ledger lines committed (latest "
                f"in {self.latest[:7]}); {state}")


def check_anchor(current: str, versions: Sequence[CommittedVersion],
                 path: Path = LEDGER) -> Anchor:
    """`versions` newest first, as `git log` lists them. Each must be a prefix of `current`."""
    lines = current.splitlines()
    anchor = Anchor(lines=len(lines), latest=versions[0].commit if versions else None)
    broken: dict[tuple[int, str], list[str]] = {}
    for version in versions:
        committed = version.text.splitlines()
        for number, line in enumerate(committed, start=1):
            if number > len(lines) or lines[number - 1] != line:
                how = "is gone" if number > len(lines) else "has been changed since"
                broken.setdefault((number, how), []).append(version.commit)
                break
        else:
            anchor.anchored = max(anchor.anchored, len(committed))
    for (number, how), commits in sorted(broken.items()):
        first = commits[-1][:7]  # the oldest commit that held the line: where it was anchored
        also = f" (and {len(commits) - 1} later commit(s))" if len(commits) > 1 else ""
        anchor.problems.append(
            f"ledger line {number} was committed in {first}{also} and {how}: a committed line "
            f"never changes; see git diff {first} -- {path.as_posix()}")
    return anchor


def _ranges(numbers: list[int]) -> str:
    first, last = numbers[0], numbers[-1]  # unanchored lines are always one run, to the end
    return str(first) if first == last else f"{first}-{last}"


def anchor_ledger(root: Path, path: Path = LEDGER) -> Anchor:
    """Check the ledger at `root / path` against every version git's history of HEAD holds."""
    file = root / path
    current = ledger_text(file) if file.is_file() else ""
    versions, unavailable = committed_versions(root, path)
    anchor = check_anchor(current, versions, path)
    anchor.unavailable = unavailable
    return anchor


def committed_versions(root: Path, path: Path = LEDGER) -> tuple[list[CommittedVersion],
                                                                  str | None]:
    """Every committed version of `path`, newest first, and why git cannot anchor it, if so.

    `--full-history`: a branch whose ledger lines a merge dropped (`-s ours`) is still a
    version that must be a prefix; git's default history simplification would hide it."""
    where = _work_tree(root)
    if where:
        return [], where
    listed = _git(root, "-c", "log.showSignature=false", "log", "--full-history",
                  "--format=%H", "--", path.as_posix())
    if listed is None or listed.returncode != 0:
        if listed is not None and "does not have any commits" in listed.stderr:
            return [], _ignored_note(root, path)
        return [], f"git log failed, so the ledger's anchor is unknown: {_first_line(listed)}"
    versions = []
    for commit in listed.stdout.split():
        shown = _git(root, "show", f"{commit}:./{path.as_posix()}")
        if shown is not None and shown.returncode == 0:  # else the commit deleted the file
            versions.append(CommittedVersion(commit, shown.stdout))
    return versions, None if versions else _ignored_note(root, path)


def stage_ledger(root: Path, path: Path = LEDGER) -> str:
    """`git add` the ledger, so the next commit anchors its new lines; never commits, never
    raises. Returns what happened, for the stage's log."""
    where = _work_tree(root)
    if where:
        return f"ledger not staged: {where}"
    ignored = _ignored_note(root, path)
    if ignored:
        return f"ledger not staged: {ignored}"
    added = _git(root, "add", "--", path.as_posix())
    if added is None or added.returncode != 0:
        return f"ledger not staged: git add failed: {_first_line(added)}"
    return f"staged {path.as_posix()}; a commit anchors it: git commit -m \"test access\""


def _work_tree(root: Path) -> str | None:
    """None inside a git work tree, else why not, as a note."""
    probe = _git(root, "rev-parse", "--is-inside-work-tree")
    if probe is None:
        return "git is not installed, so the ledger has no anchor"
    if probe.returncode != 0 or probe.stdout.strip() != "true":
        if "not a git repository" in probe.stderr:
            return (f"{root} is not a git repository, so the ledger has no anchor: keep the "
                    "project in git and commit the ledger after each access")
        return f"git cannot read {root}, so the ledger has no anchor: {_first_line(probe)}"
    return None


def _ignored_note(root: Path, path: Path) -> str | None:
    ignored = _git(root, "check-ignore", "-q", "--", path.as_posix())
    if ignored is not None and ignored.returncode == 0:
        return (f"{path.as_posix()} is ignored by git, so it can never be anchored: remove it "
                "from .gitignore")
    return None


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """git's answer, or None when git cannot be run at all. Replace objects are ignored: with
    them, `git replace` of a committed ledger blob would make the anchor read the forgery."""
    environment = {**os.environ, "GIT_NO_REPLACE_OBJECTS": "1"}
    try:
        return subprocess.run(["git", "--no-replace-objects", *args], cwd=root, env=environment,
                              capture_output=True, text=True, encoding="utf-8",
                              errors="surrogateescape", timeout=_GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None


def _first_line(done: subprocess.CompletedProcess[str] | None) -> str:
    if done is None:
        return "git could not be run"
    return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
