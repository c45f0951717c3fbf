"""The test-access ledger: one hash-chained, HMAC'd JSON line per attempt to open the test split.

Every line carries the hash of the line before it, so editing or deleting a line breaks the
chain at a place `heldout audit` can name. A hash chain alone is no lock: anyone can edit every
line and recompute it. So each line also carries a MAC of its hash under the test key (the key
that opens the test split, heldout.custody.keys): rewriting or forging a line needs the key.
Only a refused attempt may be written without it, because the stage that is refused (the guard
in a stage without the key) must still be able to say so; such a line grants nothing, and once
a keyed line follows it, the chain pins it too.

The lines live in the ledger store (heldout.custody.store: SQLite in the embedded default, the
team's PostgreSQL when params.custody.ledger_url names it); each append is one transaction that
reads the chain head and writes the next line, so no two writers on any machine interleave lines,
fork the chain or open one access twice. `ledger/test_access.jsonl` is the store's export, for
git (heldout.custody.export).
"""

from __future__ import annotations

import getpass
import hmac
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heldout.canonical import canonical_json, is_safe_text, sha256_hex
from heldout.custody.keys import KeyRing, TestKey, TestKeyError, load_keys
from heldout.custody.store import (
    GENESIS,
    AccessAlreadyOpened,
    LineStore,
    ledger_text,
    open_line_store,
    store_for_export,
)
from heldout.errors import HeldoutError
from heldout.json_lines import LineError, loads_line

OUTCOMES = ("opened", "resumed", "refused", "closed", "aborted", "resolved")
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
    """The lines of the ledger whose export is `path`, from its store (which adopts a committed
    export it does not hold yet)."""
    return LedgerStore.for_export(path).lines()


def parsed_lines(text: str) -> list[dict[str, Any]]:
    """The lines of a ledger that are JSON objects, skipping the rest: what an audit can still
    cross-check in a ledger whose chain it has already found broken."""
    entries = []
    for line in text.splitlines():
        try:
            entry = loads_line(line) if is_safe_text(line) else None
        except LineError:  # not JSON, nested 100,000 deep, a 5,000-digit number: skipped
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def append(path: Path, fields: dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]],
           key: TestKey | None = None) -> dict[str, Any]:
    """Append one entry to the ledger whose export is `path` (LedgerStore.append)."""
    return LedgerStore.for_export(path).append(fields, key)


class AccessRefused(LedgerError):
    """An `opened` line the store refused (the access key was already opened, on this machine
    or another): a `refused` line was written instead; `line` is it."""

    recorded = True

    def __init__(self, message: str, line: dict[str, Any]):
        super().__init__(message)
        self.line = line


Fields = dict[str, Any] | Callable[[list[dict[str, Any]]], dict[str, Any]]


