"""The guard under attack: every way to reach the test split's file, other than its own name, is
refused and recorded; everything else opens as it would without the guard.

An audit hook cannot be removed once installed, so each attack runs in a process of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import mlflow
import pytest

from heldout.custody.guard import LEDGER, SEALED_TEST, TestSetAccessError, record_refusal
from heldout.custody.ledger import read_ledger
from stages.common import tracked_stage
from tests.conftest import REPO

PRELUDE = """\
import mmap, os, sys
from pathlib import Path
from heldout.custody.guard import TestSetAccessError, install_guard, opening
root = Path(sys.argv[1])
split = root / "data" / "split"
elsewhere = root / "elsewhere"
fds = [int(fd) for fd in sys.argv[2:]]
install_guard(root)
"""
LOCK_RULE = ("outside the test lock: only the test stage may open the test split, inside "
             "heldout.custody.lock.TestLock")
SAME_FILE = "(same file as data/split/test.sealed)"
AN_HOUR_NS = 3600 * 10**9


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A project holding only what the guard looks at, its split written an hour ago."""
    root = (tmp_path / "project").resolve()
    (root / SEALED_TEST).parent.mkdir(parents=True)
    (root / SEALED_TEST).write_bytes(b"the sealed test split")
    (root / "data/split/val.jsonl").write_text('{"id": "v1"}\n')
    (root / "elsewhere").mkdir()
    # A split written in the last two seconds is rescanned at every open; an hour-old one is
    # rescanned only when its folder changes, the path these tests mean to exercise.
    past = time.time_ns() - AN_HOUR_NS
    os.utime(root / SEALED_TEST.parent, ns=(past, past))
    return root


def run_guarded(root: Path, body: str, pass_fds: tuple[int, ...] = ()) -> str:
    """Run `body` in a fresh process with the guard installed on `root`; what it printed:
    the refusal's message, or "passed"."""
    script = (PRELUDE + "try:\n" + textwrap.indent(textwrap.dedent(body), "    ")
              + "except TestSetAccessError as error:\n    print(error)\n"
              + "else:\n    print('passed')\n")
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), *map(str, pass_fds)],
        # The project's parent, so that a bare "test.sealed" names nothing in the working folder.
        cwd=root.parent, pass_fds=pass_fds, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def assert_refused(root: Path, output: str, attempt: str) -> None:
    why = f"{attempt} {LOCK_RULE}"
    assert output == f"refused: {why}. (Recorded as line 1 of {root / LEDGER}.)"
    (entry,) = read_ledger(root / LEDGER)
    assert (entry["outcome"], entry["reason"]) == ("refused", why)


def test_the_file_by_its_own_name_is_refused_as_before(root: Path):
    output = run_guarded(root, 'open(split / "test.sealed", "rb").read()\n')
    assert_refused(root, output, f"open of {root / SEALED_TEST}")


@pytest.mark.parametrize("make_the_name", ["os.link", "os.symlink", "os.rename"])
def test_another_name_for_the_file_is_refused_though_making_the_name_is_not(root: Path,
                                                                             make_the_name):
    output = run_guarded(root, f"""\
        {make_the_name}(split / "test.sealed", elsewhere / "notes.txt")
        open(elsewhere / "notes.txt", "rb").read()
    """)
    assert_refused(root, output, f"open of {root}/elsewhere/notes.txt {SAME_FILE}")


def test_a_name_relative_to_a_directory_descriptor_is_refused(root: Path):
    output = run_guarded(root, """\
        folder = os.open(split, os.O_RDONLY)
        os.open("test.sealed", os.O_RDONLY, dir_fd=folder)
    """)
    assert_refused(root, output,
                   f"open of {root / SEALED_TEST} (through a directory descriptor)")


def test_a_hard_link_relative_to_a_directory_descriptor_is_refused(root: Path):
    output = run_guarded(root, """\
        os.link(split / "test.sealed", elsewhere / "notes.txt")
        folder = os.open(elsewhere, os.O_RDONLY)
        os.open("notes.txt", os.O_RDONLY, dir_fd=folder)
    """)
    assert_refused(root, output, f"open of {root}/elsewhere/notes.txt (through a directory "
                                 "descriptor, same file as data/split/test.sealed)")


