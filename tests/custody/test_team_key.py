"""A team key that cannot be replaced by habit (issue 23, item 5): once a team key is named
(params.custody.public_key, or the ledger store's record of it: `heldout key --team`), `split`
seals for no other key and `test` opens with no other, refusing in one line (exit 2) and, at
test, in a `refused` ledger line. Rotation, by the team key's holder, stays as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from heldout.custody.guard import LEDGER, SEALED_TEST, sealing
from heldout.custody.keys import KEY_ENV, TeamKeyError, TestKey, require_team_key
from heldout.custody.ledger import LedgerStore, read_ledger
from heldout.custody.seal import seal, sealed_for, unseal
from stages import select, split
from stages import test as test_stage
from stages.tracking import runs_touching_test_split
from tests.conftest import TEST_KEY_HEX
from tests.custody.test_lock import audit_of, set_params
from tests.custody.test_test_access import error_lines

TEAM = TestKey(bytes.fromhex(TEST_KEY_HEX))
MINE = TestKey(bytes.fromhex("44" * 32))  # a teammate's own key


@pytest.fixture
def project(selected_copy: Path) -> Path:
    return selected_copy


def heldout(project: Path, *args: str, key: TestKey | str = TEAM) -> subprocess.CompletedProcess:
    secret = key if isinstance(key, str) else key.secret.hex()
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=project,
                          env={**os.environ, KEY_ENV: secret}, capture_output=True, text=True,
                          timeout=300)


def name_the_team_key(project: Path) -> None:
    done = heldout(project, "key", "--team")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"named test key {TEAM.key_id} as the team key in {LedgerStore.open(project).where}",
        "commit this in params.yaml (then `dvc repro split` seals for it):",
        "custody:", f"  public_key: {TEAM.public.hex()}"]


def test_heldout_key_team_names_the_key_in_the_store_and_prints_what_to_commit(project: Path):
    name_the_team_key(project)
    assert LedgerStore.open(project).team_keys() == [TEAM.public.hex()]
    again = heldout(project, "key", "--team")
    assert again.stdout.splitlines()[0].startswith(f"test key {TEAM.key_id} is the team key")
    foreign = heldout(project, "key", "--team", key=MINE)
    assert foreign.returncode == 2
    (error,) = error_lines(foreign.stderr)
    assert error.startswith(f"error: the team key named in {LedgerStore.open(project).where} "
                            f"is {TEAM.key_id}, and this shell holds {MINE.key_id}")
    assert LedgerStore.open(project).team_keys() == [TEAM.public.hex()]
    assert TEST_KEY_HEX not in again.stdout + foreign.stdout + foreign.stderr


def test_a_teammates_own_key_is_refused_at_split_in_one_line(project: Path):
    name_the_team_key(project)
    with sealing():
        before = (project / SEALED_TEST).read_bytes()
    set_params(project, "custody", public_key=MINE.public.hex())  # the habit: my own key
    done = heldout(project, "stage", "split", key=MINE)
    assert done.returncode == 2, done.stderr
    (error,) = error_lines(done.stderr)
    assert error.startswith(f"error: refused: params.custody.public_key is test key "
                            f"{MINE.key_id}, and the team key named in ")
    assert f"is {TEAM.key_id}: the split is sealed only for the team key" in error
    with sealing():
        assert (project / SEALED_TEST).read_bytes() == before
    set_params(project, "custody", public_key="")  # no key named in params: the store's
    assert heldout(project, "stage", "split", key=MINE).returncode == 0
    with sealing():
        assert sealed_for((project / SEALED_TEST).read_bytes()) == TEAM.key_id


def test_a_teammates_own_key_is_refused_at_test_with_a_refused_line(project: Path):
    name_the_team_key(project)
    # The split sealed for the teammate's key some other way (an older heldout, by hand).
    with sealing():
        plain = unseal((project / SEALED_TEST).read_bytes(), TEAM)
        (project / SEALED_TEST).write_bytes(seal(plain, MINE.public))
    set_params(project, "custody", public_key=MINE.public.hex())
    done = heldout(project, "stage", "test", key=MINE)
    assert done.returncode == 2, done.stderr
    (error,) = error_lines(done.stderr)
    assert error.startswith(f"error: refused: test key {MINE.key_id} is not the team key "
                            f"{TEAM.key_id} named in the ledger store ")
    (line,) = read_ledger(project / LEDGER)
    assert (line["outcome"], line["foreign_key_id"], line["mac"]) == ("refused", MINE.key_id,
                                                                      None)
    assert runs_touching_test_split(project) == []  # refused before any run opened
    assert audit_of(project).ok, audit_of(project).problems


def test_require_team_key_reads_the_params_or_the_store(project: Path):
    params = {"custody": {"public_key": TEAM.public.hex()}}
    assert require_team_key(params, TEAM) is TEAM
    with pytest.raises(TeamKeyError, match=f"test key {MINE.key_id} is not the team key "
                                           f"{TEAM.key_id} named in params.custody.public_key"):
        require_team_key(params, MINE)
    store = LedgerStore.open(project)
    assert require_team_key(store, MINE) is MINE, "no team key named yet: nothing to refuse"
    assert read_ledger(project / LEDGER) == []


def test_rotation_by_the_team_keys_holder_stays_as_documented(project: Path, monkeypatch):
    set_params(project, "custody", public_key=TEAM.public.hex())
    split.run(project)  # a key named in params is recorded on first use
    assert LedgerStore.open(project).team_keys() == [TEAM.public.hex()]
    monkeypatch.setenv(KEY_ENV, f"{MINE.secret.hex()},{TEST_KEY_HEX}")  # NEW,OLD
    set_params(project, "custody", public_key=MINE.public.hex())
    split.run(project)
    assert LedgerStore.open(project).team_keys() == [TEAM.public.hex(), MINE.public.hex()]
    select.run(project)
    assert test_stage.run(project)["tasks"] > 0
    monkeypatch.setenv(KEY_ENV, TEST_KEY_HEX)  # the old key alone may no longer open it
    set_params(project, "custody", public_key=TEAM.public.hex())
    with pytest.raises(TeamKeyError):
        split.run(project)