class LedgerStore:
    """The ledger: its lines in a store (heldout.custody.store), each chained and MAC'd here."""

    def __init__(self, store: LineStore):
        self.store = store
        self.where = store.where
        self.export = store.export
        store.adopt(_export_texts(store.export), _adoptable)

    @classmethod
    def open(cls, root: Path, url: str | None = None) -> LedgerStore:
        """The ledger of the project at `root`: `url`, else params.custody.ledger_url, else
        the embedded SQLite store."""
        return cls(open_line_store(root, url))

    @classmethod
    def for_export(cls, path: Path) -> LedgerStore:
        return cls(store_for_export(path))

    def lines(self) -> list[dict[str, Any]]:
        return self.store.lines()

    def texts(self) -> list[str]:
        return self.store.texts()

    def append(self, fields: Fields, key: TestKey | None = None) -> dict[str, Any]:
        """Append one entry, chained to the last and MAC'd under `key` (else the current key of
        `load_keys()`, if there is one); returns it. Without a key only a refused attempt can be
        written: anything else raises TestKeyError. `fields` may be a function of the entries,
        called inside the store's transaction, so a line decided on them (is this access still
        open?) cannot race another writer on any machine; it raises to write nothing. An
        `opened` line is an open_access: a second one for the same access id is refused."""
        return self.open_access(fields, key)

    def open_access(self, fields: Fields, key: TestKey | None = None,
                    check: Callable[[list[dict[str, Any]]], str | None] | None = None
                    ) -> dict[str, Any]:
        """Write an `opened` line for `fields["access_id"]` unless the store already holds
        one, or `check(entries)`, called inside the transaction, gives a reason not to: then
        a `refused` line with that reason is written and AccessRefused raised. Any other
        outcome is appended as it is."""
        refusal: dict[str, str] = {}

        def build(entries: list[dict[str, Any]]) -> dict[str, Any]:
            chosen = fields(entries) if callable(fields) else fields
            why = _why_not_open(chosen, entries, check)
            if why:
                refusal["why"] = why
                chosen = {**chosen, "outcome": "refused", "reason": why}
            return _next_line(entries, chosen, key)

        try:
            line = self.store.transact(build, canonical_json)
        except AccessAlreadyOpened as taken:  # another writer won; the constraint says so
            why = refusal["why"] = str(taken)
            line = self.store.transact(lambda entries: _next_line(
                entries, {**(fields(entries) if callable(fields) else fields),
                          "outcome": "refused", "reason": why}, key), canonical_json)
        if refusal:
            raise AccessRefused(f"refused: {refusal['why']} (recorded as ledger line "
                                f"{line['seq']} in {self.where})", line)
        return line

    def refuse(self, why: str, fields: dict[str, Any] | None = None,
               key: TestKey | None = None) -> dict[str, Any]:
        """Record a refused attempt, unauthenticated without `key` (never MAC'd under a key
        this shell happens to hold: that key may be the very one refused); returns the line."""
        stamp = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "user": _user()}
        fields = {**stamp, **(fields or {}), "outcome": "refused", "reason": why}
        return self.store.transact(lambda entries: _next_line(entries, fields, key,
                                                              anonymous=key is None),
                                   canonical_json)

    def team_keys(self) -> list[str]:
        return self.store.team_keys()

    def name_team_key(self, public_hex: str, by: str) -> bool:
        return self.store.name_team_key(public_hex, by)


def _why_not_open(fields: dict[str, Any], entries: list[dict[str, Any]],
                  check: Callable[[list[dict[str, Any]]], str | None] | None) -> str | None:
    if fields.get("outcome") != "opened":
        return None
    access_id = fields.get("access_id")
    prior = next((e for e in entries if e.get("outcome") == "opened" and access_id
                  and e.get("access_id") == access_id), None)
    if prior is not None:
        return (f"access {access_id} was already opened by ledger line {prior.get('seq')} "
                f"({prior.get('time')}, by {prior.get('user')}, MLflow run "
                f"{prior.get('mlflow_run_id')}): one access key opens once, on every machine")
    return check(entries) if check else None


def _next_line(entries: list[dict[str, Any]], fields: dict[str, Any], key: TestKey | None,
               anonymous: bool = False) -> dict[str, Any]:
    if fields.get("outcome") not in OUTCOMES:
        raise LedgerError(f"outcome {fields.get('outcome')!r} is not one of "
                          f"{', '.join(OUTCOMES)}")
    if key is None and not anonymous:
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
    return entry


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _export_texts(path: Path) -> list[str]:
    try:
        return [line for line in ledger_text(path).splitlines() if line]
    except FileNotFoundError:
        return []


def _adoptable(texts: list[str]) -> str | None:
    """Why an export's lines cannot be adopted as they are (their MACs are the audit's)."""
    broken = verify_text("".join(text + "\n" for text in texts), None)
    return f"line {broken.line}: {broken.reason}" if broken else None


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
    return verify_text(ledger_text(path), ring)


def verify_text(text: str, ring: KeyRing | None) -> ChainBreak | None:
    previous = GENESIS
    for number, raw in enumerate(text.splitlines(), start=1):
        if not is_safe_text(raw):
            return ChainBreak(number, "not UTF-8 text: a byte no UTF-8 writer wrote")
        try:
            entry = loads_line(raw)
        except LineError as error:  # nested 100,000 deep, a 5,000-digit number: no crash
            return ChainBreak(number, str(error))
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
