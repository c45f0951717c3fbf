"""The test key: a secret that lives outside the repository and its DVC cache.

One 32-byte secret does three jobs, each with its own derived key: it is the X25519 private key
the test split is sealed for (heldout.custody.seal: sealing needs only its public half, so
whoever deals the split cannot read it back), it authenticates the ledger's lines (an HMAC a
writer without the secret cannot recompute), and it seals the test episodes in the episode
cache.

Where it comes from, in order: `HELDOUT_TEST_KEY` (64 hex digits, or the path of a file that
holds them; several, comma-separated, when a key was rotated: the first is current, the others
still verify the ledger lines written under them), else the user's own key file
(`$XDG_CONFIG_HOME/heldout/test-key`), which the embedded default creates on first use.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from pydantic import BaseModel, ConfigDict, field_validator

from heldout.environment import TEST_KEY_ENV, user_config_dir
from heldout.errors import HeldoutError
from heldout.files import create_secret_file

KEY_ENV = TEST_KEY_ENV
_SECRET_BYTES = 32


class TestKeyError(HeldoutError):
    """No usable test key, or a key that is not the one the test split was sealed for."""

    __test__ = False


@dataclass(frozen=True)
class TestKey:
    """One test key. Its repr never shows the secret."""

    __test__ = False

    secret: bytes = field(repr=False)

    @property
    def public(self) -> bytes:
        return X25519PrivateKey.from_private_bytes(self.secret).public_key().public_bytes_raw()

    @property
    def key_id(self) -> str:
        """A public name for the key: safe to print, log and commit."""
        return key_id(self.public)

    def derive(self, purpose: str) -> bytes:
        """A separate key per use, so a leak of one (say the episode cache's) is not the other."""
        return hmac.digest(self.secret, f"heldout-{purpose}".encode(), "sha256")


def key_id(public: bytes) -> str:
    return hashlib.sha256(public).hexdigest()[:16]


@dataclass(frozen=True)
class KeyRing:
    """The keys this process holds, the current one first, and where they came from."""

    keys: tuple[TestKey, ...]
    source: str
    created: bool = False

    @property
    def current(self) -> TestKey:
        return self.keys[0]

    def by_id(self, wanted: str) -> TestKey | None:
        return next((key for key in self.keys if key.key_id == wanted), None)


def user_key_path() -> Path:
    return user_config_dir() / "test-key"


def load_keys(create: bool = False) -> KeyRing:
    """The keys from HELDOUT_TEST_KEY, else the user's key file; with `create`, a missing user
    key file is made (mode 0600). Raises TestKeyError saying what is missing."""
    configured = os.environ.get(KEY_ENV, "").strip()
    if configured:
        entries = [entry.strip() for entry in configured.split(",") if entry.strip()]
        return KeyRing(tuple(_parse(entry, f"{KEY_ENV} entry {number}")
                             for number, entry in enumerate(entries, start=1)), KEY_ENV)
    path = user_key_path()
    if path.is_file():
        return KeyRing((_parse(str(path), str(path)),), str(path))
    if not create:
        raise TestKeyError(
            f"no test key: set {KEY_ENV} to the key (64 hex digits) or to the path of a file "
            f"holding it, from your team's secret store; or put your own key in {path} "
            "(docs/stages.md: 'The test key')")
    # Another stage may create it a moment before this one: then that key is used, never a second.
    created = create_secret_file(path, _SECRET_BYTES)
    return KeyRing((_parse(str(path), str(path)),), str(path), created=created)


def _parse(entry: str, where: str) -> TestKey:
    text = entry
    if not _is_hex_key(entry):
        try:
            text = Path(entry).expanduser().read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise TestKeyError(f"{where}: neither 64 hex digits nor a readable key file "
                               f"({type(error).__name__})") from None
        if not _is_hex_key(text):
            raise TestKeyError(f"{where}: the file {entry} does not hold 64 hex digits")
    return TestKey(bytes.fromhex(text))


def _is_hex_key(text: str) -> bool:
    return len(text) == 2 * _SECRET_BYTES and all(c in "0123456789abcdefABCDEF" for c in text)


class CustodyConfig(BaseModel):
    """`params.custody`: the public half of the key the test split is sealed for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    public_key: str = ""

    @field_validator("public_key")
    @classmethod
    def _hex(cls, value: str) -> str:
        if value and not _is_hex_key(value):
            raise ValueError("64 hex digits (the public key `heldout key` prints), or empty "
                             "for your own key")
        return value.lower()


def sealing_key(config: CustodyConfig) -> tuple[bytes, str | None]:
    """The public key to seal the test split for, and a note to print where one was created."""
    if config.public_key:
        return bytes.fromhex(config.public_key), None
    ring = load_keys(create=True)
    note = (f"created your test key in {ring.source} (mode 0600): keep it secret and back it "
            "up; without it the test split cannot be opened" if ring.created else None)
    return ring.current.public, note


def opening_key(config: CustodyConfig) -> TestKey:
    """The secret that opens what was sealed for `config`'s key: the test stage's."""
    ring = load_keys()
    if not config.public_key:
        return ring.current
    wanted = key_id(bytes.fromhex(config.public_key))
    found = ring.by_id(wanted)
    if found is None:
        raise TestKeyError(
            f"the test split is sealed for test key {wanted}, and {ring.source} holds "
            f"{', '.join(key.key_id for key in ring.keys)}: set {KEY_ENV} to the matching key")
    return found
