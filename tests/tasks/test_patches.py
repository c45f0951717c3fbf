"""heldout.tasks.patches applies a hunk exactly where the slicing search it replaced did (the
nearest place to its stated line whose lines equal the hunk's, ties in that search's order),
in work linear in the diff and the file, and refuses a diff larger than MAX_DIFF_BYTES."""

from __future__ import annotations

import random
import time

import pytest

from heldout.tasks import patches
from heldout.tasks.file_lines import FileLines
from heldout.tasks.patches import (
    MAX_DIFF_BYTES,
    FilePatch,
    Hunk,
    PatchError,
    apply_patch,
    parse_patch,
)


def slicing_apply(tree: dict[str, str], file_patches: list[FilePatch]) -> dict[str, str]:
    """apply_patch as it was before the search was indexed: the oracle."""
    result = dict(tree)
    for patch in file_patches:
        if patch.binary:
            raise PatchError(f"{patch.path}: a binary patch; heldout applies text diffs only")
        if patch.created:
            if patch.path in result:
                raise PatchError(f"{patch.path}: created by the diff but already there")
            before = ""
        elif patch.old_path not in result:
            raise PatchError(f"{patch.old_path}: changed by the diff but not in the tree")
        else:
            before = result[patch.old_path]
        lines = before.splitlines(keepends=True)
        offset = 0
        for number, hunk in enumerate(patch.hunks, start=1):
            stated = (max(hunk.old_start - 1, 0) + offset if hunk.old_lines
                      else hunk.old_start + offset)
            at = slicing_find(lines, hunk.old_lines, stated)
            if at is None:
                raise PatchError(f"{patch.path}: hunk {number} (at line {hunk.old_start}) does "
                                 "not match the file")
            lines[at:at + len(hunk.old_lines)] = hunk.new_lines
            offset += len(hunk.new_lines) - len(hunk.old_lines)
        if patch.old_path != patch.path or patch.deleted:
            result.pop(patch.old_path, None)
        if not patch.deleted:
            result[patch.path] = "".join(lines)
    return result


def slicing_find(lines: list[str], wanted: tuple[str, ...], stated: int) -> int | None:
    size = len(wanted)
    for distance in range(len(lines) + 1):
        for at in {stated - distance, stated + distance}:
            if 0 <= at <= len(lines) - size and tuple(lines[at:at + size]) == wanted:
                return at
    return None


def outcome(apply, tree: dict[str, str], file_patches: list[FilePatch]) -> object:
    try:
        return apply(tree, file_patches)
    except PatchError as error:
        return f"PatchError: {error}"


def one_hunk(text: str, old: str, new: str, old_start: int) -> dict[str, str] | str:
    """apply_patch of one hunk (lines given as strings of letters) on `text`, checked against
    the oracle; the tree or the error."""
    hunk = Hunk(old_start, tuple(f"{c}\n" for c in old), tuple(f"{c}\n" for c in new))
    patch = [FilePatch("f", "f", (hunk,))]
    tree = {"f": "".join(f"{c}\n" for c in text)}
    found = outcome(apply_patch, tree, patch)
    assert found == outcome(slicing_apply, tree, patch)
    return found if isinstance(found, str) else found["f"].replace("\n", "")


@pytest.fixture(params=[(8, 512), (0, 2)], ids=["as-shipped", "index-only-small-blocks"])
def nearby(request, monkeypatch):
    """Each case twice: as shipped, and with every search past the stated line made through
    the index (NEARBY 0) of blocks of 2 lines, so that small files exercise both."""
    monkeypatch.setattr(FileLines, "NEARBY", request.param[0])
    monkeypatch.setattr(FileLines, "BLOCK", request.param[1])


