"""Sealing the test split: the file on disk is useless to a plain read.

Python's audit hook sees only Python-level opens; readers that open files from C (pyarrow's,
for one) pass under it. So the test split's bytes are encrypted (AES-GCM) under a key that only
heldout.custody.lock derives, and the hook is the second line of defence, not the only one.

This stops accidental and casual reads (pandas, pyarrow, numpy, an editor), not a determined
insider: the key is derived from the manifest, by code in this repository. Sealing is
deterministic (the nonce comes from the content's digest), so the same split always seals to
the same bytes and DVC sees no change where there is none.
"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"HELDOUT-SEALED-1\n"


class SealBrokenError(ValueError):
    """The sealed bytes were not sealed under this key, or were changed since."""


def _key(salt: str, digest: str) -> bytes:
    return hashlib.sha256(f"heldout-seal\x00{salt}\x00{digest}".encode()).digest()


def _nonce(digest: str) -> bytes:
    return hashlib.sha256(f"heldout-nonce\x00{digest}".encode()).digest()[:12]


def seal(plain: bytes, salt: str, digest: str) -> bytes:
    return MAGIC + AESGCM(_key(salt, digest)).encrypt(_nonce(digest), plain, MAGIC)


def unseal(sealed: bytes, salt: str, digest: str) -> bytes:
    if not sealed.startswith(MAGIC):
        raise SealBrokenError("not a sealed heldout file")
    try:
        return AESGCM(_key(salt, digest)).decrypt(_nonce(digest), sealed[len(MAGIC):], MAGIC)
    except InvalidTag:
        raise SealBrokenError(
            "the sealed bytes do not match the manifest's digest: the file was changed or "
            "belongs to another split"
        ) from None
