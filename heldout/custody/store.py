"""The ledger store: where the test-access ledger's lines live, one transaction per line.

A file in each checkout cannot hold one record for a team: two clones each append to their own
copy, their chains fork, and nothing stops both from opening the same access. So the lines live
in a transactional store, and the file in git is an export of it (heldout.custody.export):

- embedded default: SQLite at `.heldout/ledger.sqlite`, beside the episode cache. It is this
  machine's state (git-ignored, never a DVC output); git keeps the export, and a fresh checkout
  adopts its committed export on first use.
- a team: `params.custody.ledger_url: postgresql://…` (psycopg 3), one ledger for every clone.

Every append is one transaction that reads the chain head and inserts the next line (SQLite:
`BEGIN IMMEDIATE`; PostgreSQL: `SELECT … FOR UPDATE` of the one-row head table), so no two
writers anywhere fork the chain: `seq` is the primary key and `prev_hash` is unique. An `opened`
line's access id is unique too: one access key is opened once, across every machine, whatever a
writer decided before its transaction. This module knows rows, not the chain's hashes and MACs
(heldout.custody.ledger builds each line inside the transaction).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from heldout.environment import store_root
from heldout.errors import HeldoutError

GENESIS = "0" * 64
EXPORT = Path("ledger/test_access.jsonl")  # heldout.custody.guard.LEDGER: the export in git
EMBEDDED = Path(".heldout/ledger.sqlite")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_PG_SCHEMA_LOCK = 0x6865_6C64  # pg_advisory_xact_lock id: "held"
_SCHEMA_READY: set[str] = set()

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS heldout_ledger (seq BIGINT PRIMARY KEY, "
    "prev_hash TEXT NOT NULL UNIQUE, hash TEXT NOT NULL UNIQUE, outcome TEXT NOT NULL, "
    "opened_access TEXT UNIQUE, line TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS heldout_ledger_head (id INTEGER PRIMARY KEY CHECK (id = 1), "
    "seq BIGINT NOT NULL, hash TEXT NOT NULL)",
    f"INSERT INTO heldout_ledger_head (id, seq, hash) VALUES (1, 0, '{GENESIS}') "
    "ON CONFLICT (id) DO NOTHING",
    "CREATE TABLE IF NOT EXISTS heldout_team_keys (ordinal BIGINT PRIMARY KEY, "
    "public_key TEXT NOT NULL UNIQUE, named_at TEXT NOT NULL, named_by TEXT NOT NULL)",
)


class StoreError(HeldoutError):
    """The ledger store cannot be reached, or holds what a ledger cannot."""


class AccessAlreadyOpened(StoreError):
    """The store already holds an `opened` line for this access id (its unique constraint)."""


def configured_url(root: Path) -> str:
    """`params.custody.ledger_url` of the project at `root` ("" for the embedded default)."""
    try:
        params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return ""
    custody = params.get("custody") if isinstance(params, dict) else None
    url = custody.get("ledger_url", "") if isinstance(custody, dict) else ""
    return url.strip() if isinstance(url, str) else ""


def redacted(url: str) -> str:
    """A store's URL safe to print: no password."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}@{host}"


class _Sqlite:
    param = "?"

    def __init__(self, path: Path):
        self.path = path
        self.where = f"sqlite:///{path}"

    def connect(self) -> Any:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        connection.execute("PRAGMA busy_timeout = 120000")
        return connection

    @contextmanager
    def transaction(self, connection: Any, exclusive: bool) -> Iterator[Any]:
        connection.execute("BEGIN IMMEDIATE" if exclusive else "BEGIN")
        try:
            yield connection.cursor()
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def lock_head(self, cursor: Any) -> None:
        """BEGIN IMMEDIATE already holds the one write lock."""

    def integrity(self) -> type[Exception]:
        return sqlite3.IntegrityError


class _Postgres:
    param = "%s"

    def __init__(self, url: str):
        self.url = url
        self.where = redacted(url)

    def connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise StoreError("params.custody.ledger_url names PostgreSQL, which needs psycopg 3: "
                             "pip install 'psycopg[binary]'") from None
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=30)
        except psycopg.Error as error:
            raise StoreError(f"the ledger store {self.where} cannot be reached: "
                             f"{str(error).strip().splitlines()[0]}") from None

    @contextmanager
    def transaction(self, connection: Any, exclusive: bool) -> Iterator[Any]:
        with connection.transaction(), connection.cursor() as cursor:
            yield cursor

    def lock_head(self, cursor: Any) -> None:
        cursor.execute("SELECT seq FROM heldout_ledger_head WHERE id = 1 FOR UPDATE")

    def integrity(self) -> type[Exception]:
        import psycopg

        return psycopg.IntegrityError


