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

import getpass
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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
    """`params.custody`: the public half of the key the test split is sealed for, and the
    ledger store (heldout.custody.store; empty: the embedded SQLite file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    public_key: str = ""
    ledger_url: str = ""

    @field_validator("ledger_url")
    @classmethod
    def _store(cls, value: str) -> str:
        value = value.strip()
        if value and not value.startswith(("postgresql://", "postgres://", "sqlite:///")):
            raise ValueError("postgresql://user@host/database (the team's ledger), "
                             "sqlite:///path, or empty for the embedded store")
        return value

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


# --- the team key: once named, the only key the split is sealed for and the test opens with ---


class TeamKeyError(TestKeyError):
    """A key that is not the team's, where a team key is named."""


class TeamStore(Protocol):
    """What the team-key rules need of the ledger store (heldout.custody.ledger.LedgerStore)."""

    where: str

    def team_keys(self) -> list[str]: ...

    def name_team_key(self, public_hex: str, by: str) -> bool: ...

    def refuse(self, why: str, fields: dict[str, Any] | None = None) -> dict[str, Any]: ...


def _team_key(where: TeamStore | CustodyConfig | Mapping[str, Any]) -> tuple[str | None, str]:
    """The team's current public key (hex) and who names it, or None when none is named."""
    if isinstance(where, CustodyConfig | Mapping):
        config = where if isinstance(where, CustodyConfig) else CustodyConfig(
            **(where.get("custody") or {}))
        return config.public_key or None, "params.custody.public_key"
    named = where.team_keys()
    return (named[-1] if named else None), f"the ledger store {where.where}"


def require_team_key(where: TeamStore | CustodyConfig | Mapping[str, Any],
                     key: TestKey) -> TestKey:
    """`key`, if it is the team's, or no team key is named; else TeamKeyError. `where` is the
    ledger store (its record of the team key; a refusal is written to it as a `refused` line)
    or the params (a mapping, or CustodyConfig: params.custody.public_key)."""
    team, named_by = _team_key(where)
    if team is None or key.public.hex() == team:
        return key
    why = (f"test key {key.key_id} is not the team key {key_id(bytes.fromhex(team))} named in "
           f"{named_by}: the test split opens only with the team key (set {KEY_ENV} to it; "
           "docs/stages.md: 'The team key')")
    if isinstance(where, CustodyConfig | Mapping):
        raise TeamKeyError(why)
    line = where.refuse(why, {"test_version": None, "candidate": None, "base": None,
                              "harness": None, "access_id": None, "result_digest": None,
                              "mlflow_run_id": None, "foreign_key_id": key.key_id})
    raise TeamKeyError(f"refused: {why} (recorded as ledger line {line['seq']})")


def team_sealing_key(store: TeamStore, config: CustodyConfig) -> tuple[bytes, str | None]:
    """The public key `split` seals for. Once a team key is named (in the store, or in
    params.custody.public_key, which the store then records as the team's), no other: empty
    params seal for the store's team key; params naming another key are refused, unless this
    shell holds the team key (a rotation, as documented: HELDOUT_TEST_KEY=NEW,OLD)."""
    team = (store.team_keys() or [None])[-1]
    if team is not None and not config.public_key:
        return bytes.fromhex(team), (f"sealed for the team key {key_id(bytes.fromhex(team))} "
                                     f"named in {store.where}")
    public, note = sealing_key(config)
    if public.hex() == team:
        return public, note
    if team is None:
        if config.public_key and store.name_team_key(public.hex(), _who()):
            note = f"named test key {key_id(public)} the team key in {store.where}"
        return public, note
    if _holds(team):
        store.name_team_key(public.hex(), _who())
        return public, (f"rotated the team key in {store.where} from "
                        f"{key_id(bytes.fromhex(team))} to {key_id(public)}")
    raise TeamKeyError(
        f"refused: params.custody.public_key is test key {key_id(public)}, and the team key "
        f"named in {store.where} is {key_id(bytes.fromhex(team))}: the split is sealed only for "
        f"the team key. Set custody.public_key to {team} (heldout key --team prints it), or "
        "rotate the key holding the team key (docs/stages.md: 'Rotating the key')")


def name_team_key(store: TeamStore) -> tuple[TestKey, str]:
    """`heldout key --team`: record this shell's current key as the team key in the store, if
    none is named, it already is, or this shell holds the named one (a rotation); returns the
    key and what happened."""
    ring = load_keys()
    key, team = ring.current, (store.team_keys() or [None])[-1]
    if team == key.public.hex():
        return key, f"test key {key.key_id} is the team key named in {store.where}"
    if team is not None and not _holds(team, ring):
        raise TeamKeyError(
            f"the team key named in {store.where} is {key_id(bytes.fromhex(team))}, and this "
            f"shell holds {', '.join(k.key_id for k in ring.keys)}: only its holder can rotate "
            f"it ({KEY_ENV}=NEW,OLD)")
    store.name_team_key(key.public.hex(), _who())
    how = "named" if team is None else f"rotated from {key_id(bytes.fromhex(team))} to"
    return key, f"{how} test key {key.key_id} as the team key in {store.where}"


def _holds(public_hex: str, ring: KeyRing | None = None) -> bool:
    try:
        ring = ring or load_keys()
    except TestKeyError:
        return False
    return ring.by_id(key_id(bytes.fromhex(public_hex))) is not None


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
