"""Fingerprints of evaluation items: what decontamination compares training data against.

They let decontamination run without opening the test split. Everything is stored as hashes,
not text, so the fingerprint file does not print the held-out items. The same functions
(`text`, `code`) fingerprint the training side, so both sides are hashed one way.

Per item: for each field its raw and normalized sha256 and its word n-gram hashes; for the
prompt and the reference a MinHash signature of word shingles; and for the *program* (prompt
followed by reference, as a training copy would hold the whole task) the same plus a
rename-invariant fingerprint of its Python functions (`code_fingerprint`).
"""

from __future__ import annotations

from typing import Any

from heldout.canonical import sha256_hex
from heldout.contamination.code import CODE_NORMALIZATION, LITERAL_MODES, code_fingerprint
from heldout.contamination.text import (
    MINHASH,
    NGRAM_HASH,
    NORMALIZATION,
    minhash,
    normalize_text,
    shingle_count,
    window_hashes,
    word_hashes,
)
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task

FINGERPRINTED_FIELDS = ("prompt", "reference", "tests")
# Tests are mostly shared assertion boilerplate, so their resemblance says little about the
# item; leaked tests are found by exact text and n-gram containment instead.
MINHASH_FIELDS = ("prompt", "reference")
PROGRAM = "program"


def program_text(task: Task) -> str:
    """The whole task as a training copy would hold it: the prompt, then the solution (for a
    repository task, the functions its reference patch writes: heldout.tasks.kinds)."""
    return task_kind(task.kind).program_text(task)


def text_fingerprint(text: str, n: int | None, with_minhash: bool) -> dict[str, Any]:
    """Hashes of one text: raw and normalized sha256, word n-grams (unless n is None) and the
    MinHash signature with its shingle count."""
    normalized = normalize_text(text)
    hashes = word_hashes(normalized.split())
    fingerprint: dict[str, Any] = {
        "sha256": sha256_hex(text),
        "normalized_sha256": sha256_hex(normalized),
    }
    if n is not None:
        fingerprint["ngrams"] = sorted(set(window_hashes(hashes, n).tolist()))
    if with_minhash:
        signature = minhash(hashes)
        fingerprint["minhash"] = {
            "signature": signature.hashvalues.tolist() if signature else [],
            "shingles": shingle_count(len(hashes)),
        }
    return fingerprint


def task_fingerprint(task: Task, n: int) -> dict[str, Any]:
    fields = {}
    for name in FINGERPRINTED_FIELDS:
        text = getattr(task, name)
        if text and text.strip():
            fields[name] = text_fingerprint(text, n, with_minhash=name in MINHASH_FIELDS)
    # The fields' n-grams already cover the program's.
    program = text_fingerprint(program_text(task), None, with_minhash=True)
    codes = {mode: code_fingerprint(program_text(task), mode) for mode in LITERAL_MODES}
    program["code"] = (
        None if codes["keep"] is None else {mode: c.to_json() for mode, c in codes.items()}
    )
    return {"id": task.id, "group": task.group, "fields": fields, PROGRAM: program}


def split_fingerprints(split: str, digest: str, tasks: list[Task], n: int) -> dict[str, Any]:
    items = [task_fingerprint(t, n) for t in sorted(tasks, key=lambda t: t.id)]
    return {
        "split": split,
        "digest": digest,
        "ngram_n": n,
        "normalization": NORMALIZATION,
        "ngram_hash": NGRAM_HASH,
        "minhash": MINHASH,
        "code_normalization": CODE_NORMALIZATION,
        "code_unparsable": sum(item[PROGRAM]["code"] is None for item in items),
        "items": items,
    }
