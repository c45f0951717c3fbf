"""Sealing: bytes on disk that only the holder of the test key can read.

Python's audit hook sees only Python-level opens; readers that open files from C (pyarrow's,
`cat`, an editor) pass under it. So the test split and the test episodes are encrypted, and the
hook is the second line of defence, not the only one.

Sealing is public-key (X25519, HKDF-SHA256, AES-GCM): it needs only the key's public half, so
the split stage and anyone re-dealing the split can seal without being able to unseal. It is
deterministic: the ephemeral key comes from a keyed hash of the content itself, so the same
bytes sealed for the same key give the same file and DVC sees no change where there is none;
without the content, the ephemeral key cannot be guessed. The header names the key a file was
sealed for, so a wrong key is told apart from damaged bytes.
"""

from __future__ import annotations

import hmac

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from heldout.custody.keys import TestKey, key_id

MAGIC = b"HELDOUT-SEALED-2\n"
_PUBLIC_BYTES = 32
_HEADER = len(MAGIC) + 2 * _PUBLIC_BYTES
_NONCE = bytes(12)  # every message has its own key, so one fixed nonce is never reused


class SealBrokenError(ValueError):
    """The bytes are not a sealed heldout file, or were changed since they were sealed."""


class WrongKeyError(SealBrokenError):
    """The file was sealed for another key."""


def seal(plain: bytes, public: bytes) -> bytes:
    ephemeral = X25519PrivateKey.from_private_bytes(
        hmac.digest(b"heldout-seal-ephemeral", public + plain, "sha256"))
    ephemeral_public = ephemeral.public_key().public_bytes_raw()
    header = MAGIC + ephemeral_public + public
    shared = ephemeral.exchange(X25519PublicKey.from_public_bytes(public))
    return header + AESGCM(_message_key(shared, header)).encrypt(_NONCE, plain, header)


def sealed_for(sealed: bytes) -> str:
    """The key id a sealed file was sealed for (read from its plain header)."""
    _check_header(sealed)
    return key_id(sealed[len(MAGIC) + _PUBLIC_BYTES:_HEADER])


def unseal(sealed: bytes, key: TestKey) -> bytes:
    wanted = sealed_for(sealed)
    if wanted != key.key_id:
        raise WrongKeyError(f"sealed for test key {wanted}, and the key here is {key.key_id}")
    header = sealed[:_HEADER]
    ephemeral_public = sealed[len(MAGIC):len(MAGIC) + _PUBLIC_BYTES]
    shared = X25519PrivateKey.from_private_bytes(key.secret).exchange(
        X25519PublicKey.from_public_bytes(ephemeral_public))
    try:
        return AESGCM(_message_key(shared, header)).decrypt(_NONCE, sealed[_HEADER:], header)
    except InvalidTag:
        raise SealBrokenError("the sealed bytes were changed since they were sealed") from None


def _check_header(sealed: bytes) -> None:
    if not sealed.startswith(MAGIC) or len(sealed) < _HEADER:
        raise SealBrokenError("not a sealed heldout file")


def _message_key(shared: bytes, header: bytes) -> bytes:
    return HKDF(hashes.SHA256(), 32, salt=None, info=b"heldout-seal-2" + header).derive(shared)