def test_a_hunk_lands_where_the_slicing_search_put_it(nearby):
    assert one_hunk("abcabc", "bc", "X", 5) == "abcaX"  # at its stated line
    assert one_hunk("abcabc", "bc", "X", 4) == "abcaX"  # one below the second bc: nearest
    assert one_hunk("abcabc", "bc", "X", 3) == "aXabc"  # one above the first: nearest
    assert one_hunk("xaxxxax", "a", "B", 4) == "xBxxxax"  # 2 above, 2 below: the one above
    assert one_hunk("xxxxxxaxa", "a", "B", 8) == "xxxxxxaxB"  # but here the one below: the
    # slicing search tried {stated - d, stated + d} in the set's order, {6, 8} 8 first
    assert one_hunk("aaaa", "aa", "B", 2) == "aBa"
    assert one_hunk("abab", "ba", "X", 1) == "aXb"  # repeated context, overlapping places
    assert one_hunk("abc", "", "X", 0) == "Xabc"  # an insertion: at its line, or the nearest
    assert one_hunk("abc", "", "X", 3) == "abcX"
    assert one_hunk("abc", "", "X", 5) == "abcX"
    assert one_hunk("abc", "", "X", 7).startswith("PatchError")  # farther than the file is long
    assert one_hunk("abc", "c", "X", 1) == "abX"  # at the end of the file
    assert one_hunk("abc", "cd", "X", 3).startswith("PatchError: f: hunk 1 (at line 3)")
    assert one_hunk("ab", "b", "X", 9).startswith("PatchError")  # stated past reach: refused
    assert one_hunk("", "a", "X", 1).startswith("PatchError")


def test_later_hunks_and_sections_search_the_file_as_earlier_ones_left_it(nearby):
    text = "".join(f"{c}\n" for c in "abcdefabcdef")
    diff = ("--- a/f\n+++ b/f\n@@ -2,1 +2,3 @@\n-b\n+x\n+y\n+z\n@@ -3,2 +5,1 @@\n x\n-y\n"
            "@@ -1,1 +1,0 @@\n-a\n--- a/f\n+++ b/f\n@@ -9,1 +9,1 @@\n-c\n+C\n")
    file_patches = parse_patch(diff)
    assert len(file_patches) == 2
    applied = apply_patch({"f": text}, file_patches)
    assert applied == slicing_apply({"f": text}, file_patches)
    assert applied["f"].replace("\n", "") == "xzcdefabCdef"  # hunk 3 went back above hunk 1


def test_random_diffs_apply_as_the_slicing_search_applied_them(nearby):
    draw = random.Random(20240611)
    for _ in range(1500):
        alphabet = "ab\n " if draw.random() < 0.5 else "abcdef"
        file_lines = [draw.choice(alphabet) + "\n" for _ in range(draw.randrange(0, 40))]
        sections = []
        for _ in range(draw.randrange(1, 3)):
            hunks = []
            for _ in range(draw.randrange(1, 5)):
                size = draw.randrange(0, 4)
                if file_lines and draw.random() < 0.7:  # taken from the file: it matches
                    start = draw.randrange(0, len(file_lines))
                    old = tuple(file_lines[start:start + size])
                else:
                    old = tuple(draw.choice(alphabet) + "\n" for _ in range(size))
                new = tuple(draw.choice("XYZ") + "\n" for _ in range(draw.randrange(0, 4)))
                hunks.append(Hunk(draw.randrange(0, len(file_lines) + 8), old, new))
            sections.append(FilePatch("f", "f", tuple(hunks)))
        if draw.random() < 0.2:
            file_lines[-1:] = [file_lines[-1].rstrip("\n")] if file_lines else []
        tree = {"f": "".join(file_lines), "g": "other\n"}
        assert outcome(apply_patch, tree, sections) == outcome(slicing_apply, tree, sections)


def test_renames_creations_and_deletions_apply_as_before():
    tree = {"a.py": "one\ntwo\nthree\n", "b.py": "gone\n"}
    diff = ("diff --git a/a.py b/c.py\nrename from a.py\nrename to c.py\n--- a/a.py\n+++ b/c.py\n"
            "@@ -2 +2 @@\n-two\n+TWO\ndiff --git a/b.py b/b.py\ndeleted file mode 100644\n"
            "--- a/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\ndiff --git a/n.py b/n.py\n"
            "new file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1 @@\n+new\n"
            "\\ No newline at end of file\n")
    applied = apply_patch(tree, parse_patch(diff))
    assert applied == slicing_apply(tree, parse_patch(diff))
    assert applied == {"c.py": "one\nTWO\nthree\n", "n.py": "new"}


