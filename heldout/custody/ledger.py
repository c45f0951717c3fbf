"""The test-access ledger: one hash-chained JSON line per attempt to open the test split.

Every line carries the hash of the line before it, so editing or deleting a line breaks the
chain at a place `heldout audit` can name. Appends happen under a file lock: two processes
cannot interleave lines or fork the chain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from heldout.canonical import canonical_json, sha256_hex

GENESIS = "0" * 64
OUTCOMES = ("opened", "resumed", "refused", "closed")


def line_hash(entry: dict[str, Any]) -> str:
    return sha256_hex(canonical_json({k: v for k, v in entry.items() if k != "hash"}))


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def append(path: Path, fields: dict[str, Any]) -> dict[str, Any]:
    """Append one entry, chained to the last; returns it with its seq and hashes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        entries = read_ledger(path)
        last = entries[-1] if entries else None
        entry = {
            **fields,
            "seq": (last["seq"] + 1) if last else 1,
            "prev_hash": last["hash"] if last else GENESIS,
        }
        entry["hash"] = line_hash(entry)
        with path.open("a", encoding="utf-8") as ledger:
            ledger.write(canonical_json(entry) + "\n")
            ledger.flush()
    return entry


@dataclass(frozen=True)
class ChainBreak:
    line: int
    reason: str


def verify_chain(path: Path) -> ChainBreak | None:
    """The first line where the chain breaks, or None when it is whole."""
    previous = GENESIS
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            entry = json.loads(raw)
        except json.JSONDecodeError:
            return ChainBreak(number, "not JSON")
        if entry.get("prev_hash") != previous:
            return ChainBreak(number, "prev_hash does not match the line before: a line was "
                                      "deleted, inserted or reordered")
        if line_hash(entry) != entry.get("hash"):
            return ChainBreak(number, "hash does not match the line's content: it was edited")
        if entry.get("seq") != number:
            return ChainBreak(number, f"seq {entry.get('seq')} where {number} belongs")
        previous = entry["hash"]
    return None
