"""What the test-split guard costs every other open: 20,000 open() of an unrelated file, before
and after heldout.custody.guard.install_guard, in one process (an audit hook cannot be removed,
so "without" is measured first).

Run by hand: .venv/bin/python benchmarks/guard_overhead.py
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from heldout.custody.guard import SEALED_TEST, install_guard

OPENS = 20_000
REPEATS = 5
AN_HOUR_NS = 3600 * 10**9


def opens_s(path: Path, opens: int, repeats: int) -> float:
    """The best of `repeats` runs of `opens` opens and closes of `path`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(opens):
            with open(path, "rb"):
                pass
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=OPENS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    opens, repeats = args.opens, args.repeats
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / SEALED_TEST).parent.mkdir(parents=True)
        (root / SEALED_TEST).write_bytes(b"sealed")
        # A stage runs long after the split stage wrote the folder; a folder changed in the
        # last two seconds is rescanned at every open (heldout.custody.guard._RACY_NS).
        past = time.time_ns() - AN_HOUR_NS
        os.utime(root / SEALED_TEST.parent, ns=(past, past))
        unrelated = root / "unrelated.txt"
        unrelated.write_text("not the test split\n")

        without = opens_s(unrelated, opens, repeats)
        install_guard(root)
        with_guard = opens_s(unrelated, opens, repeats)

    print(f"{opens:,} opens of an unrelated file, best of {repeats}:")
    print(f"  without the guard  {without:.3f} s  ({without / opens * 1e6:.2f} µs per open)")
    print(f"  with the guard     {with_guard:.3f} s  ({with_guard / opens * 1e6:.2f} µs per open)")
    print(f"  ratio              {with_guard / without:.2f}×")


if __name__ == "__main__":
    main()
