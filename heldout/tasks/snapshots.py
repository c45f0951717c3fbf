"""A repository snapshot as a tree in memory: {POSIX path: UTF-8 text}, from a folder, a tarball
or a git repository at a commit.

Only what the commit (or the folder) holds is read: no `.git`, so no history, branches, tags,
reflog or objects of other commits reach a task record, an agent or a judge. A snapshot with a
symlink or a file that is not UTF-8 text is refused, naming it: the repository kind judges text
diffs of text files.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from heldout.tasks.diff_filter import unsafe_path

TARBALLS = (".tar", ".tar.gz", ".tgz")
SKIPPED_FOLDERS = frozenset({".git", "__pycache__", ".pytest_cache"})
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024


class SnapshotError(ValueError):
    """A snapshot that cannot be read as a tree of text files; says which file and why."""


def read_snapshot(path: Path, commit: str | None = None) -> dict[str, str]:
    """The tree at `path`: a folder (at `commit`, when given, through git), or a tarball."""
    if commit is not None:
        return _from_git(path, commit)
    if path.is_file() and path.name.endswith(TARBALLS):
        with tarfile.open(path) as archive:
            return _from_tar(archive)
    if path.is_dir():
        return _from_folder(path)
    raise SnapshotError(f"{path}: no such folder or tarball ({', '.join(TARBALLS)})")


def _from_folder(root: Path) -> dict[str, str]:
    files: dict[str, bytes] = {}
    for item in sorted(root.rglob("*")):
        relative = item.relative_to(root)
        if SKIPPED_FOLDERS & set(relative.parts):
            continue
        if item.is_symlink():
            raise SnapshotError(f"{relative.as_posix()}: a symlink; snapshots hold files only")
        if item.is_file():
            files[relative.as_posix()] = item.read_bytes()
    return _as_text(files)


def _from_tar(archive: tarfile.TarFile) -> dict[str, str]:
    files: dict[str, bytes] = {}
    for member in archive.getmembers():
        name = member.name.removeprefix("./")
        if member.isdir() or not name or SKIPPED_FOLDERS & set(name.split("/")):
            continue
        if not member.isfile():
            raise SnapshotError(f"{name}: a link or device; snapshots hold files only")
        extracted = archive.extractfile(member)
        files[name] = extracted.read() if extracted else b""
    return _as_text(files)


def _from_git(repository: Path, commit: str) -> dict[str, str]:
    """The tree of `commit` alone, through `git archive`: nothing of the history comes with it."""
    try:
        archived = subprocess.run(["git", "-C", str(repository), "archive", "--format=tar", commit],
                                  capture_output=True, check=True)
    except FileNotFoundError:
        raise SnapshotError("git is not installed; it reads a snapshot at a commit") from None
    except subprocess.CalledProcessError as error:
        message = error.stderr.decode("utf-8", "replace").strip().splitlines()
        raise SnapshotError(f"{repository} at {commit}: "
                            f"{message[-1] if message else 'git archive failed'}") from None
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as archive:
        return _from_tar(archive)


def _as_text(files: dict[str, bytes]) -> dict[str, str]:
    if sum(len(data) for data in files.values()) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"more than {MAX_SNAPSHOT_BYTES >> 20} MiB of files: a task line "
                            "holds its repository's tree; use a smaller repository")
    tree = {}
    for path, data in sorted(files.items()):
        unsafe = unsafe_path(path)
        if unsafe:
            raise SnapshotError(f"{path}: {unsafe}")
        try:
            tree[path] = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SnapshotError(f"{path}: not UTF-8 text; snapshots hold text files only") \
                from None
    if not tree:
        raise SnapshotError("no files")
    return tree
