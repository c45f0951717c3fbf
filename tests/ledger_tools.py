"""What anyone who can write a project folder can do to its embedded ledger store
(`.heldout/ledger.sqlite`): the attacks of the ledger suites, made on the store, where the
ledger's lines live, as well as on its export."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from heldout.custody.store import EMBEDDED, GENESIS


def replace_store_lines(project: Path, texts: list[str]) -> None:
    """The embedded store's lines become `texts` (each a ledger line's JSON), head and all."""
    with sqlite3.connect(project / EMBEDDED) as db:
        db.execute("DELETE FROM heldout_ledger")
        last = (0, GENESIS)
        for text in texts:
            line = json.loads(text)
            opened = line.get("access_id") if line.get("outcome") == "opened" else None
            db.execute("INSERT INTO heldout_ledger VALUES (?, ?, ?, ?, ?, ?)",
                       (line["seq"], line["prev_hash"], line["hash"], line["outcome"], opened,
                        text))
            last = (line["seq"], line["hash"])
        db.execute("UPDATE heldout_ledger_head SET seq = ?, hash = ? WHERE id = 1", last)


def store_texts(project: Path) -> list[str]:
    with sqlite3.connect(project / EMBEDDED) as db:
        return [row[0] for row in db.execute("SELECT line FROM heldout_ledger ORDER BY seq")]


def keep_store_lines(project: Path, count: int) -> None:
    """Drop every line of the embedded store after the first `count`."""
    replace_store_lines(project, store_texts(project)[:count])
