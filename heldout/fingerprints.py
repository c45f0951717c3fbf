"""Fingerprints of evaluation items: what decontamination compares training data against.

They let decontamination run without opening the test split. The n-grams are stored as
64-bit hashes, not text, so the fingerprint file does not print the held-out items.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from heldout.canonical import sha256_hex
from heldout.tasks import Task

NORMALIZATION = "nfkc-casefold-alnum-v1"
NGRAM_HASH = "blake2b-64"
FINGERPRINTED_FIELDS = ("prompt", "reference", "tests")

_NOT_WORD = re.compile(r"[^\w]+")


def normalize_text(text: str) -> str:
    """Fold Unicode forms, case, whitespace and every non-word character, so that copies that
    differ only in formatting or punctuation normalize to the same string."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NOT_WORD.sub(" ", folded).split())


def ngram_hashes(words: list[str], n: int) -> set[int]:
    """Hashes of the word n-grams. A text shorter than n words is one n-gram of all its words,
    so short items can still be matched rather than silently never compared."""
    if not words:
        return set()
    grams = (words[i : i + n] for i in range(max(1, len(words) - n + 1)))
    return {_hash64(" ".join(gram)) for gram in grams}


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "big")


def task_fingerprint(task: Task, n: int) -> dict[str, Any]:
    fields = {}
    for name in FINGERPRINTED_FIELDS:
        text = getattr(task, name)
        if text and text.strip():
            normalized = normalize_text(text)
            fields[name] = {
                "normalized_sha256": sha256_hex(normalized),
                "ngrams": sorted(ngram_hashes(normalized.split(), n)),
            }
    return {"id": task.id, "group": task.group, "fields": fields}


def split_fingerprints(split: str, digest: str, tasks: list[Task], n: int) -> dict[str, Any]:
    return {
        "split": split,
        "digest": digest,
        "ngram_n": n,
        "normalization": NORMALIZATION,
        "ngram_hash": NGRAM_HASH,
        "items": [task_fingerprint(t, n) for t in sorted(tasks, key=lambda t: t.id)],
    }
