"""One ledger per team (issue 23, item 4): the lines live in a transactional store (SQLite by
default, the team's PostgreSQL), one access key opens once across every machine, the chain never
forks, and the file in git is an export that merges without conflict and witnesses the store."""

from __future__ import annotations

import multiprocessing
import statistics
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from heldout.custody.audit import audit_project
from heldout.custody.export import merge_exports, register_merge_driver
from heldout.custody.guard import LEDGER
from heldout.custody.keys import load_keys
from heldout.custody.ledger import (
    AccessRefused,
    LedgerStore,
    append,
    line_hash,
    read_ledger,
    verify_chain,
)
from heldout.custody.store import (
    EMBEDDED,
    EXPORT,
    AccessAlreadyOpened,
    StoreError,
    open_line_store,
    tracking_database,
)
from tests.conftest import copy_project
from tests.custody.test_custody_audit import git
from tests.ledger_tools import replace_store_lines, store_texts
from tests.postgres import postgres_server

ENTRY = {"test_version": "t-0123456789ab", "candidate": "late", "base": "base",
         "harness": "f" * 64, "reason": "", "result_digest": None, "mlflow_run_id": None}


def opening(access_id: str, **fields) -> dict:
    return {**ENTRY, "outcome": "opened", "access_id": access_id, **fields}


def set_ledger_url(project: Path, url: str) -> Path:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["custody"]["ledger_url"] = url
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def outcomes(lines: list[dict]) -> list[str]:
    return [line["outcome"] for line in lines]


# --- racing first opens, in processes of their own -----------------------------------------


def _race(root: str, access_ids: list[str], writer: int, start, results) -> None:
    store = LedgerStore.open(Path(root))
    key = load_keys().current
    for access_id in access_ids:
        start.wait(60)  # every writer at the line at once
        try:
            store.open_access(opening(access_id, writer=writer), key)
            results.put((access_id, writer, "opened"))
        except AccessRefused:
            results.put((access_id, writer, "refused"))


def race_first_opens(roots: list[Path], rounds: int = 5) -> list[tuple[str, int, str]]:
    """One process per root; at each round every process opens the same new access key."""
    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(len(roots)), context.Queue()
    access_ids = [f"race{number:012d}" for number in range(rounds)]
    workers = [context.Process(target=_race, args=(str(root), access_ids, n, start, results))
               for n, root in enumerate(roots)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(180)
    assert [w.exitcode for w in workers] == [0] * len(roots)
    return [results.get(timeout=10) for _ in range(rounds * len(roots))]


def assert_one_winner_per_key(said: list[tuple[str, int, str]], lines: list[dict]) -> None:
    for access_id in {access_id for access_id, _, _ in said}:
        assert sorted(o for a, _, o in said if a == access_id) == ["opened", "refused"]
        recorded = [line for line in lines if line.get("access_id") == access_id]
        assert outcomes(recorded) == ["opened", "refused"]
        assert "one access key opens once" in recorded[1]["reason"]


def test_two_processes_racing_a_first_open_on_sqlite_one_opens_one_is_refused(project: Path):
    said = race_first_opens([project, project])
    lines = read_ledger(project / LEDGER)
    assert len(lines) == 10 and [line["seq"] for line in lines] == list(range(1, 11))
    assert_one_winner_per_key(said, lines)
    assert verify_chain(project / LEDGER, load_keys()) is None  # the export: the whole chain
    assert (project / EMBEDDED).is_file()


def test_the_store_itself_refuses_a_second_opened_line_for_one_access(project: Path):
    """The unique constraint, not only the check inside the transaction."""
    store = LedgerStore.open(project)
    key = load_keys().current
    store.open_access(opening("a" * 16), key)

    def ignoring_the_chain(entries: list[dict]) -> dict:
        line = {**opening("a" * 16), "seq": len(entries) + 1, "prev_hash": entries[-1]["hash"],
                "key_id": None, "mac": None}
        line["hash"] = line_hash(line)
        return line

    with pytest.raises(AccessAlreadyOpened, match="one access key opens once"):
        store.store.transact(ignoring_the_chain, lambda line: str(line))
    assert outcomes(store.lines()) == ["opened"]
    with pytest.raises(AccessRefused, match="was already opened by ledger line 1"):
        append(project / LEDGER, opening("a" * 16))  # the old API goes through the same door
    assert outcomes(read_ledger(project / LEDGER)) == ["opened", "refused"]


# --- the export -----------------------------------------------------------------------------


def test_the_export_is_rewritten_from_the_store_and_a_fresh_store_adopts_it(project: Path):
    append(project / LEDGER, {**ENTRY, "outcome": "refused"})
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "n": 2})
    exported = (project / LEDGER).read_text().splitlines()
    assert exported == store_texts(project)
    (project / EMBEDDED).unlink()  # a fresh clone: the committed export and no store yet
    assert LedgerStore.open(project).texts() == exported  # adopted, byte for byte
    assert audit_project(project, []).ok