class LineStore:
    """The ledger's rows in one store, and the export file it writes after each append."""

    def __init__(self, backend: _Sqlite | _Postgres, export: Path):
        self._backend, self.export = backend, export
        self.where = backend.where
        self.adoption: str | None = None  # why a committed export could not be adopted, if so
        self._ensure_schema()

    @contextmanager
    def _cursor(self, exclusive: bool = False) -> Iterator[Any]:
        connection = self._backend.connect()
        try:
            with self._backend.transaction(connection, exclusive) as cursor:
                if exclusive:
                    self._backend.lock_head(cursor)
                yield cursor
        finally:
            connection.close()

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self._backend.param)

    def _ensure_schema(self) -> None:
        if self.where in _SCHEMA_READY:
            return
        with self._cursor(exclusive=isinstance(self._backend, _Sqlite)) as cursor:
            if isinstance(self._backend, _Postgres):  # CREATE IF NOT EXISTS races on PostgreSQL
                cursor.execute(f"SELECT pg_advisory_xact_lock({_PG_SCHEMA_LOCK})")
            for statement in SCHEMA:
                cursor.execute(statement)
        if isinstance(self._backend, _Postgres):  # a SQLite file can be deleted under us
            _SCHEMA_READY.add(self.where)

    # --- reading -----------------------------------------------------------------------------

    def texts(self) -> list[str]:
        """Every line's exact text, in chain order."""
        with self._cursor() as cursor:
            return _texts(cursor)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(text) for text in self.texts()]

    # --- writing -----------------------------------------------------------------------------

    def transact(self, build: Callable[[list[dict[str, Any]]], dict[str, Any]],
                 render: Callable[[dict[str, Any]], str]) -> dict[str, Any]:
        """One serialized append: `build(lines)` (called with the chain as it is, under the
        store's write lock) returns the next line, `render` its text; the line is inserted and
        the head moved in the same transaction, then the export rewritten. Raises
        AccessAlreadyOpened when the store already holds an `opened` line for its access id."""
        integrity, line = self._backend.integrity(), {}
        try:
            with self._cursor(exclusive=True) as cursor:
                seq, head = _head(cursor)
                line = build([json.loads(text) for text in _texts(cursor)])
                if (line.get("seq"), line.get("prev_hash")) != (seq + 1, head):
                    raise StoreError(f"line {line.get('seq')} does not follow the chain head "
                                     f"(line {seq}) of {self.where}")
                self._insert(cursor, line, render(line))
        except integrity as error:
            if "opened_access" in str(error) or "heldout_ledger_opened_access" in str(error):
                raise AccessAlreadyOpened(
                    f"access {line.get('access_id')} is already opened in {self.where}: one "
                    "access key opens once") from None
            raise StoreError(f"{self.where} refused ledger line {line.get('seq')}: "
                             f"{str(error).strip()}") from None
        self.write_export()
        return line

    def _insert(self, cursor: Any, line: dict[str, Any], text: str) -> None:
        opened = line.get("access_id") if line.get("outcome") == "opened" else None
        cursor.execute(self._sql("INSERT INTO heldout_ledger (seq, prev_hash, hash, outcome, "
                                 "opened_access, line) VALUES (?, ?, ?, ?, ?, ?)"),
                       (line["seq"], line["prev_hash"], line["hash"], str(line.get("outcome")),
                        opened, text))
        cursor.execute(self._sql("UPDATE heldout_ledger_head SET seq = ?, hash = ? WHERE id = 1"),
                       (line["seq"], line["hash"]))

    def adopt(self, texts: list[str], valid: Callable[[list[str]], str | None]) -> int:
        """Into an empty store, the lines of an export (a checkout's committed ledger, from
        before the store): verbatim, byte for byte, when `valid` finds their chain whole.
        Returns how many lines were adopted; a store with lines adopts nothing."""
        if not texts:
            return 0
        try:
            with self._cursor(exclusive=True) as cursor:
                if _head(cursor)[0]:
                    return 0
                why = valid(texts)
                if why:
                    self.adoption = f"{self.export} was not adopted into {self.where}: {why}"
                    return 0
                for text in texts:
                    self._insert(cursor, json.loads(text), text)
        except self._backend.integrity() as error:
            self.adoption = (f"{self.export} was not adopted into {self.where}: "
                             f"{str(error).strip()}")
            return 0
        return len(texts)

    # --- the export --------------------------------------------------------------------------

    def write_export(self, force: bool = False) -> str:
        """Rewrite the export from the store, unless it holds a line the store does not (then
        it is evidence, and stays as it is, unless `force`). Returns what happened."""
        self.export.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.export) + ".lock"):
            texts = self.texts()  # read under the file lock: the last writer writes the newest
            current = _read_lines(self.export)
            if current == texts:
                return f"{self.export}: {len(texts)} line(s), as in {self.where}"
            if not force and current != texts[:len(current)]:
                return (f"{self.export} was left as it is: it holds lines that are not "
                        f"{self.where}'s (see heldout audit)")
            temporary = self.export.with_name(f".{self.export.name}.{os.getpid()}.tmp")
            temporary.write_text("".join(text + "\n" for text in texts), encoding="utf-8")
            os.replace(temporary, self.export)
            return f"{self.export}: {len(texts)} line(s) from {self.where}"

    # --- the team key ------------------------------------------------------------------------

    def team_keys(self) -> list[str]:
        """Every public key named as the team's, oldest first: the last is current."""
        with self._cursor() as cursor:
            cursor.execute("SELECT public_key FROM heldout_team_keys ORDER BY ordinal")
            return [row[0] for row in cursor.fetchall()]

    def name_team_key(self, public_hex: str, by: str) -> bool:
        """Record `public_hex` as the team's current key; False when it already is."""
        with self._cursor(exclusive=True) as cursor:
            cursor.execute("SELECT ordinal, public_key FROM heldout_team_keys "
                           "ORDER BY ordinal DESC LIMIT 1")
            last = cursor.fetchone()
            if last is not None and last[1] == public_hex:
                return False
            cursor.execute(self._sql("DELETE FROM heldout_team_keys WHERE public_key = ?"),
                           (public_hex,))  # a key named again moves to the end
            cursor.execute(self._sql("INSERT INTO heldout_team_keys (ordinal, public_key, "
                                     "named_at, named_by) VALUES (?, ?, ?, ?)"),
                           ((last[0] if last else 0) + 1, public_hex,
                            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), by))
        return True


