"""What the test stage's outputs say about the access that made them, and the check that keeps
reading them from being an access.

A teammate who pulls the outputs (`dvc pull`) holds the results of an access the ledger already
witnessed. When the stage runs anyway (`dvc repro --force`, a changed dependency that does not
change the access, a hand-run `heldout stage test`), it first asks `recorded_results`: if
`data/test/access.json` names this very access (its id is the digest of everything the stage
computes from: heldout.custody.identity), the outputs on disk are byte for byte the ones it
lists, and the ledger holds this access's `closed` line, MAC'd under the test key, with the same
result digest, the outputs already are this access's results: the stage says so and ends,
opening nothing, writing no ledger line and starting no MLflow run. Anything else goes to the
lock (heldout.custody.lock): an access that never closed resumes, a closed one is refused (its
outputs are restored, not recomputed), any other identity is a new access."""

from __future__ import annotations

import hmac
import io
import json
from pathlib import Path
from typing import Any

import pandas as pd

from heldout.canonical import sha256_hex
from heldout.custody.keys import TestKey
from heldout.custody.ledger import line_hash, line_mac
from heldout.episodes.rows import TIMING_COLUMNS
from heldout.statistics.power import Reruns
from stages.catalog import ACCESS, RERUNS, SEALED_TEST_EPISODES, test_rollout_file

# Every output of an access but access.json, which lists their digests.
ARMS = ("candidate", "base")
RESULT_FILES = (*map(test_rollout_file, ARMS), SEALED_TEST_EPISODES, RERUNS)
# The episodes' wall-clock columns, apart: not a DVC output, so dvc.lock never changes with them.
TIMINGS = Path("data/test/timings.parquet")
TIMING_KEY = ("checkpoint", "task_id", "sample")


def parquet_bytes(table: pd.DataFrame) -> bytes:
    """A table as Parquet bytes that depend on its content only: the same rows give the same
    bytes in every run and on every machine with the locked pyarrow and pandas."""
    buffer = io.BytesIO()
    table.reset_index(drop=True).to_parquet(buffer, index=False)
    return buffer.getvalue()


def without_timings(table: pd.DataFrame) -> pd.DataFrame:
    return table.drop(columns=[c for c in TIMING_COLUMNS if c in table.columns])


def timings_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Each episode's wall-clock columns, one row per episode of every arm and rerun."""
    return pd.concat([table[[*TIMING_KEY, *TIMING_COLUMNS]].assign(run=run)
                      for run, table in tables.items()], ignore_index=True)


def read_reruns(root: Path) -> Reruns | None:
    """Each run's pass@1 of both arms, which the test stage ran `reruns.runs` times for the
    run-level drift (the rollout files hold the runs pooled), or None."""
    record = json.loads((root / RERUNS).read_text(encoding="utf-8"))
    if not record["pass_at_1"]:
        return None
    scores = record["pass_at_1"]
    return Reruns(tuple(scores["base"]), tuple(scores["candidate"]),
                  record.get("samples_per_run"), record.get("interleaved"))


def file_digests(contents: dict[Path, bytes]) -> dict[str, str]:
    return {str(path): sha256_hex(data) for path, data in sorted(contents.items())}


def recorded_results(root: Path, access_id: str, ledger: list[dict[str, Any]],
                     test_key: TestKey) -> dict[str, Any] | None:
    """access.json, if the outputs in place are access `access_id`'s closed results (see the
    module's docstring); else None."""
    access = results_in_place(root)
    if access is None or access.get("access_id") != access_id:
        return None
    closed = [e for e in ledger if e.get("outcome") == "closed"
              and e.get("access_id") == access_id
              and e.get("result_digest") == access.get("result_digest")
              and e.get("key_id") == test_key.key_id and authentic(e, test_key)]
    return access if closed else None


def results_in_place(root: Path) -> dict[str, Any] | None:
    """access.json, if every result file it names is in place with the digest it says; the
    ledger (and its key) decides whether they are a closed access's."""
    try:
        access = json.loads((root / ACCESS).read_text(encoding="utf-8"))
        outputs = access["outputs"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(outputs, dict) or set(outputs) != set(map(str, RESULT_FILES)):
        return None
    for name, digest in outputs.items():
        try:
            if sha256_hex((root / name).read_bytes()) != digest:
                return None
        except OSError:
            return None
    return access


def authentic(entry: dict[str, Any], key: TestKey) -> bool:
    """The line is as written under `key`: its chain hash covers it and its MAC the hash."""
    mac = entry.get("mac")
    return (isinstance(mac, str) and entry.get("hash") == line_hash(entry)
            and hmac.compare_digest(line_mac(key, entry["hash"]), mac))
