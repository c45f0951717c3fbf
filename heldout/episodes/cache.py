"""A durable record of finished episodes, so a crashed rollout resumes where it stopped.

It lives outside DVC's outputs (DVC deletes a stage's outputs before running it). Episodes are
committed as their chunk comes back (heldout.episodes.chunks): after a kill -9 the store holds every
chunk that finished, and SQLite's journal guarantees it holds no half-written one.

No stored row is believed for what it says: anything that can write the project folder (a
`command` agent included) can write this file. Each plain row is authenticated by an HMAC-SHA256
over its episode key and the whole stored row (completion, status, passed, error, trajectory,
every column) under this machine's cache key, a secret kept outside every project
(`$XDG_CONFIG_HOME/heldout/cache-key`, mode 0600, made on first use; never the test key), so a
row edited in place, moved to another episode or written without the key is run again, never
used.

A store opened with a sealing key (the test stage's, derived from the test key) keeps its rows
encrypted instead, each bound to its episode key by AES-GCM, which authenticates it as well:
test completions never sit in the file in plain text, and a row cannot be edited or moved to
another episode. It reads only rows sealed under that key.

Reading never fails on what the file holds: a stored row that is not authenticated, or cannot
be decoded or unsealed, is left out and named with the reason (`CachedRows.unreadable`), so its
episode is run again and the new row replaces it. Whether a decoded row is a valid row is the
reader's to check (heldout.episodes.chunks, with heldout.episodes.rows.validate_row).
"""

from __future__ import annotations

import base64
import binascii
import hmac
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
from heldout.environment import user_config_dir
from heldout.errors import HeldoutError
from heldout.files import create_secret_file

_SEALED = "sealed:"
CACHE_KEY_FILE = "cache-key"
_CACHE_KEY_BYTES = 32
# What the MAC of a plain row covers besides the key and the row: the scheme, so a MAC made for
# another use of the same key can never pass for a row's.
_MAC_PURPOSE = "heldout-episode-row/1"
NO_MAC = "not authenticated (no MAC: written by an older heldout, or edited)"
BAD_MAC = ("its MAC does not match (edited, moved from another episode, or written under "
           "another cache key)")


class CacheKeyError(HeldoutError):
    """The cache key file is there but does not hold a key."""


def cache_key_path() -> Path:
    return user_config_dir() / CACHE_KEY_FILE


def machine_cache_key() -> bytes:
    """This machine's key for the episode cache's MACs, made (mode 0600) where there is none: a
    new key only means every stored row is run again."""
    path = cache_key_path()
    if not path.is_file():
        create_secret_file(path, _CACHE_KEY_BYTES)
    try:
        secret = bytes.fromhex(path.read_text(encoding="ascii", errors="replace").strip())
    except (OSError, ValueError):
        secret = b""
    if len(secret) != _CACHE_KEY_BYTES:
        raise CacheKeyError(
            f"{path}: not a readable cache key ({2 * _CACHE_KEY_BYTES} hex digits); delete it "
            "and a new one is made (the episodes stored under the old one then run again)")
    return secret


def row_mac(mac_key: bytes, key: str, stored: str) -> str:
    """The MAC of a stored row (its text, exactly as stored) at its episode key."""
    message = json.dumps([_MAC_PURPOSE, key, stored])  # ASCII, whatever the texts hold
    return hmac.new(mac_key, message.encode("ascii"), "sha256").hexdigest()


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
    """A stored row that is not authenticated, or cannot be decoded or unsealed; the message
    says why."""


class EpisodeCache:
    def __init__(self, path: Path, sealing_key: bytes | None = None):
        self.path = path
        self._cipher = AESGCM(sealing_key) if sealing_key is not None else None
        # Sealed rows are authenticated by their cipher; plain ones by this machine's key.
        self._mac_key = machine_cache_key() if sealing_key is None else None
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        with self._db:  # one writer at a time: two stages may open an old file at once
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("CREATE TABLE IF NOT EXISTS episodes "
                             "(key TEXT PRIMARY KEY, row TEXT, mac TEXT)")
            columns = {name for _, name, *_ in self._db.execute("PRAGMA table_info(episodes)")}
            if "mac" not in columns:  # a file from before rows were authenticated
                self._db.execute("ALTER TABLE episodes ADD COLUMN mac TEXT")

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        return self.read(keys).rows

    def read(self, keys: list[str]) -> CachedRows:
        found = CachedRows()
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, row, mac FROM episodes WHERE key IN ({marks})"
                for key, row, mac in self._db.execute(query, chunk):
                    try:
                        opened = self._open(key, row, mac)
                    except _Unreadable as why:
                        found.unreadable[key] = str(why)
                        continue
                    if opened is not None:
                        found.rows[key] = opened
        return found

    def put_many(self, rows: list[tuple[str, dict[str, Any]]]) -> None:
        """Commit (key, row) pairs in one transaction: all of them or, after a crash, none."""
        stored = [(key, self._seal(key, json.dumps(row, allow_nan=False))) for key, row in rows]
        with self._lock, self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO episodes (key, row, mac) VALUES (?, ?, ?)",
                [(key, text, self._mac(key, text)) for key, text in stored])

    def _seal(self, key: str, text: str) -> str:
        if self._cipher is None:
            return text
        nonce = os.urandom(12)
        sealed = nonce + self._cipher.encrypt(nonce, text.encode(), key.encode())
        return _SEALED + base64.b64encode(sealed).decode("ascii")

    def _mac(self, key: str, stored: str) -> str | None:
        return None if self._mac_key is None else row_mac(self._mac_key, key, stored)

    def _open(self, key: str, stored: Any, mac: Any) -> dict[str, Any] | None:
        """The row, or None where it was not sealed as this store seals (then it is run again
        without a word: a test store and a val store may share the file). Raises _Unreadable
        for a row this store should read and cannot, or must not believe."""
        if not isinstance(stored, str):
            raise _Unreadable(f"not text but {type(stored).__name__}")
        if self._cipher is None:
            if stored.startswith(_SEALED):
                return None
            if not isinstance(mac, str) or not mac:
                raise _Unreadable(NO_MAC)
            if not hmac.compare_digest(mac.encode("ascii", "replace"),
                                       self._mac(key, stored).encode("ascii")):
                raise _Unreadable(BAD_MAC)
            return _decoded(stored)
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
