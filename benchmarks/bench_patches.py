"""Applying a diff, by hand: `.venv/bin/python benchmarks/bench_patches.py`.

CPU seconds (time.process_time, the best of ROUNDS) to parse and apply large diffs to a
40,000-line file, heldout.tasks.patches as it is against the slicing search it replaced
(tests/tasks/test_patches.py keeps it as the oracle its results are checked against), in the
same run:

1. 1 MiB (close to MAX_DIFF_BYTES) of 2,500 hunks, each at its stated line (a file whose lines
   repeat every 500);
2. the same diff with every hunk stated 200 lines below its place;
3. 176 KiB of 400 hunks on a file of distinct lines, each stated 2,000 lines below its place;
4. the same with every hunk stated at line 1 (a model's line numbers), and 5. 1 MiB of them;
6. case 1 with a last hunk that matches nowhere: refused after the file is searched for it;
7. 1 MiB of one-line hunks all stated at line 1, alternately at the top and the bottom of a
   file of distinct lines (adversarial: each hunk is found far from the one before).
`old s` is one round of parsing and applying with the slicing search, stopped past OLD_LIMIT_S.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the slicing search and the diffs are the tests'

from heldout.tasks.patches import MAX_DIFF_BYTES, PatchError, apply_patch, parse_patch  # noqa: E402
from tests.tasks.test_patches import big_diff, slicing_apply  # noqa: E402

ROUNDS = 3
OLD_LIMIT_S = 60.0


def refused_at_the_end(diff: str) -> str:
    return diff + "@@ -39990,1 +39990,1 @@\n-no such line\n+at all\n"


def alternating(lines: int = 40_000) -> tuple[dict[str, str], str]:
    """A file of distinct lines and 1 MiB of one-line hunks all stated at line 1, alternately
    at the top and at the bottom of the file: each is found far from the one before."""
    before = [f"    line_{n} = {n}\n" for n in range(lines)]
    parts = ["--- a/big.py\n+++ b/big.py\n"]
    top, bottom, size = 0, lines - 1, 0
    while size < MAX_DIFF_BYTES - 200:
        at, top, bottom = (top, top + 1, bottom) if len(parts) % 2 else (bottom, top, bottom - 1)
        parts.append(f"@@ -1,1 +1,1 @@\n-{before[at]}+{before[at].replace('line', 'LINE')}")
        size += len(parts[-1])
    return {"big.py": "".join(before)}, "".join(parts)


def cpu(call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        with contextlib.suppress(PatchError):  # a refusal is timed as much as an application
            call()
        best = min(best, time.process_time() - started)
    return best


def _old(tree: dict[str, str], diff: str, out) -> None:
    started = time.process_time()
    with contextlib.suppress(PatchError):
        slicing_apply(tree, parse_patch(diff))
    out.put(time.process_time() - started)


def old_cpu(tree: dict[str, str], diff: str) -> float | None:
    """The slicing search's CPU seconds (one round), or None past OLD_LIMIT_S."""
    results: multiprocessing.Queue = multiprocessing.Queue()
    worker = multiprocessing.Process(target=_old, args=(tree, diff, results))
    worker.start()
    worker.join(OLD_LIMIT_S)
    if worker.is_alive():
        worker.kill()
        worker.join()
        return None
    return results.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-old", action="store_true", help="time heldout's search only")
    options = parser.parse_args()
    tree, at_lines = big_diff(off=0)
    cases = {
        "1 MiB, at their lines": (tree, at_lines),
        "1 MiB, 200 lines off": big_diff(),
        "176 KiB, 2,000 lines off": big_diff(every=100, off=2000, period=40_000),
        "176 KiB, all at line 1": big_diff(every=100, off=None, period=40_000),
        "1 MiB, all at line 1": big_diff(every=17, off=None, period=40_000),
        "1 MiB, last hunk refused": (tree, refused_at_the_end(at_lines)),
        "1 MiB, alternating ends": alternating(),
    }
    print(f"{'case':28} {'bytes':>9} {'hunks':>6} {'parse s':>8} {'apply s':>8} {'old s':>8}")
    for name, (files, diff) in cases.items():
        parsed = parse_patch(diff)
        old = None if options.no_old else old_cpu(files, diff)
        shown = "-" if options.no_old else f"> {OLD_LIMIT_S:.0f}" if old is None else f"{old:.3f}"
        print(f"{name:28} {len(diff.encode()):>9,} {sum(len(p.hunks) for p in parsed):>6,} "
              f"{cpu(lambda d=diff: parse_patch(d)):>8.3f} "
              f"{cpu(lambda f=files, p=parsed: apply_patch(f, p)):>8.3f} {shown:>8}")


if __name__ == "__main__":
    main()
