"""A resume cache that cannot be edited into a verdict (issue 22): every plain row is MAC'd with
this machine's cache key, kept outside the project, over its episode key and the whole stored
row. A row edited in the SQLite file, moved to another episode, written before rows carried a
MAC or under a key since lost is reported in one line and run again, and the rerun rows are
those of a clean run."""

from __future__ import annotations

import json
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from heldout.canonical import content_digest
from heldout.episodes.cache import (
    BAD_MAC,
    NO_MAC,
    CacheKeyError,
    EpisodeCache,
    cache_key_path,
    machine_cache_key,
)
from heldout.episodes.chunks import EpisodeWork, collect_rollouts, in_process
from heldout.episodes.episode import episode_key_for, plan_episodes
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import agent_context
from heldout.episodes.rows import TIMING_COLUMNS
from heldout.tasks.sources import load_tasks
from tests.conftest import REPO, TEST_KEY_HEX, configure_small_project

TASKS = load_tasks("humaneval")[:3]
HARNESS = Harness(n=2, seed=7, timeout_s=5, retries=0)
EPISODES = plan_episodes(TASKS, HARNESS)
WEAK, STRONG = {"agent": "demo", "skill": -1.0}, {"agent": "demo", "skill": 3.0}


def work(settings: dict) -> EpisodeWork:
    return EpisodeWork("ck", settings, agent_context(HARNESS, REPO), HARNESS)


def key_of(settings: dict) -> Callable:
    return episode_key_for(HARNESS, content_digest(settings))


class Rollout:
    """One checkpoint's episodes through the cache at `path`: which ran, what was said."""

    def __init__(self, path: Path, settings: dict = WEAK):
        self.path, self.settings = path, settings
        self.ran: list[str] = []
        self.warnings: list[str] = []

    def __call__(self) -> list[dict]:
        self.ran, self.warnings = [], []
        keys = key_of(self.settings)

        def execute(pieces):
            self.ran.extend(keys(e) for _, part in pieces for e in part)
            return in_process(pieces)

        rows = collect_rollouts(work(self.settings), EPISODES, execute, EpisodeCache(self.path),
                                keys, 2, warn=self.warnings.append)
        return without_timings(rows)

    def keys(self) -> list[str]:
        return [key_of(self.settings)(e) for e in EPISODES]


def without_timings(rows: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in row.items() if k not in TIMING_COLUMNS} for row in rows),
                  key=lambda row: (row["task_id"], row["sample"]))


def rerun_line(path: Path, count: int, reason: str) -> str:
    episodes = "episode" if count == 1 else "episodes"
    return (f"{path}: {count} stored {episodes} could not be used and will run again: "
            f"{reason} ({count})")


