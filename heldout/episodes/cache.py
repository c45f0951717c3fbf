"""A durable record of finished episodes, so a crashed rollout resumes where it stopped.

It lives outside DVC's outputs (DVC deletes a stage's outputs before running it). Episodes are
committed as their chunk comes back (heldout.episodes.chunks): after a kill -9 the store holds every
chunk that finished, and SQLite's journal guarantees it holds no half-written one.

A store opened with a sealing key (the test stage's, derived from the test key) keeps its rows
encrypted, each bound to its episode key: test completions never sit in the file in plain text,
and a row cannot be moved to another episode. It reads only rows sealed under that key.

Reading never fails on what the file holds: a stored row that cannot be decoded or unsealed is
left out and named with the reason (`CachedRows.unreadable`), so its episode is run again and
the new row replaces it. Whether a decoded row is a valid row is the reader's to check
(heldout.episodes.chunks, with heldout.episodes.rows.validate_row).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from heldout.canonical import content_digest

_SEALED = "sealed:"


def episode_key(
    harness_fingerprint: str, agent_digest: str, task_hash: str, sample: int, seed: int
) -> str:
    """Everything that decides an episode's outcome (the seed carries the rerun index); the
    checkpoint's name is not in it, so renaming a checkpoint reuses its episodes."""
    return content_digest([harness_fingerprint, agent_digest, task_hash, sample, seed])


@dataclass
class CachedRows:
    """What a read found: the rows by key, and why each other stored row could not be read."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)


class _Unreadable(Exception):
    """A stored row that cannot be decoded or unsealed; the message says why."""


class EpisodeCache:
    def __init__(self, path: Path, sealing_key: bytes | None = None):
        self.path = path
        self._cipher = AESGCM(sealing_key) if sealing_key is not None else None
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.execute("CREATE TABLE IF NOT EXISTS episodes (key TEXT PRIMARY KEY, row TEXT)")

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return self.read(keys).rows

    def read(self, keys: list[str]) -> CachedRows:
        found = CachedRows()
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, row FROM episodes WHERE key IN ({marks})"
                for key, row in self._db.execute(query, chunk):
                    try:
                        opened = self._open(key, row)
                    except _Unreadable as why:
                        found.unreadable[key] = str(why)
                        continue
                    if opened is not None:
                        found.rows[key] = opened
        return found

    def put_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Commit (key, row) pairs in one transaction: all of them or, after a crash, none."""
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO episodes (key, row) VALUES (?, ?)",
                                 [(key, self._seal(key, json.dumps(row, allow_nan=False)))
                                  for key, row in rows])

    def _seal(self, key: str, text: str) -> str:
        if self._cipher is None:
            return text
        nonce = os.urandom(12)
        sealed = nonce + self._cipher.encrypt(nonce, text.encode(), key.encode())
        return _SEALED + base64.b64encode(sealed).decode("ascii")

    def _open(self, key: str, stored: Any) -> dict[str, Any] | None:
        """The row, or None where it was not sealed as this store seals (then it is run again
        without a word: a test store and a val store may share the file). Raises _Unreadable
        for a row this store should read and cannot."""
        if not isinstance(stored, str):
            raise _Unreadable(f"not text but {type(stored).__name__}")
        if self._cipher is None:
            return None if stored.startswith(_SEALED) else _decoded(stored)
        if not stored.startswith(_SEALED):
            return None
        try:
            sealed = base64.b64decode(stored[len(_SEALED):], validate=True)
            return _decoded(self._cipher.decrypt(sealed[:12], sealed[12:], key.encode()))
        except (binascii.Error, ValueError, InvalidTag):
            raise _Unreadable("cannot be unsealed (another key, or altered)") from None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _decoded(text: str | bytes) -> dict[str, Any]:
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, bad UTF-8, deep nesting
        raise _Unreadable(f"not JSON ({type(error).__name__})") from None
    if not isinstance(row, dict):
        raise _Unreadable(f"not a row but {type(row).__name__}")
    return row
