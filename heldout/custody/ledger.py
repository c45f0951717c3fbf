"""The test-access ledger: one hash-chained, HMAC'd JSON line per attempt to open the test split.

Every line carries the hash of the line before it, so editing or deleting a line breaks the
chain at a place `heldout audit` can name. A hash chain alone is no lock: anyone can edit every
line and recompute it. So each line also carries a MAC of its hash under the test key (the key
that opens the test split, heldout.custody.keys): rewriting or forging a line needs the key.
Only a refused attempt may be written without it, because the stage that is refused (the guard
in a stage without the key) must still be able to say so; such a line grants nothing, and once
a keyed line follows it, the chain pins it too.

Appends happen under a file lock: two processes cannot interleave lines or fork the chain.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from heldout.canonical import canonical_json, sha256_hex
from heldout.custody.keys import KeyRing, TestKey, TestKeyError, load_keys
from heldout.errors import HeldoutError

GENESIS = "0" * 64
OUTCOMES = ("opened", "resumed", "refused", "closed", "aborted")
UNAUTHENTICATED_OUTCOMES = ("refused",)
_UNHASHED = ("hash", "mac")
_MAC_PURPOSE = "ledger"


class LedgerError(HeldoutError):
    """A ledger line the protocol does not allow to be written."""


def line_hash(entry: dict[str, Any]) -> str:
    """The chain hash: every field but the hash and the MAC, so `prev_hash` and `key_id` are
    covered and the MAC (over this hash) covers them too."""
    return sha256_hex(canonical_json({k: v for k, v in entry.items() if k not in _UNHASHED}))


def line_mac(key: TestKey, chain_hash: str) -> str:
    return hmac.new(key.derive(_MAC_PURPOSE), chain_hash.encode("ascii"), "sha256").hexdigest()


def read_ledger(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def parsed_lines(text: str) -> list[dict[str, Any]]:
    """The lines of a ledger that are JSON objects, skipping the rest: what an audit can still
    cross-check in a ledger whose chain it has already found broken."""
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def append(path: Path, fields: dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]],
           key: TestKey | None = None) -> dict[str, Any]:
    """Append one entry, chained to the last and MAC'd under `key` (else the current key of
    `load_keys()`, if there is one); returns it. Without a key only a refused attempt can be
    written: anything else raises TestKeyError. `fields` may be a function of the entries, called
    under the file lock, so a line decided on them (is this access still open?) cannot race
    another writer; it raises to write nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        entries = read_ledger(path)
        if callable(fields):
            fields = fields(entries)
        if fields.get("outcome") not in OUTCOMES:
            raise LedgerError(f"outcome {fields.get('outcome')!r} is not one of "
                              f"{', '.join(OUTCOMES)}")
        if key is None:
            key = _available_key(fields.get("outcome"))
        last = entries[-1] if entries else None
        entry = {
            **fields,
            "seq": (last["seq"] + 1) if last else 1,
            "prev_hash": last["hash"] if last else GENESIS,
            "key_id": key.key_id if key else None,
        }
        entry["hash"] = line_hash(entry)
        entry["mac"] = line_mac(key, entry["hash"]) if key else None
        with path.open("a", encoding="utf-8") as ledger:
            ledger.write(canonical_json(entry) + "\n")
            ledger.flush()
    return entry


def _available_key(outcome: Any) -> TestKey | None:
    try:
        return load_keys().current
    except TestKeyError as error:
        if outcome in UNAUTHENTICATED_OUTCOMES:
            return None
        raise TestKeyError(f"a ledger line with outcome {outcome!r} is MAC'd under the test "
                           f"key, and there is none here: {error}") from None


@dataclass(frozen=True)
class ChainBreak:
    line: int
    reason: str


def verify_chain(path: Path, ring: KeyRing | None) -> ChainBreak | None:
    """The first line where the chain or its MACs break, or None when both hold. Without a
    ring the MACs are not checked (the audit says so); a missing MAC still is."""
    return verify_text(path.read_text(encoding="utf-8"), ring)


def verify_text(text: str, ring: KeyRing | None) -> ChainBreak | None:
    previous = GENESIS
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            entry = json.loads(raw)
        except json.JSONDecodeError:
            return ChainBreak(number, "not JSON")
        if not isinstance(entry, dict):
            return ChainBreak(number, "not a JSON object")
        reason = _chain_reason(entry, number, previous) or _mac_reason(entry, ring)
        if reason:
            return ChainBreak(number, reason)
        previous = entry["hash"]
    return None


def _chain_reason(entry: dict[str, Any], number: int, previous: str) -> str | None:
    if entry.get("prev_hash") != previous:
        return ("prev_hash does not match the line before: a line was deleted, inserted or "
                "reordered")
    if line_hash(entry) != entry.get("hash"):
        return "hash does not match the line's content: it was edited"
    if entry.get("seq") != number:
        return f"seq {entry.get('seq')} where {number} belongs"
    if entry.get("outcome") not in OUTCOMES:
        return f"outcome {entry.get('outcome')!r} is not one of {', '.join(OUTCOMES)}"
    return None


def _mac_reason(entry: dict[str, Any], ring: KeyRing | None) -> str | None:
    mac, wanted = entry.get("mac"), entry.get("key_id")
    if mac is None:
        if entry["outcome"] in UNAUTHENTICATED_OUTCOMES:
            return None
        return (f"the line has no MAC, and only a refused attempt may be written without the "
                f"test key: this {entry['outcome']!r} line was written or rewritten without it")
    if ring is None:
        return None
    key = ring.by_id(wanted) if isinstance(wanted, str) else None
    if key is None:
        return (f"written under test key {wanted}, which is not among the keys here: add it to "
                "HELDOUT_TEST_KEY")
    expected = line_mac(key, entry["hash"]).encode()
    if not isinstance(mac, str) or not hmac.compare_digest(mac.encode(), expected):
        return (f"the line's MAC does not verify under test key {wanted}: it was written or "
                "rewritten without the test key")
    return None
