"""A file's lines as heldout.tasks.patches applies hunks to them: held in blocks, so that a hunk
is replaced where it is and searched for through an index, in work that does not grow with
the file's length for every hunk, with exactly the results of the search it replaced (which
compared the hunk with the file at every line from its stated one, outward)."""

from __future__ import annotations

import bisect
import contextlib
from collections import Counter
from collections.abc import Iterator
from itertools import accumulate, chain


class FileLines:
    """A file's lines in blocks of about BLOCK lines, so that a hunk is replaced in the block
    where it is (its lines and the block's, not the file's, are copied) and the file is
    searched block by block.

    `find` is where a hunk applies, exactly where the slicing search it replaces found it
    (the nearest place to the stated line whose lines equal the hunk's; at one distance, in
    the order of the set {stated - d, stated + d}, that search's quirk kept so that no
    verdict moves). The stated line and the NEARBY lines around it are tried in place; past
    them, the places of the hunk's rarest line (the file's lines counted on the first such
    search, the count kept as hunks apply) are read block by block, nearest first (a block's
    set of lines made when it is first searched after it last changed), and the hunk is
    compared there only. So a hunk costs its lines, a block or two and at most a pass over
    the blocks; the file's lines are read once. (Only a hunk each of whose lines is in the file
    many times, that matches far from its line, is compared at many places.)"""

    BLOCK = 256
    NEARBY = 8

    def __init__(self, text: str) -> None:
        lines = text.splitlines(keepends=True)
        self.blocks = [lines[at:at + self.BLOCK] for at in range(0, len(lines), self.BLOCK)]
        self.starts = [at for at in range(0, len(lines), self.BLOCK)]  # each block's first line
        self.length = len(lines)
        self.held: list[frozenset[str] | None] = [None] * len(self.blocks)  # each block's lines
        self.counts: Counter[str] | None = None
        # A hunk put a line where the file's text does not end one (a last line without its
        # line end, now followed by another; an empty line; "\r" before "\n"): a later
        # section reads the file split anew, as the file it would have been given.
        self.unsplit = False

    def __len__(self) -> int:
        return self.length

    def text(self) -> str:
        return "".join(chain.from_iterable(self.blocks))

    def _block(self, at: int) -> int:
        """The block that holds line `at` (0 <= at < len(self))."""
        return bisect.bisect_right(self.starts, at) - 1

    def matches(self, at: int, wanted: tuple[str, ...]) -> bool:
        """Whether the lines from `at` are `wanted` (at + len(wanted) <= len(self))."""
        number = self._block(at)
        block, offset = self.blocks[number], at - self.starts[number]
        for line in wanted:
            if offset == len(block):
                number, offset = number + 1, 0
                block = self.blocks[number]
            if block[offset] != line:
                return False
            offset += 1
        return True

    def find(self, wanted: tuple[str, ...], stated: int) -> int | None:
        """Where `wanted` lies: at `stated`, else the nearest place it matches, at most the
        file's length away (as the old search, which tried no farther)."""
        size, length = len(wanted), self.length
        if not size:  # an insertion matches everywhere: the nearest place in the file
            at = min(max(stated, 0), length)
            return at if abs(at - stated) <= length else None
        for distance in range(min(self.NEARBY, length) + 1):
            for at in {stated - distance, stated + distance}:
                if 0 <= at <= length - size and self.matches(at, wanted):
                    return at
        return self._search(wanted, stated) if length > self.NEARBY else None

    def _search(self, wanted: tuple[str, ...], stated: int) -> int | None:
        if self.counts is None:
            self.counts = Counter(chain.from_iterable(self.blocks))
        counts = [self.counts[line] for line in wanted]
        anchor = counts.index(min(counts))  # the hunk's rarest line: the fewest places to try
        if not counts[anchor]:
            return None
        size, length, line = len(wanted), self.length, wanted[anchor]
        ups = (place - anchor for place in self._places(line, max(stated + anchor, 0), 1))
        downs = (place - anchor
                 for place in self._places(line, min(stated + anchor, length) - 1, -1))
        up, down = next(ups, None), next(downs, None)
        while True:
            while up is not None and up < 0:  # its place would begin before the file
                up = next(ups, None)
            while down is not None and down > length - size:  # or end after it
                down = next(downs, None)
            if up is not None and (up > length - size or up - stated > length):
                up = None  # the places only get farther
            if down is not None and (down < 0 or stated - down > length):
                down = None
            if up is None and down is None:
                return None
            if down is None or (up is not None and up - stated < stated - down):
                if self.matches(up, wanted):
                    return up
                up = next(ups, None)
            elif up is None or stated - down < up - stated:
                if self.matches(down, wanted):
                    return down
                down = next(downs, None)
            else:  # as far above as below: the old search's order decides
                distance = up - stated
                found = {at for at in (down, up) if self.matches(at, wanted)}
                for at in {stated - distance, stated + distance}:
                    if at in found:
                        return at
                up, down = next(ups, None), next(downs, None)

    def _places(self, line: str, start: int, step: int) -> Iterator[int]:
        """The lines equal to `line` from `start` on, going up the file (step 1) or down it
        (step -1), nearest first."""
        if not 0 <= start < self.length:
            return
        number = self._block(start)
        while 0 <= number < len(self.blocks):
            held = self.held[number]
            if held is None:
                held = self.held[number] = frozenset(self.blocks[number])
            if line in held:
                block, first, offsets = self.blocks[number], self.starts[number], []
                with contextlib.suppress(ValueError):
                    while True:
                        offsets.append(block.index(line, offsets[-1] + 1 if offsets else 0))
                places = [first + offset for offset in offsets]
                if step > 0:
                    yield from (place for place in places if place >= start)
                else:
                    yield from (place for place in reversed(places) if place <= start)
            number += step

    def replace(self, at: int, size: int, new: tuple[str, ...]) -> None:
        """Lines [at, at + size) replaced by `new` (0 <= at, at + size <= len(self))."""
        blocks, starts = self.blocks, self.starts
        if not blocks:
            blocks.append([])
            starts.append(0)
            self.held.append(None)
        first = self._block(at) if at < self.length else len(blocks) - 1
        last = self._block(at + size - 1) if size else first
        offset, end = at - starts[first], at + size - starts[last]
        before = blocks[first][offset - 1] if offset else (blocks[first - 1][-1] if first else "")
        after = blocks[last][end:end + 1] or (blocks[last + 1][:1] if last + 1 < len(blocks)
                                              else [])
        if self.counts is not None:
            self.counts.subtract(chain.from_iterable(
                blocks[number][offset if number == first else 0:end if number == last else None]
                for number in range(first, last + 1)))
            self.counts.update(new)
        joined = blocks[first][:offset] + list(new) + blocks[last][end:]
        pieces = ([joined] if len(joined) <= 2 * self.BLOCK else
                  [joined[cut:cut + self.BLOCK] for cut in range(0, len(joined), self.BLOCK)])
        pieces = [piece for piece in pieces if piece]
        blocks[first:last + 1] = pieces
        self.held[first:last + 1] = [None] * len(pieces)
        starts[first:] = accumulate(map(len, blocks[first:]), initial=starts[first])
        del starts[len(blocks):]
        self.length += len(new) - size
        meeting = ([before] if at else []) + list(new) + after  # each line and the next
        self.unsplit = self.unsplit or "" in new or not all(
            _splits(text, following) for text, following in zip(meeting, meeting[1:],
                                                               strict=False))


# What str.splitlines ends a line at.
_LINE_ENDS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def _splits(line: str, after: str) -> bool:
    """Whether `line` followed by `after` reads as these two lines when the file is split."""
    return line[-1:] in _LINE_ENDS and not (line[-1:] == "\r" and after[:1] == "\n")