def test_an_export_behind_the_store_is_a_note_and_an_edited_one_a_problem(project: Path):
    for number in range(3):
        append(project / LEDGER, {**ENTRY, "outcome": "refused", "n": number})
    lines = (project / LEDGER).read_text().splitlines()
    (project / LEDGER).write_text(lines[0] + "\n")  # a clone that has not exported yet
    result = audit_project(project, [])
    assert result.ok, result.problems
    assert result.lines == 3
    assert "ledger lines 2-3 are in the ledger store" in " ".join(result.notes)
    (project / LEDGER).write_text(lines[0] + "\n" + lines[2] + "\n")  # line 2 dropped
    result = audit_project(project, [])
    assert [p for p in result.problems if "is not line 2 of the ledger store" in p]
    assert result.chain_break is not None and result.chain_break.line == 2
    before = (project / LEDGER).read_text()
    append(project / LEDGER, {**ENTRY, "outcome": "refused"})
    assert (project / LEDGER).read_text() == before, "evidence is never overwritten"


def test_a_committed_line_the_store_does_not_hold_is_a_problem(project: Path):
    git(project, "init", "-q", "-b", "main")
    append(project / LEDGER, {**ENTRY, "outcome": "refused"})
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "n": 2})
    git(project, "add", str(LEDGER))
    git(project, "commit", "-q", "-m", "test access")
    replace_store_lines(project, store_texts(project)[:1])  # the store lost line 2
    problems = audit_project(project, []).problems
    assert any("ledger line 2 was committed in" in p and "does not hold it" in p
               for p in problems), problems


def test_merge_keeps_every_line_once_in_chain_order():
    one, two, three = ('{"seq": 1}', '{"seq": 2}', '{"seq": 3}')
    assert merge_exports(f"{one}\n", f"{one}\n{two}\n", f"{one}\n{two}\n{three}\n") == \
        f"{one}\n{two}\n{three}\n"
    assert merge_exports("", f"{one}\n{three}\n", f"{two}\n") == f"{one}\n{two}\n{three}\n"
    fork = '{"seq": 2, "other": 1}'
    assert merge_exports(f"{one}\n", f"{one}\n{two}\n", f"{one}\n{fork}\n") == \
        f"{one}\n{two}\n{fork}\n", "two stores' lines are both kept, ours first"


def test_two_branches_that_each_appended_lines_merge_without_conflict(project: Path):
    git(project, "init", "-q", "-b", "main")
    assert register_merge_driver(project).startswith(f"git merges {EXPORT.as_posix()}")
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "on": "main"})
    git(project, "add", ".gitattributes", str(LEDGER))
    git(project, "commit", "-q", "-m", "first access")
    git(project, "checkout", "-q", "-b", "one")
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "on": "one"})
    git(project, "commit", "-q", "-am", "an access on one")
    git(project, "checkout", "-q", "-b", "two", "main")
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "on": "two"})
    append(project / LEDGER, {**ENTRY, "outcome": "refused", "on": "two, again"})
    git(project, "commit", "-q", "-am", "two accesses on two")
    git(project, "merge", "-q", "-m", "merge one", "one")  # raises on a conflict
    merged = (project / LEDGER).read_text().splitlines()
    assert merged == store_texts(project) and len(merged) == 4
    assert verify_chain(project / LEDGER, load_keys()) is None
    assert audit_project(project, []).ok


# --- one PostgreSQL, two clones --------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as url:
        yield url


@pytest.fixture
def clones(postgres: str, tmp_path: Path) -> list[Path]:
    import psycopg

    with psycopg.connect(postgres, autocommit=True) as connection:  # every test starts empty
        connection.execute("DROP TABLE IF EXISTS heldout_ledger, heldout_ledger_head, "
                           "heldout_team_keys")
    from heldout.custody import store

    store._SCHEMA_READY.clear()
    return [set_ledger_url(copy_project(tmp_path / name), postgres) for name in ("ada", "bob")]


def test_two_clones_on_one_postgresql_write_one_chain(clones: list[Path]):
    ada, bob = clones
    for round_ in range(3):
        append(ada / LEDGER, {**ENTRY, "outcome": "refused", "by": "ada", "round": round_})
        append(bob / LEDGER, {**ENTRY, "outcome": "refused", "by": "bob", "round": round_})
    ada_lines, bob_lines = ((clone / LEDGER).read_text() for clone in clones)
    assert len(bob_lines.splitlines()) == 6
    assert ada_lines == "".join(bob_lines.splitlines(keepends=True)[:5]), "ada's is a prefix"
    LedgerStore.open(ada).store.write_export()
    assert (ada / LEDGER).read_text() == bob_lines  # one chain, one order
    assert [line["by"] for line in read_ledger(ada / LEDGER)] == ["ada", "bob"] * 3
    assert verify_chain(ada / LEDGER, load_keys()) is None
    assert not (ada / EMBEDDED).exists() and not (bob / EMBEDDED).exists()
    for clone in clones:
        result = audit_project(clone, [])
        assert result.ok, result.problems
        assert "postgresql://heldout@127.0.0.1" in result.scope