def test_mmap_of_a_descriptor_opened_elsewhere_is_refused(root: Path):
    fd = os.open(root / SEALED_TEST, os.O_RDONLY)  # the parent's open, unseen by the guard
    try:
        output = run_guarded(root, "mmap.mmap(fds[0], 0, access=mmap.ACCESS_READ)\n", (fd,))
    finally:
        os.close(fd)
    assert_refused(root, output, f"mmap of descriptor {fd} ({root / SEALED_TEST})")


@pytest.mark.parametrize("reader, attempt", [
    ('open(fds[0], "rb", closefd=False).read()', "open of descriptor {fd} ({root}/elsewhere/"
     "notes.txt, same file as data/split/test.sealed)"),
    ('open(f"/proc/self/fd/{fds[0]}", "rb").read()', "open of /proc/self/fd/{fd} " + SAME_FILE),
])
def test_a_descriptor_opened_elsewhere_is_refused(root: Path, reader: str, attempt: str):
    os.link(root / SEALED_TEST, root / "elsewhere/notes.txt")
    fd = os.open(root / "elsewhere/notes.txt", os.O_RDONLY)  # the parent's, unseen by the guard
    try:
        output = run_guarded(root, reader + "\n", (fd,))
    finally:
        os.close(fd)
    assert_refused(root, output, attempt.format(fd=fd, root=root))


def test_a_file_replaced_after_the_guard_started_is_known_by_its_new_identity(root: Path):
    # The way the split stage writes: a temporary name outside the prefix, renamed into place.
    output = run_guarded(root, """\
        (split / ".incoming.tmp").write_bytes(b"a new sealed test split")
        os.replace(split / ".incoming.tmp", split / "test.sealed")
        os.link(split / "test.sealed", elsewhere / "notes.txt")
        open(elsewhere / "notes.txt", "rb").read()
    """)
    assert_refused(root, output, f"open of {root}/elsewhere/notes.txt {SAME_FILE}")


def test_a_file_not_made_yet_is_refused_by_its_path(root: Path):
    output = run_guarded(root, 'open(split / "test.jsonl", "w")\n')
    assert_refused(root, output, f"open of {root}/data/split/test.jsonl")


def test_every_other_open_passes(root: Path):
    output = run_guarded(root, """\
        open(split / "val.jsonl", "rb").read()
        (elsewhere / "notes.txt").write_text("mine")
        folder = os.open(split, os.O_RDONLY)
        os.close(os.open("val.jsonl", os.O_RDONLY, dir_fd=folder))
        with open(split / "val.jsonl", "rb") as val:
            mmap.mmap(val.fileno(), 0, access=mmap.ACCESS_READ).close()
        mmap.mmap(-1, 4096).close()
    """)
    assert output == "passed"
    assert not (root / LEDGER).exists()


def test_opens_inside_the_lock_context_pass(root: Path):
    output = run_guarded(root, """\
        with opening("access-1"):
            open(split / "test.sealed", "rb").read()
            os.link(split / "test.sealed", elsewhere / "notes.txt")
            folder = os.open(elsewhere, os.O_RDONLY)
            fd = os.open("notes.txt", os.O_RDONLY, dir_fd=folder)
            mmap.mmap(fd, 0, access=mmap.ACCESS_READ).close()
            open(f"/proc/self/fd/{fd}", "rb").read()
    """)
    assert output == "passed"
    assert not (root / LEDGER).exists()