@pytest.fixture(scope="module")
def clean() -> dict[str, list[dict]]:
    """Each checkpoint's rows from a run with nothing stored."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return {name: Rollout(Path(folder) / f"{name}.sqlite", settings)()
                for name, settings in (("weak", WEAK), ("strong", STRONG))}


def edit_rows(path: Path, keys: list[str], change: Callable[[dict], None]) -> None:
    """Change stored rows in the SQLite file itself, leaving their MACs as they were."""
    with sqlite3.connect(path) as db:
        for key in keys:
            (text,) = db.execute("SELECT row FROM episodes WHERE key = ?", (key,)).fetchone()
            row = json.loads(text)
            change(row)
            db.execute("UPDATE episodes SET row = ? WHERE key = ?", (json.dumps(row), key))


def flip_passed(row: dict) -> None:
    row["passed"] = not row["passed"]


def swap_status(row: dict) -> None:
    row["status"] = "timeout" if row["status"] == "ok" else "ok"


def other_completion(row: dict) -> None:
    row["completion"] = "def f(*args):\n    return None\n"


def no_error(row: dict) -> None:
    row["error"] = "" if row["error"] else "edited"


def empty_trajectory(row: dict) -> None:
    row["trajectory"] = "[]" if row["trajectory"] != "[]" else '[{"turn": 1}]'


@pytest.mark.parametrize("change", [flip_passed, swap_status, other_completion, no_error,
                                    empty_trajectory])
def test_a_row_edited_in_the_file_is_run_again_and_the_rerun_is_a_clean_runs(
        tmp_path: Path, clean, change):
    rollout = Rollout(tmp_path / "episodes.sqlite")
    assert rollout() == clean["weak"] and rollout.warnings == []
    edited = rollout.keys()[1:4]
    edit_rows(rollout.path, edited, change)

    assert rollout() == clean["weak"]
    assert sorted(rollout.ran) == sorted(edited)
    assert rollout.warnings == [rerun_line(rollout.path, 3, BAD_MAC)]
    # The reruns replaced the edited rows: the next resume reads everything, quietly.
    assert rollout() == clean["weak"] and rollout.ran == [] and rollout.warnings == []


def test_flipping_every_passed_cannot_raise_a_score(tmp_path: Path, clean):
    rollout = Rollout(tmp_path / "episodes.sqlite")
    rollout()
    edit_rows(rollout.path, rollout.keys(), lambda row: row.update(passed=True, status="ok",
                                                                    error=""))
    rows = rollout()
    failed = sum(not row["passed"] for row in clean["weak"])
    assert rows == clean["weak"] and failed > 0
    # The rows that passed are unchanged by the edit: only the failed ones were made to lie.
    assert rollout.warnings == [rerun_line(rollout.path, failed, BAD_MAC)]


def test_a_row_moved_to_another_checkpoints_episode_is_detected(tmp_path: Path, clean):
    """The checkpoint is in neither the row nor its seed (common random numbers), so a strong
    checkpoint's row, MAC and all, looks like the weak one's own on the same episode: only the
    MAC, over the episode key, tells them apart."""
    path = tmp_path / "episodes.sqlite"
    weak, strong = Rollout(path, WEAK), Rollout(path, STRONG)
    weak()
    strong()
    assert sum(r["passed"] for r in clean["strong"]) > sum(r["passed"] for r in clean["weak"])
    with sqlite3.connect(path) as db:
        for weak_key, strong_key in zip(weak.keys(), strong.keys(), strict=True):
            row, mac = db.execute("SELECT row, mac FROM episodes WHERE key = ?",
                                  (strong_key,)).fetchone()
            db.execute("UPDATE episodes SET row = ?, mac = ? WHERE key = ?",
                       (row, mac, weak_key))

    assert weak() == clean["weak"]
    assert sorted(weak.ran) == sorted(weak.keys())
    assert weak.warnings == [rerun_line(path, len(EPISODES), BAD_MAC)]
    assert strong() == clean["strong"] and strong.ran == []


def test_rows_stored_before_rows_carried_a_mac_are_run_again(tmp_path: Path, clean):
    written = Rollout(tmp_path / "new.sqlite")
    written()
    # The file as an older heldout left it: no mac column at all.
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(written.path) as new, sqlite3.connect(old) as db:
        db.execute("CREATE TABLE episodes (key TEXT PRIMARY KEY, row TEXT)")
        db.executemany("INSERT INTO episodes VALUES (?, ?)",
                       new.execute("SELECT key, row FROM episodes"))
    rollout = Rollout(old)
    assert rollout() == clean["weak"]
    assert sorted(rollout.ran) == sorted(rollout.keys())
    assert rollout.warnings == [rerun_line(old, len(EPISODES), NO_MAC)]
    # A MAC cleared from a row is the same as none.
    with sqlite3.connect(old) as db:
        db.execute("UPDATE episodes SET mac = NULL WHERE key = ?", (rollout.keys()[0],))
    assert rollout() == clean["weak"] and rollout.ran == rollout.keys()[:1]
    assert rollout.warnings == [rerun_line(old, 1, NO_MAC)]


def test_the_cache_key_lives_outside_the_project_and_a_lost_one_is_replaced(
        tmp_path: Path, monkeypatch, clean):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    project = tmp_path / "project"
    rollout = Rollout(project / ".heldout" / "episodes.sqlite")
    assert rollout() == clean["weak"]
    path = cache_key_path()
    assert path == tmp_path / "config" / "heldout" / "cache-key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.read_text()
    assert len(bytes.fromhex(first.strip())) == 32 and TEST_KEY_HEX not in first
    assert not any(first.strip() in p.read_bytes().decode("latin-1")
                   for p in project.rglob("*") if p.is_file())

    path.unlink()
    assert rollout() == clean["weak"]  # no crash: a new key, and every row run again
    assert path.read_text() != first and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(rollout.ran) == sorted(rollout.keys())
    assert rollout.warnings == [rerun_line(rollout.path, len(EPISODES), BAD_MAC)]
    assert rollout() == clean["weak"] and rollout.ran == []


def test_a_damaged_cache_key_is_named_with_what_to_do(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    cache_key_path().parent.mkdir(parents=True)
    cache_key_path().write_text("not a key\n")
    with pytest.raises(CacheKeyError, match="cache-key: not a readable cache key .*delete it"):
        machine_cache_key()


def test_the_rollouts_stage_reads_no_flipped_verdict(project: Path, monkeypatch, capsys):
    """The issue's case: `passed` set to true in .heldout/episodes.sqlite between two runs of
    the rollouts stage, with the same completions, used to raise val pass@1 (0.365 to 0.998)."""
    from stages import catalog, rollouts, split

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    configure_small_project(project, tasks=12, n=2, checkpoints={"base": WEAK},
                            rollouts={"in_flight": 1})
    split.run(project)
    first = rollouts.run("base", project)
    before = pd.read_parquet(project / catalog.rollout_file("base"))
    assert 0 < before["passed"].sum() < len(before)
    with sqlite3.connect(project / ".heldout" / "episodes.sqlite") as db:
        db.execute("UPDATE episodes SET row = json_set(row, '$.passed', json('true'), "
                   "'$.status', 'ok', '$.error', '')")
    capsys.readouterr()
    again = rollouts.run("base", project)
    after = pd.read_parquet(project / catalog.rollout_file("base"))
    pd.testing.assert_frame_equal(after.drop(columns=list(TIMING_COLUMNS)),
                                  before.drop(columns=list(TIMING_COLUMNS)))
    assert again["resumed"] == 0 and again["episode_pass_rate"] == first["episode_pass_rate"]
    assert f"{len(before)} stored episodes could not be used and will run again: " \
           f"{BAD_MAC} ({len(before)})" in capsys.readouterr().err
