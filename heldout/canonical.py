"""Canonical JSON and its sha256: the one definition of "same content" in heldout.

Task hashes, split digests and (later) harness fingerprints all go through here, so two
records that print the same JSON always get the same digest, on any machine and any run.

Text safety, one rule: a Python str may hold code points UTF-8 cannot encode (a lone UTF-16
surrogate, U+D800..U+DFFF, e.g. from a JSON escape "\\ud800" an agent or endpoint sent, or a
judge's reason quoting what a program returned). `safe_text` replaces each with U+FFFD
(`safe_strings` in every str of a row or an observation); a rollout row's text is made safe
once, as the row is built (an episode's or a scored sample's), so what is hashed, judged and
stored is the same text. `sha256_hex` itself never fails on text: it hashes a str's UTF-8
bytes with surrogates passed through ("surrogatepass"), so valid text hashes exactly as before
and two distinct strings always hash apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no insignificant whitespace and non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def is_safe_text(text: str) -> bool:
    """Whether the text encodes as UTF-8 (holds no lone surrogate)."""
    return text.isascii() or _SURROGATE.search(text) is None


def safe_text(text: str) -> str:
    """The text with every code point UTF-8 cannot encode (a lone surrogate) replaced by
    U+FFFD; valid text is returned unchanged."""
    return text if is_safe_text(text) else _SURROGATE.sub(REPLACEMENT, text)


def safe_strings(value: Any) -> Any:
    """`value` with `safe_text` applied to every str in it, through dicts (keys too), lists and
    tuples: what a judge or a candidate said (a verdict's reason, a program's output, a row),
    made writable as UTF-8 (JSON, Parquet, a terminal) before it is stored or shown."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_strings(key): safe_strings(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(safe_strings(item) for item in value)
    return value


def sha256_hex(data: str | bytes) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def content_digest(value: Any) -> str:
    return sha256_hex(canonical_json(value))


def jsonl_bytes(records: Iterable[Any]) -> bytes:
    """Canonical JSON Lines: the bytes a split file holds, and so the bytes its digest covers."""
    return "".join(canonical_json(r) + "\n" for r in records).encode("utf-8")