def test_a_refused_stage_run_is_failed_and_tagged_in_mlflow(root: Path, tmp_path: Path,
                                                            monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = {"mlflow": {"experiment": "guard"}}
    with (pytest.raises(TestSetAccessError, match="a peek"),
          tracked_stage(root, params, "select", "select") as run):
        record_refusal(root / LEDGER, "a peek", {})

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("guard").experiment_id
    (found,) = client.search_runs([experiment], "tags.`heldout.test_access_refused` = 'true'")
    assert found.info.run_id == run.run_id and found.info.status == "FAILED"
    (entry,) = read_ledger(root / LEDGER)
    assert (entry["outcome"], entry["mlflow_run_id"]) == ("refused", run.run_id)


# --- a file that left its place, and the sealed task source (issue 23, item 3) ---------------

SOURCE = "tasks/mine.sealed"
SOURCE_RULE = ("outside the split stage: only the split stage may load the sealed task source "
               "(and the test stage, inside heldout.custody.lock.TestLock)")
WATCH_SOURCE = f'install_guard(root, Path("{SOURCE}"))\n'
TRICKS = {
    # Renamed out of its folder, its mtime set to another time: the same inode, another name
    # and mtime, which a (size, mtime) match for files that left the folder let through.
    "renamed and touched": 'os.rename(target, elsewhere / "notes.txt")\n'
                           'os.utime(elsewhere / "notes.txt", ns=(10**9, 10**9))\n',
    "hard link touched": 'os.link(target, elsewhere / "notes.txt")\n'
                         'os.utime(elsewhere / "notes.txt", ns=(10**9, 10**9))\n',
    "renamed twice, touched, the name reused": (
        'os.rename(target, elsewhere / "a")\nos.rename(elsewhere / "a", elsewhere / "notes.txt")\n'
        'os.utime(elsewhere / "notes.txt", ns=(10**9, 10**9))\n'
        '(elsewhere / "new").write_bytes(b"something else now")\n'
        'os.rename(elsewhere / "new", target)\n'),
}


@pytest.fixture
def with_source(root: Path) -> Path:
    (root / SOURCE).parent.mkdir()
    (root / SOURCE).write_bytes(b"HELDOUT-SEALED-2\nthe sealed private tasks")
    past = time.time_ns() - AN_HOUR_NS
    os.utime(root / SOURCE, ns=(past, past))
    os.utime(root / "tasks", ns=(past, past))
    return root


@pytest.mark.parametrize("trick", sorted(TRICKS))
@pytest.mark.parametrize("watched", ["data/split/test.sealed", SOURCE])
def test_a_file_moved_linked_or_touched_is_still_known(with_source: Path, watched: str,
                                                       trick: str):
    root = with_source
    output = run_guarded(root, WATCH_SOURCE + f'target = root / "{watched}"\n' + TRICKS[trick]
                         + 'open(elsewhere / "notes.txt", "rb").read()\n')
    rule = SOURCE_RULE if watched == SOURCE else LOCK_RULE
    why = f"open of {root}/elsewhere/notes.txt (same file as {watched}) {rule}"
    assert output == f"refused: {why}. (Recorded as line 1 of {root / LEDGER}.)"
    (entry,) = read_ledger(root / LEDGER)
    assert (entry["outcome"], entry["reason"]) == ("refused", why)


def test_the_sealed_source_by_its_own_name_is_refused_and_dealing_opens_it(with_source: Path):
    root = with_source
    refused = run_guarded(root, WATCH_SOURCE + f'open(root / "{SOURCE}", "rb").read()\n')
    assert refused == (f"refused: open of {root / SOURCE} {SOURCE_RULE}. (Recorded as line 1 "
                       f"of {root / LEDGER}.)")
    passed = run_guarded(root, WATCH_SOURCE + textwrap.dedent(f"""\
        from heldout.custody.guard import dealing, sealing
        with dealing():
            open(root / "{SOURCE}", "rb").read()
        with opening("access-1"):
            open(root / "{SOURCE}", "rb").read()
            open(split / "test.sealed", "rb").read()
        try:
            with dealing():  # dealing reads the source, not the test split
                open(split / "test.sealed", "rb").read()
        except TestSetAccessError:
            pass
        else:
            raise AssertionError("dealing opened the test split")
        with sealing():  # sealing writes the test split, and reads no source
            open(split / "test.sealed", "rb").read()
            open(root / "{SOURCE}", "rb").read()
    """))
    assert passed.startswith(f"refused: open of {root / SOURCE} {SOURCE_RULE}")
    assert len(read_ledger(root / LEDGER)) == 3  # the first test's, dealing's, sealing's


def test_a_new_file_on_a_freed_inode_number_is_not_taken_for_the_one_that_left(
        with_source: Path):
    root = with_source
    output = run_guarded(root, WATCH_SOURCE + textwrap.dedent("""\
        os.rename(root / "tasks/mine.sealed", elsewhere / "moved")
        os.unlink(elsewhere / "moved")
        # The freed inode number is often the next one given out: whatever it is, a file with
        # other content is not the source, nor is an ordinary file next to the split.
        for number in range(20):
            (elsewhere / f"new-{number}").write_bytes(b"HELDOUT-SEALED-2\\nother tasks")
            open(elsewhere / f"new-{number}", "rb").read()
        open(split / "val.jsonl", "rb").read()
    """))
    assert output == "passed"
    assert not (root / LEDGER).exists()