def big_diff(lines: int = 40_000, every: int = 16, off: int | None = 200,
             period: int = 500) -> tuple[dict[str, str], str]:
    """A large file (its lines repeating every `period`) and a diff close to 1 MiB of a hunk
    every `every` lines (3 lines of context either side of one line made two), each stating
    a line `off` lines below its own (None: all stating line 1, as a model may): every hunk is
    searched for, none is at its line."""
    before = [f"    value_{n % period} = compute({n % period}, key='{n % period}')\n"
              for n in range(lines)]
    parts = ["diff --git a/big.py b/big.py\n--- a/big.py\n+++ b/big.py\n"]
    for number, changed in enumerate(range(3, lines - 3, every)):
        first = changed - 3 + 1  # its first line of context, counted from 1
        stated = 1 if off is None else first + off
        parts.append(f"@@ -{stated},7 +{first + number},8 @@\n")
        parts += [f" {line}" for line in before[changed - 3:changed]]
        parts += [f"-{before[changed]}", f"+{before[changed].replace('compute', 'first')}",
                  f"+{before[changed].replace('compute', 'second')}"]
        parts += [f" {line}" for line in before[changed + 1:changed + 4]]
    return {"big.py": "".join(before)}, "".join(parts)


@pytest.mark.parametrize("shape", [{"off": 200}, {"off": None, "period": 40_000, "every": 17}],
                         ids=["200-lines-off", "all-at-line-1"])
def test_a_megabyte_diff_compares_a_hunk_at_a_bounded_number_of_places(monkeypatch, shape):
    tree, diff = big_diff(**shape)
    assert 0.9 * MAX_DIFF_BYTES < len(diff.encode()) <= MAX_DIFF_BYTES
    started = time.process_time()
    file_patches = parse_patch(diff)
    apply_patch(tree, file_patches)
    # CPU seconds, so a loaded machine hardly moves it: about 0.15 here (the slicing search:
    # 0.3 s and 16 s; benchmarks/bench_patches.py measures both).
    assert time.process_time() - started < 1.0
    hunks = len(file_patches[0].hunks)
    compared = 0
    matches = FileLines.matches

    def counted(self, at, wanted):
        nonlocal compared
        compared += 1
        return matches(self, at, wanted)

    monkeypatch.setattr(FileLines, "matches", counted)
    applied = apply_patch(tree, file_patches)
    assert applied["big.py"].count("first") == applied["big.py"].count("second") == hunks
    # The slicing search compared a hunk at every place from its stated line to its own:
    # 2 x 200 + 1 places, or up to the whole file from line 1. Now: the NEARBY lines either
    # side of the stated one, then a few places of its rarest line, nearest first.
    assert compared <= hunks * (2 * FileLines.NEARBY + 1 + 4)
    monkeypatch.setattr(FileLines, "NEARBY", 0)  # through the index alone
    compared = 0
    assert apply_patch(tree, file_patches) == applied
    assert compared <= hunks * (1 + 4)


def test_a_diff_over_the_cap_is_refused_in_one_line():
    line = "+" + "x" * 99 + "\n"
    diff = "--- a/f\n+++ b/f\n@@ -0,0 +1,11000 @@\n" + line * 11_000
    assert len(diff) > MAX_DIFF_BYTES
    with pytest.raises(PatchError) as refused:
        parse_patch(diff)
    assert str(refused.value) == (f"the diff is {len(diff):,} bytes; heldout reads a "
                                  "diff of at most 1,048,576 bytes (1 MiB)")
    wide = "é" * (MAX_DIFF_BYTES // 2 + 1)  # fewer characters than the cap, more bytes
    assert patches.oversized(wide) == ("the diff is 1,048,578 bytes; heldout reads a diff of at "
                                       "most 1,048,576 bytes (1 MiB)")
    assert patches.oversized("é" * (MAX_DIFF_BYTES + 1), "patch") == (  # not encoded
        "patch is at least 1,048,577 bytes; heldout reads a diff of at most 1,048,576 bytes "
        "(1 MiB)")
    assert patches.oversized("x" * MAX_DIFF_BYTES) is None


def test_a_hunk_header_with_a_huge_number_is_a_patch_error():
    with pytest.raises(PatchError, match="not a hunk header"):
        parse_patch("--- a/f\n+++ b/f\n@@ -" + "9" * 5000 + " +1 @@\n-a\n+b\n")
