"""Canonical JSON and its sha256: the one definition of "same content" in heldout.

Task hashes, split digests and (later) harness fingerprints all go through here, so two
records that print the same JSON always get the same digest, on any machine and any run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no insignificant whitespace and non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_digest(value: Any) -> str:
    return sha256_hex(canonical_json(value))


def jsonl_bytes(records: Iterable[Any]) -> bytes:
    """Canonical JSON Lines: the bytes a split file holds, and so the bytes its digest covers."""
    return "".join(canonical_json(r) + "\n" for r in records).encode("utf-8")
