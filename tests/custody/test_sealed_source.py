"""The task source is part of custody (issue 23, item 3): a private task file sealed for the
team's key (`heldout tasks seal`) is dealt by `split`, unsealed in memory, into the very split
its plain file gives; no other stage can load it (the guard refuses and the ledger records it);
and `heldout tasks seal` seals for the team key only, and says what is wrong with its input in
one line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from heldout.custody.guard import LEDGER, SOURCE_RULE
from heldout.custody.keys import KEY_ENV, TestKey
from heldout.custody.ledger import LedgerStore, read_ledger
from heldout.custody.seal import sealed_for, unseal
from stages import split
from tests.conftest import REPO, TEST_KEY_HEX, task_record, write_jsonl
from tests.custody.test_test_access import error_lines

TEAM = TestKey(bytes.fromhex(TEST_KEY_HEX))
MINE = TestKey(bytes.fromhex("44" * 32))
PLAIN, SEALED = "tasks/private.jsonl", "tasks/private.sealed"


def heldout(project: Path, *args: str, key: TestKey = TEAM) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=project,
                          env={**os.environ, KEY_ENV: key.secret.hex(), "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)


def use_source(project: Path, source: str, **custody: str) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["tasks"]["source"] = source
    params["custody"].update(custody)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def private(project: Path) -> Path:
    """A project with a private task file of 120 tasks in 30 groups, and its sealed copy."""
    write_jsonl(project / PLAIN, [task_record(f"p{i}", group=f"family-{i % 30}")
                                  for i in range(120)])
    done = heldout(project, "tasks", "seal", PLAIN, "--out", SEALED)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(
        f"sealed 120 tasks in 30 groups from {PLAIN} for test key {TEAM.key_id}")
    return project


def test_split_deals_from_the_sealed_source_the_split_of_the_plain_one(private: Path):
    sealed = (private / SEALED).read_bytes()
    assert b'"prompt"' not in sealed and sealed_for(sealed) == TEAM.key_id
    assert unseal(sealed, TEAM) == (private / PLAIN).read_bytes()
    use_source(private, PLAIN)
    plain = split.run(private)
    (private / PLAIN).unlink()  # the sealed file alone: nothing else to deal from
    use_source(private, SEALED)
    dealt = split.run(private)
    assert dealt["digests"] == plain["digests"] and dealt["counts"] == plain["counts"]
    assert (dealt["test_version"], dealt["source_digest"]) == (plain["test_version"],
                                                               plain["source_digest"])
    assert dealt["source"] == SEALED
    assert not (private / LEDGER).exists() or all(
        e["outcome"] != "refused" for e in read_ledger(private / LEDGER))


def test_split_refuses_a_sealed_source_without_the_team_key(private: Path):
    use_source(private, SEALED)
    done = heldout(private, "stage", "split", key=MINE)
    assert done.returncode == 2
    (error,) = error_lines(done.stderr)
    assert f"sealed for test key {TEAM.key_id}, and the key here is {MINE.key_id}" in error
    assert "Traceback" not in done.stderr


def guarded(project: Path, body: str) -> str:
    """`body`, run in a fresh process as a stage starts (stages.common.project_root)."""
    script = ("import sys\nfrom pathlib import Path\n"
              "from heldout.custody.guard import TestSetAccessError\n"
              "from stages.common import project_root\n"
              "root = project_root(Path(sys.argv[1]))\ntry:\n"
              + textwrap.indent(textwrap.dedent(body), "    ")
              + "except TestSetAccessError as error:\n    print(error.recorded, error)\n"
              + "else:\n    print('passed')\n")
    done = subprocess.run([sys.executable, "-c", script, str(project)], cwd=project,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("load", [
    # What a rollouts or decontaminate stage (or a python agent inside one) would call.
    'from heldout.tasks.sources import load_tasks\nload_tasks(root / "tasks/private.sealed")\n',
    'open(root / "tasks/private.sealed", "rb").read()\n',
    'import os\nos.link(root / "tasks/private.sealed", root / "copy")\n'
    'os.utime(root / "copy", ns=(10**9, 10**9))\nopen(root / "copy", "rb").read()\n',
])
def test_another_stage_loading_the_sealed_source_is_refused_and_ledgered(private: Path,
                                                                        load: str):
    use_source(private, SEALED)
    output = guarded(private, load)
    assert output.startswith("True refused: open of ") and SOURCE_RULE in output
    (entry,) = read_ledger(private / LEDGER)
    assert entry["outcome"] == "refused" and SOURCE_RULE in entry["reason"]
    # And where the source is plain (HumanEval, a JSONL file), nothing is watched.
    use_source(private, PLAIN)
    assert guarded(private, 'open(root / "tasks/private.sealed", "rb").read()\n') == "passed"


def test_heldout_tasks_seal_seals_for_the_team_key_and_refuses_another(private: Path):
    assert heldout(private, "key", "--team").returncode == 0
    other = heldout(private, "tasks", "seal", PLAIN, "--out", "tasks/other.sealed",
                    "--public-key", MINE.public.hex())
    assert other.returncode == 2 and "Traceback" not in other.stderr
    (error,) = error_lines(other.stderr)
    assert error == (f"error: refused: test key {MINE.key_id} is not the team key "
                     f"{TEAM.key_id} named in the ledger store {LedgerStore.open(private).where}"
                     ": a task source is sealed only for the team key (`heldout key --team` "
                     "prints it)")
    assert not (private / "tasks/other.sealed").exists()
    # Params naming another key than the store's team key: refused as split refuses them.
    use_source(private, SEALED, public_key=MINE.public.hex())
    foreign = heldout(private, "tasks", "seal", PLAIN, "--out", "tasks/other.sealed", key=MINE)
    assert foreign.returncode == 2 and len(error_lines(foreign.stderr)) == 1
    assert not (private / "tasks/other.sealed").exists()
    use_source(private, SEALED, public_key=TEAM.public.hex())
    team = heldout(private, "tasks", "seal", PLAIN, "--out", "tasks/other.sealed",
                   "--public-key", TEAM.public.hex(), key=MINE)
    assert team.returncode == 0, team.stderr
    assert sealed_for((private / "tasks/other.sealed").read_bytes()) == TEAM.key_id


@pytest.mark.parametrize("content, out, expected", [
    (None, "tasks/x.sealed", "error: tasks/input.jsonl: no such file"),
    (b"hello\n", "tasks/x.sealed",
     "error: tasks/input.jsonl:1: invalid JSON: Expecting value at column 1"),
    (b"hello\n[1]\n", "tasks/x.sealed",
     "error: tasks/input.jsonl:1: invalid JSON: Expecting value at column 1 (and 1 more "
     "problems: `heldout tasks validate tasks/input.jsonl` lists them)"),
    (b"\x00\xff\xfe" * 50, "tasks/x.sealed", "error: tasks/input.jsonl:1: "),
    (b"", "tasks/x.sealed", "error: tasks/input.jsonl: no tasks: the file is empty"),
    (b"HELDOUT-SEALED-2\n" + bytes(70), "tasks/x.sealed",
     "error: tasks/input.jsonl: already sealed"),
    (b'{"id": "a"}\n', "tasks/x.jsonl", "error: --out tasks/x.jsonl: a sealed task source's "
     "name ends in .sealed"),
])
def test_heldout_tasks_seal_reports_bad_input_in_one_line(project: Path, content, out,
                                                          expected):
    if content is not None:
        (project / "tasks/input.jsonl").write_bytes(content)
    done = heldout(project, "tasks", "seal", "tasks/input.jsonl", "--out", out)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.strip().startswith(expected)
    assert not (project / out).exists()


def test_the_pipelines_cost_line_never_stops_a_sealed_source_before_its_split(private: Path):
    from cli.main import _cost

    use_source(private, SEALED)
    said = _cost(private, None, False)
    assert said == " (its cost is not known until the split has run)"
