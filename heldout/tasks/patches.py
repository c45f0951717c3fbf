"""Unified diffs (the `git diff` format SWE-bench uses for `patch`, `test_patch` and
`model_patch`): parsed into one record per file, applied strictly to a tree held in memory, and
made from two trees.

Strict, because the judge applies a completion's diff: a hunk applies only where its context
matches exactly (at its stated line, or the nearest line where it matches, as `git apply` does
without fuzz); anything else is a PatchError naming the file and hunk, never a guess. The
unified-diff parsers on PyPI either do not apply (unidiff) or apply with fuzz (whatthepatch);
neither says what a file's mode change or a symlink is, which the judge's filter must see.
A tree is {path: text}: POSIX paths relative to the repository root, UTF-8 text.

Bounded: a diff is at most MAX_DIFF_BYTES (larger is a PatchError); reading one is linear in
its size, and applying one costs each hunk its own lines, a block of the file's lines and at
most a pass over the blocks: a hunk's place is looked up (heldout.tasks.file_lines), not found
by comparing the hunk at every line from its stated one (benchmarks/bench_patches.py: a 1 MiB
diff in about 0.15 s of CPU where the comparing took up to 16 s, or minutes).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from heldout.tasks.file_lines import FileLines

# The largest diff heldout reads (a completion, a task's tests or reference, a SWE-bench
# patch), as UTF-8: 1 MiB, the most an agent's tool call may carry (heldout.episodes.loop).
MAX_DIFF_BYTES = 2**20
# A line number or count of up to 18 digits (int() of a longer one is slow, and refused past
# 4300 digits); no file has more lines.
_HUNK = re.compile(r"@@ -(\d{1,18})(?:,(\d{1,18}))? \+(\d{1,18})(?:,(\d{1,18}))? @@")
_NO_NEWLINE = "\\ No newline at end of file"
SYMLINK_MODE = "120000"


class PatchError(ValueError):
    """A diff that cannot be read or does not apply; says where."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_lines: tuple[str, ...]  # the lines it replaces, with their line ends
    new_lines: tuple[str, ...]


@dataclass(frozen=True)
class FilePatch:
    """One file's change. `path` is where the file ends up (its old path when deleted);
    `old_path` differs from it for a rename."""

    path: str
    old_path: str
    hunks: tuple[Hunk, ...] = ()
    created: bool = False
    deleted: bool = False
    mode: str | None = None  # the new mode git names ("100755", "120000" for a symlink)
    binary: bool = False

    @property
    def symlink(self) -> bool:
        return self.mode == SYMLINK_MODE

    @property
    def paths(self) -> set[str]:
        return {self.path, self.old_path}


def _strip_prefix(name: str) -> str | None:
    name = name.strip().split("\t")[0]
    if name == "/dev/null":
        return None
    if name.startswith('"'):
        raise PatchError(f"quoted path {name}: heldout reads only plain paths")
    return name[2:] if name[:2] in ("a/", "b/") else name


def oversized(text: str, what: str = "the diff") -> str | None:
    """Why `text` is too large a diff for heldout, in one line; None when it is not. (Past
    MAX_DIFF_BYTES characters it is not encoded: it has at least as many bytes.)"""
    if len(text) > MAX_DIFF_BYTES:
        size = f"{len(text):,}" if text.isascii() else f"at least {len(text):,}"
    else:
        encoded = len(text.encode("utf-8", "surrogatepass"))
        if encoded <= MAX_DIFF_BYTES:
            return None
        size = f"{encoded:,}"
    return (f"{what} is {size} bytes; heldout reads a diff of at most {MAX_DIFF_BYTES:,} "
            "bytes (1 MiB)")


def parse_patch(text: str) -> list[FilePatch]:
    """The file patches of a unified diff, in order. Raises PatchError, for a diff larger
    than MAX_DIFF_BYTES too."""
    too_large = oversized(text)
    if too_large:
        raise PatchError(too_large)
    lines = text.splitlines(keepends=True)
    patches: list[FilePatch] = []
    index = 0
    while index < len(lines):
        if lines[index].startswith("diff --git ") or lines[index].startswith("--- "):
            patch, index = _file_patch(lines, index)
            patches.append(patch)
        else:
            index += 1
    return patches


def _file_patch(lines: list[str], index: int) -> tuple[FilePatch, int]:
    start = index
    old = new = None
    git_paths: tuple[str, str] | None = None
    created = deleted = binary = False
    mode = None
    if lines[index].startswith("diff --git "):
        words = lines[index].split()
        if len(words) == 4:
            git_paths = (_strip_prefix(words[2]) or "", _strip_prefix(words[3]) or "")
        index += 1
        while index < len(lines) and not lines[index].startswith(("--- ", "diff --git ", "@@")):
            line = lines[index].rstrip("\n")
            if line.startswith("new file mode "):
                created, mode = True, line.split()[-1]
            elif line.startswith("deleted file mode "):
                deleted = True
            elif line.startswith("new mode "):
                mode = line.split()[-1]
            elif line.startswith("rename from "):
                old = line.removeprefix("rename from ")
            elif line.startswith("rename to "):
                new = line.removeprefix("rename to ")
            elif line.startswith(("Binary files ", "GIT binary patch")):
                binary = True
            index += 1
    if index < len(lines) and lines[index].startswith("--- "):
        old_name = _strip_prefix(lines[index][4:])
        if index + 1 >= len(lines) or not lines[index + 1].startswith("+++ "):
            raise PatchError(f"line {index + 2}: expected '+++ ' after '--- '")
        new_name = _strip_prefix(lines[index + 1][4:])
        created = created or old_name is None
        deleted = deleted or new_name is None
        old = old or old_name or new_name
        new = new or new_name or old_name
        index += 2
    if git_paths is not None:
        old, new = old or git_paths[0], new or git_paths[1]
    if not old or not new:
        raise PatchError(f"line {start + 1}: a file's diff without its paths")
    hunks = []
    while index < len(lines) and lines[index].startswith("@@"):
        hunk, index = _hunk(lines, index)
        hunks.append(hunk)
    return FilePatch(path=old if deleted else new, old_path=old, hunks=tuple(hunks),
                     created=created, deleted=deleted, mode=mode, binary=binary), index


