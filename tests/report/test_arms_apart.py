"""`heldout compare` of arms whose rows say they ran at different times (issue 38 item 4): not
decidable unless the runs interleave or a reference checkpoint ran beside each arm; the
reference is checked to have run beside its arm; rows that do not say when are a caveat."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from heldout.report import build_report
from heldout.report.estimates import TEST_RUNS_APART
from heldout.statistics.decision import NOT_DECIDABLE
from heldout.statistics.power import Reruns
from tests.report.test_compare_cli import heldout
from tests.report.test_report import STARTED_AT, passing, rollouts

MONDAY = STARTED_AT
WEEK = 7 * 24 * 3600.0


def timed(table: pd.DataFrame, start: float, every: float = 1.0) -> pd.DataFrame:
    """The table's episodes started one after the other from `start`, `every` seconds apart."""
    return table.assign(started_at=start + every * np.arange(len(table), dtype=float))


def write(folder: Path, name: str, table: pd.DataFrame) -> Path:
    path = folder / f"{name}.parquet"
    table.to_parquet(path)
    return path


def arms(folder: Path, candidate_start: float) -> tuple[Path, Path]:
    """80 tasks, the candidate passing 20 more than the base (tests/report/test_compare_cli)."""
    base = write(folder, "A", timed(rollouts("base", passing(80, range(20))), MONDAY))
    candidate = write(folder, "B", timed(rollouts("step_9", passing(80, range(40))),
                                         candidate_start))
    return base, candidate


def reference(folder: Path, name: str, start: float, passes: range = range(30)) -> Path:
    return write(folder, name, timed(rollouts("ref", passing(80, passes)), start))


def verdict(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())["headline"]


def test_arms_a_week_apart_are_not_decidable(tmp_path: Path):
    base, candidate = arms(tmp_path, MONDAY + WEEK)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Not decidable (the arms ran at different times): step_9 "
                                  "50.0% vs base 25.0%")
    assert ("Why: the arms ran at different times (base 2026-11-30 00:53–00:54 UTC, step_9 "
            "2026-12-07 00:53–00:54 UTC): drift between them is not controlled") in done.stdout
    headline = verdict(tmp_path / "out")
    assert headline["timing"]["apart"].startswith("the arms ran at different times")
    assert "the arms ran at different times" in [gate["name"] for gate in headline["gates"]]


def test_arms_run_turn_about_are_decided(tmp_path: Path):
    # Every other second: the candidate's episodes start between the base's.
    base = write(tmp_path, "A", timed(rollouts("base", passing(80, range(20))), MONDAY, 2.0))
    candidate = write(tmp_path, "B", timed(rollouts("step_9", passing(80, range(40))),
                                           MONDAY + 1, 2.0))
    done = heldout("compare", base, candidate, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Better: step_9 50.0% vs base 25.0%")
    assert verdict(tmp_path / "out")["timing"] == {"apart": None, "unknown": None,
                                                   "reference": None}


def test_a_reference_beside_each_arm_decides_when_the_claim_clears_its_movement(tmp_path):
    base, candidate = arms(tmp_path, MONDAY + WEEK)
    # Beside each arm, turn about with it, the reference passes the same 30 tasks: it did not
    # move, and the +25-point gain clears its interval.
    beside_a = reference(tmp_path, "RA", MONDAY + 0.5)
    beside_b = reference(tmp_path, "RB", MONDAY + WEEK + 0.5)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--reference-a", beside_a, "--reference-b", beside_b)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Better: step_9 50.0% vs base 25.0%")
    headline = verdict(tmp_path / "out")
    assert headline["timing"]["apart"] is None
    assert headline["timing"]["reference"]["estimate"] == 0.0
    assert any(note.startswith("Drift control: the reference checkpoint, run beside each arm, "
                               "moved +0.0 points") for note in headline["notes"])

    # The reference gained as much between the two weeks: the server moved, not the model.
    moved = reference(tmp_path, "RB2", MONDAY + WEEK + 0.5, range(50))
    held = heldout("compare", base, candidate, "--out", tmp_path / "held",
                   "--reference-a", beside_a, "--reference-b", moved)
    assert held.returncode == 0, held.stderr
    assert held.stdout.startswith("No difference detected: step_9 50.0% vs base 25.0%")
    assert "the reference checkpoint moved +25.0 points" in held.stdout
    # Of the 40 tasks both arms always fail (40-79), the reference passed 40-49 beside B:
    # those failures are the arms', the other 30 may be no policy's to pass.
    both_fail = json.loads((tmp_path / "held" / "report.json").read_text())["slices"]
    assert both_fail["both_fail"] == {"tasks": 40, "shown_passable": 10,
                                      "evidence": "the reference checkpoint's runs"}


def test_a_selector_column_the_files_lack_is_refused(tmp_path: Path):
    base, candidate = arms(tmp_path, MONDAY)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--selector", "reward_pick")
    assert done.returncode == 2
    assert "--selector reward_pick: no such column in" in done.stderr


def test_a_reference_that_did_not_run_beside_its_arm_is_refused(tmp_path: Path):
    base, candidate = arms(tmp_path, MONDAY + WEEK)
    late = reference(tmp_path, "RA", MONDAY + 3 * WEEK)
    beside_b = reference(tmp_path, "RB", MONDAY + WEEK + 0.5)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--reference-a", late, "--reference-b", beside_b)
    assert done.returncode == 2
    assert "the reference beside A ran 2026-12-21" in done.stderr
    assert "not beside A (2026-11-30" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()

    untimed = write(tmp_path, "RU", rollouts("ref", passing(80, range(30)), started_at=None))
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--reference-a", untimed, "--reference-b", beside_b)
    assert done.returncode == 2 and "when it or A ran is not recorded" in done.stderr

    alone = heldout("compare", base, candidate, "--out", tmp_path / "out",
                    "--reference-a", beside_b)
    assert alone.returncode == 2 and "give both --reference-a and --reference-b" in alone.stderr


def test_rows_that_do_not_say_when_leave_the_verdict_with_a_caveat(tmp_path: Path):
    base = write(tmp_path, "A", rollouts("base", passing(80, range(20)), started_at=None))
    candidate = write(tmp_path, "B", timed(rollouts("step_9", passing(80, range(40))), MONDAY))
    done = heldout("compare", base, candidate, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Better: step_9 50.0% vs base 25.0%")
    assert "when base ran is not recorded (rows without started_at)" in done.stdout


def test_the_test_access_record_of_its_runs_order_decides_over_the_rows():
    # The test stage's rollout files leave the clocks out; its reruns.json says whether its
    # runs interleaved, and runs made one after the other void the verdict.
    base, candidate = (rollouts(name, passing(80, passes), started_at=None)
                       for name, passes in (("base", range(20)), ("step_9", range(40))))
    runs = ((0.25,) * 4, (0.5,) * 4)
    apart = build_report(base, candidate, reruns=Reruns(*runs, interleaved=False))
    assert apart.verdict == f"{NOT_DECIDABLE}: {TEST_RUNS_APART}"
    together = build_report(base, candidate, reruns=Reruns(*runs, interleaved=True))
    assert together.verdict == "better" and together.headline.decision.caveats == []