def _head(cursor: Any) -> tuple[int, str]:
    cursor.execute("SELECT seq, hash FROM heldout_ledger_head WHERE id = 1")
    seq, head = cursor.fetchone()
    return int(seq), head


def _texts(cursor: Any) -> list[str]:
    cursor.execute("SELECT line FROM heldout_ledger ORDER BY seq")
    return [row[0] for row in cursor.fetchall()]


def _read_lines(path: Path) -> list[str]:
    try:
        return [line for line in ledger_text(path).splitlines() if line]
    except FileNotFoundError:
        return []


def ledger_text(path: Path) -> str:
    """A ledger file's text, whatever its bytes: a byte that is not UTF-8 is kept as a lone
    surrogate (surrogateescape), which verify_text names as its line's break."""
    return path.read_bytes().decode("utf-8", "surrogateescape")


def tracking_database(environment: dict[str, str] | None = None) -> str:
    """The team's PostgreSQL when MLflow's tracking store is one (MLFLOW_TRACKING_URI
    `postgresql[+driver]://…`), as a URL psycopg takes; else ""."""
    uri = (os.environ if environment is None else environment).get("MLFLOW_TRACKING_URI", "")
    scheme, sep, rest = uri.strip().partition("://")
    if sep and scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        return f"postgresql://{rest}"
    return ""


def open_line_store(root: Path, url: str | None = None, export: Path | None = None) -> LineStore:
    """The store of the project at `root`: `url` (else params.custody.ledger_url, else the
    tracking store's PostgreSQL, else the embedded SQLite file), exporting to `export` (else
    the project's ledger file). A team whose MLflow runs on PostgreSQL shares one ledger there
    without a setting; `ledger_url` says otherwise."""
    url = (configured_url(root) or tracking_database()) if url is None else url.strip()
    # In a copy DVC makes (`dvc exp run --temp`, a queued experiment) the ledger is still the
    # project's: a line written into the copy would be thrown away with it.
    project = store_root(root)
    export = project / EXPORT if export is None or export == root / EXPORT else export
    if url.startswith(POSTGRES_SCHEMES):
        return LineStore(_Postgres(url), export)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return LineStore(_Sqlite(path if path.is_absolute() else project / path), export)
    if url:
        raise StoreError(f"params.custody.ledger_url: {url!r} is neither postgresql://… nor "
                         "sqlite:///…; leave it empty for the embedded store")
    return LineStore(_Sqlite(project / EMBEDDED), export)


def store_for_export(path: Path) -> LineStore:
    """The store behind a ledger file: a project's (`<root>/ledger/test_access.jsonl`), else
    one of its own beside it (`<file>.sqlite`), for ledgers outside a project."""
    path = Path(path)
    if path.parts[-2:] == EXPORT.parts:
        return open_line_store(path.parents[1], export=path)
    return LineStore(_Sqlite(path.with_name(path.name + ".sqlite")), path)