def _hunk(lines: list[str], index: int) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[index])
    if not match:
        raise PatchError(f"line {index + 1}: not a hunk header: {lines[index].strip()[:80]}")
    old_count = int(match[2]) if match[2] is not None else 1
    new_count = int(match[4]) if match[4] is not None else 1
    old_lines: list[str] = []
    new_lines: list[str] = []
    index += 1
    while (len(old_lines) < old_count or len(new_lines) < new_count) and index < len(lines):
        line = lines[index]
        body = line[1:] if line[:1] in (" ", "-", "+") else None
        if line in ("\n", "\r\n"):  # an empty context line whose space an editor removed
            body, line = line, " " + line
        if body is None:
            raise PatchError(f"line {index + 1}: a hunk ends before its stated length")
        if line[0] in (" ", "-"):
            old_lines.append(body)
        if line[0] in (" ", "+"):
            new_lines.append(body)
        index += 1
        if index < len(lines) and lines[index].rstrip("\r\n") == _NO_NEWLINE:
            _drop_newline(line[0], old_lines, new_lines)
            index += 1
    if len(old_lines) != old_count or len(new_lines) != new_count:
        raise PatchError(f"line {index}: a hunk ends before its stated length")
    return Hunk(int(match[1]), tuple(old_lines), tuple(new_lines)), index


def _drop_newline(sign: str, old_lines: list[str], new_lines: list[str]) -> None:
    for side, signs in ((old_lines, " -"), (new_lines, " +")):
        if sign in signs and side:
            side[-1] = side[-1].rstrip("\n")


def apply_patch(tree: dict[str, str], patches: list[FilePatch]) -> dict[str, str]:
    """A new tree: `tree` with every patch applied. Raises PatchError naming the first file
    that does not apply (a binary patch, a missing file, a hunk whose context differs).

    A file is split into lines once, however many of the diff's sections change it (again
    only where a section left a line without its line end inside it), and joined once at the
    end."""
    result: dict[str, str | FileLines] = dict(tree)
    for patch in patches:
        if patch.binary:
            raise PatchError(f"{patch.path}: a binary patch; heldout applies text diffs only")
        if patch.created:
            if patch.path in result:
                raise PatchError(f"{patch.path}: created by the diff but already there")
            before: str | FileLines = ""
        elif patch.old_path not in result:
            raise PatchError(f"{patch.old_path}: changed by the diff but not in the tree")
        else:
            before = result[patch.old_path]
        after = _apply_hunks(before, patch) if patch.hunks else before
        if patch.old_path != patch.path or patch.deleted:
            result.pop(patch.old_path, None)
        if not patch.deleted:
            result[patch.path] = after
    return {path: text if isinstance(text, str) else text.text()
            for path, text in result.items()}


def _apply_hunks(before: str | FileLines, patch: FilePatch) -> FileLines:
    if isinstance(before, FileLines) and before.unsplit:
        before = before.text()  # as the file reads now: what an earlier section left unsplit
    lines = FileLines(before) if isinstance(before, str) else before
    offset = 0
    for number, hunk in enumerate(patch.hunks, start=1):
        stated = max(hunk.old_start - 1, 0) + offset if hunk.old_lines else hunk.old_start + offset
        at = lines.find(hunk.old_lines, stated)
        if at is None:
            raise PatchError(f"{patch.path}: hunk {number} (at line {hunk.old_start}) does not "
                             "match the file")
        lines.replace(at, len(hunk.old_lines), hunk.new_lines)
        offset += len(hunk.new_lines) - len(hunk.old_lines)
    return lines


def diff_trees(before: dict[str, str], after: dict[str, str], context: int = 3) -> str:
    """The `git diff` of two trees, files in path order: what `git diff` would print after
    editing `before` into `after` (text files, no renames)."""
    parts = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        header = [f"diff --git a/{path} b/{path}\n"]
        if old is None:
            header.append("new file mode 100644\n")
        elif new is None:
            header.append("deleted file mode 100644\n")
        body = list(difflib.unified_diff(
            (old or "").splitlines(keepends=True), (new or "").splitlines(keepends=True),
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}", n=context))
        parts += header + [_ended(line) for line in body]
    return "".join(parts)


def _ended(line: str) -> str:
    return line if line.endswith("\n") else line + "\n" + _NO_NEWLINE + "\n"


def written_lines(before: str, after: str) -> set[int]:
    """The line numbers (from 1) of `after` that the change from `before` wrote."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(),
                                      autojunk=False)
    return {line + 1 for tag, _, _, start, end in matcher.get_opcodes() if tag != "equal"
            for line in range(start, end)}
