"""How much memory one hostile or oversized input costs heldout (issue 39, item 7): each input
read in a child process of its own, its peak resident memory above what the child held before
(tests/memory.py).

Run by hand: PYTHONPATH=. .venv/bin/python benchmarks/bench_input_memory.py [--scale 1.0]
(--scale shrinks every input for a quick look; the figures in docs/samples.md are at 1.0).
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.memory import peak_growth_mib

MIB = 1 << 20

def growth(reader: str, path: Path) -> str:
    mib, outcome = peak_growth_mib(reader, path)
    return f"{mib:6d} MiB  {outcome.replace(str(path) + ': ', '')[:80]}"


def inputs(folder: Path, scale: float) -> dict[str, tuple[str, Path]]:
    size = max(int(64 * scale), 1)
    made = {}

    bomb = folder / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as file:
        for _ in range(2 * size):
            file.write(b" " * MIB)
    made[f"gzip samples, {bomb.stat().st_size // 1024} KiB unpacking to {2 * size} MiB"] = (
        "samples", bomb)

    plain = folder / "plain.jsonl"
    line = json.dumps({"task_id": "HumanEval/0", "completion": "#" * (MIB - 40)}) + "\n"
    completions = max(size - 4, 1)
    plain.write_text(line * completions)
    made[f"samples of {completions} MiB, 1 MiB completions"] = ("samples", plain)

    tiny = folder / "tiny.jsonl"
    short = b'{"task_id": "HumanEval/0", "completion": ""}\n'
    tiny.write_bytes(short * (size * MIB // len(short)))
    made[f"samples of {size} MiB, {size * MIB // len(short):,} empty completions"] = (
        "samples", tiny)

    answer = folder / "answer.json"
    answer.write_bytes(b"[" + b"[]," * (8 * MIB // 3) + b"[]]")
    made["an endpoint answer at the 8 MiB bound, all `[],`"] = ("answer", answer)

    rows = max(int(100_000 * scale), 10)
    rollouts = folder / "rollouts.parquet"
    everywhere = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)),
                                                pa.array(["x" * MIB]))
    pq.write_table(pa.table({"task_id": pa.array([f"T/{i}" for i in range(rows)]),
                             "sample": pa.array(np.zeros(rows, dtype=np.int64)),
                             "harness": pa.array(["h"] * rows), "passed": np.zeros(rows, bool),
                             "status": pa.array(["ok"] * rows), "completion": everywhere,
                             "error": everywhere}), rollouts)
    made[f"rollouts, {rollouts.stat().st_size // 1024} KiB with {rows:,} MiB of completions"] = (
        "rollouts", rollouts)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    scale = parser.parse_args().scale
    with tempfile.TemporaryDirectory() as folder:
        for name, (reader, path) in inputs(Path(folder), scale).items():
            print(f"{name:58s} {growth(reader, path)}")


if __name__ == "__main__":
    main()