def test_simultaneous_first_opens_from_two_clones_on_postgresql(clones: list[Path]):
    said = race_first_opens(clones)
    lines = read_ledger(clones[0] / LEDGER)
    assert len(lines) == 10 and [line["seq"] for line in lines] == list(range(1, 11))
    assert_one_winner_per_key(said, lines)
    for clone in clones:
        LedgerStore.open(clone).store.write_export()
        assert verify_chain(clone / LEDGER, load_keys()) is None
    assert (clones[0] / LEDGER).read_text() == (clones[1] / LEDGER).read_text()


def test_two_git_clones_on_postgresql_merge_their_exports_in_chain_order(clones: list[Path]):
    ada, bob = clones
    git(ada, "init", "-q", "-b", "main")
    register_merge_driver(ada)
    git(ada, "add", ".gitattributes", "params.yaml")
    git(ada, "commit", "-q", "-m", "the project")
    subprocess.run(["git", "clone", "-q", str(ada), str(bob / "clone")], check=True)
    bob = bob / "clone"
    register_merge_driver(bob)
    append(ada / LEDGER, {**ENTRY, "outcome": "refused", "by": "ada"})
    git(ada, "add", str(LEDGER))
    git(ada, "commit", "-q", "-m", "ada's access")
    append(bob / LEDGER, {**ENTRY, "outcome": "refused", "by": "bob"})
    git(bob, "add", str(LEDGER))
    git(bob, "commit", "-q", "-m", "bob's access")
    append(ada / LEDGER, {**ENTRY, "outcome": "refused", "by": "ada, again"})
    git(ada, "commit", "-q", "-am", "ada's second access")
    git(bob, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")  # a conflict raises
    assert (bob / LEDGER).read_text() == (ada / LEDGER).read_text()
    assert [line["by"] for line in read_ledger(bob / LEDGER)] == ["ada", "bob", "ada, again"]
    assert audit_project(bob, []).ok, audit_project(bob, []).problems


def append_seconds(project: Path, count: int = 40) -> float:
    key = load_keys().current
    store = LedgerStore.open(project)
    took = []
    for number in range(count):
        started = time.perf_counter()
        store.append({**ENTRY, "outcome": "refused", "n": number}, key)
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def test_append_latency_sqlite_and_postgresql(clones: list[Path], tmp_path: Path, capsys):
    sqlite = append_seconds(copy_project(tmp_path / "embedded"))
    postgres = append_seconds(clones[0])
    with capsys.disabled():
        print(f"\nledger append, median of 40 (export rewritten each time): SQLite "
              f"{sqlite * 1000:.1f} ms, PostgreSQL {postgres * 1000:.1f} ms")
    assert sqlite < 1 and postgres < 1


@pytest.mark.parametrize("uri, expected", [
    ("postgresql+psycopg://team@db.internal:5432/mlflow", "postgresql://team@db.internal:5432/mlflow"),
    ("postgresql://team@db/mlflow", "postgresql://team@db/mlflow"),
    ("http://127.0.0.1:5000", ""),
    ("sqlite:///mlflow.db", ""),
    ("", ""),
])
def test_the_tracking_stores_postgresql_is_the_ledgers_when_params_name_none(uri, expected):
    assert tracking_database({"MLFLOW_TRACKING_URI": uri}) == expected


def test_params_ledger_url_wins_over_the_tracking_store(project: Path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(StoreError, match=r"postgresql://nobody@127\.0\.0\.1:1/none cannot be"):
        open_line_store(project)  # the tracking store's database it is, and it is down
    set_ledger_url(project, f"sqlite:///{project / 'elsewhere.sqlite'}")
    assert open_line_store(project).where == f"sqlite:///{project / 'elsewhere.sqlite'}"


def test_a_copy_dvc_makes_for_an_experiment_writes_the_projects_ledger(tmp_path: Path):
    """`dvc exp run --temp` runs the stages in a copy under .dvc/tmp/exps; a line written into
    the copy's own store would be thrown away with it (issue 37)."""
    project = tmp_path / "project"
    copy = project / ".dvc" / "tmp" / "exps" / "tmp1a2b3c"
    copy.mkdir(parents=True)
    key = load_keys().current
    LedgerStore.open(copy).refuse("an experiment's refused access", key=key)
    assert [line["outcome"] for line in LedgerStore.open(project).lines()] == ["refused"]
    assert (project / LEDGER).read_text().count("\n") == 1
    assert not (copy / ".heldout").exists() and not (copy / LEDGER).exists()
    assert read_ledger(copy / LEDGER) == read_ledger(project / LEDGER)
