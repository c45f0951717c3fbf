"""`heldout compare A.parquet B.parquet --out DIR`: the paired report from any two rollout files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.report.test_report import OTHER_HARNESS, passing, rollouts

REPORT_FILES = {"report.md", "report.html", "report.json", "figures"}


def heldout(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *map(str, args)], capture_output=True, text=True
    )


def rollout_files(folder: Path, candidate_harness: str | None = None) -> tuple[Path, Path]:
    """80 tasks: the base passes 20, the candidate those and 20 more. 80, not fewer: the 60
    tasks an arm fails clear the rule's gate of 50 (and 80 its gate of 30 tasks), so the
    verdict can be decided."""
    base, candidate = folder / "A.parquet", folder / "B.parquet"
    rollouts("base", passing(80, range(20))).to_parquet(base)
    extra = {"harness": candidate_harness} if candidate_harness else {}
    rollouts("step_9", passing(80, range(40)), **extra).to_parquet(candidate)
    return base, candidate


def test_compare_writes_the_report_and_prints_its_headline(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--candidate-name", "tuned")
    assert done.returncode == 0, done.stderr
    assert {p.name for p in (tmp_path / "out").iterdir()} == REPORT_FILES
    assert done.stdout.startswith("Better: tuned 50.0% vs base 25.0%, +25.0 points [")
    assert "c = 20 (tuned passes, base fails)" in done.stdout
    assert "tuned" in (tmp_path / "out/report.md").read_text()


def test_a_harness_mismatch_exits_2_and_writes_nothing_unless_allowed(tmp_path: Path):
    base, candidate = rollout_files(tmp_path, candidate_harness=OTHER_HARNESS)
    refused = heldout("compare", base, candidate, "--out", tmp_path / "out")
    assert refused.returncode == 2
    assert "different harnesses: base under aaaaaaaaaaaa and step_9 under bbbbbbbbbbbb" in \
        refused.stderr
    assert "--allow-harness-mismatch" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "out").exists()

    allowed = heldout("compare", base, candidate, "--out", tmp_path / "out",
                      "--allow-harness-mismatch")
    assert allowed.returncode == 0, allowed.stderr
    assert "HARNESS MISMATCH" in allowed.stdout
    assert allowed.stdout.startswith("Not decidable (not comparable): step_9 50.0% vs base")
    assert ("Why: the arms ran under different harnesses, so part of any difference may be the "
            "harness's") in allowed.stdout
    assert "HARNESS MISMATCH" in (tmp_path / "out/report.html").read_text()


def test_a_missing_or_unreadable_file_exits_2_naming_it(tmp_path: Path):
    base, _ = rollout_files(tmp_path)
    not_parquet = tmp_path / "notes.parquet"
    not_parquet.write_text("not parquet")
    for wrong in (tmp_path / "missing.parquet", not_parquet):
        done = heldout("compare", base, wrong, "--out", tmp_path / "out")
        assert done.returncode == 2 and str(wrong) in done.stderr
        assert "Traceback" not in done.stderr


def test_paired_reruns_of_both_arms_give_the_run_drift_and_must_pair(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    reruns = []
    for number, (a, b) in enumerate(((range(18), range(40)), (range(22), range(40)),
                                     (range(20), range(40))), start=1):
        reruns += [tmp_path / f"A{number}.parquet", tmp_path / f"B{number}.parquet"]
        rollouts("base", passing(80, a)).to_parquet(reruns[-2])
        rollouts("step_9", passing(80, b)).to_parquet(reruns[-1])
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   *[arg for number in (0, 2, 4) for arg in ("--rerun-a", reruns[number],
                                                          "--rerun-b", reruns[number + 1])])
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out/report.json").read_text())
    drift = report["headline"]["run_drift"]
    # pass@1 of the four runs: base 20/80, 18/80, 22/80, 20/80, candidate 40/80 in each; the
    # differences 20/80, 22/80, 18/80, 20/80 have sd √(8/3)/80.
    assert (drift["n_runs"], drift["run_sd"]) == (4, pytest.approx((8 / 3) ** 0.5 / 80))
    # The episodes' noise the runs' spread carries, read back from the pooled files' runs:
    # here every task passes or fails in every run but t018-t021, so it is small, not 0.
    assert 0 < drift["noise"] < drift["run_sd"] ** 2 / 4
    assert "(4 runs pooled)" in done.stdout and "on 3 df" in done.stdout

    # Two runs of each arm are refused, saying why.
    two = heldout("compare", base, candidate, "--out", tmp_path / "two",
                  "--rerun-a", reruns[0], "--rerun-b", reruns[1])
    assert two.returncode == 2 and "2 paired runs of each arm" in two.stderr
    assert "at least 4 times" in two.stderr and "Traceback" not in two.stderr

    rollouts("base", passing(79, range(20))).to_parquet(reruns[0])
    refused = heldout("compare", base, candidate, "--out", tmp_path / "other",
                      *[arg for number in (0, 2, 4) for arg in ("--rerun-a", reruns[number],
                                                               "--rerun-b", reruns[number + 1])])
    assert refused.returncode == 2
    assert "rerun 1 of the base holds other tasks than its first run (1 differ)" in \
        refused.stderr
    unpaired = heldout("compare", base, candidate, "--out", tmp_path / "other",
                       "--rerun-a", reruns[2])
    assert unpaired.returncode == 2
    assert "got 1 rerun(s) of the base and 0 of the candidate" in unpaired.stderr


def groups_of_four(folder: Path) -> Path:
    """The 80 tasks of rollout_files in 20 groups of 4 (t000-t003 in g00, ...), as a file."""
    path = folder / "groups.jsonl"
    path.write_text("".join(json.dumps({"task_id": f"t{i:03d}", "group": f"g{i // 4:02d}"}) + "\n"
                            for i in range(80)))
    return path


def metrics(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())["metrics"]


def test_compare_takes_groups_from_a_file_a_group_column_or_the_task_source(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    alone = heldout("compare", base, candidate, "--out", tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr
    assert "Rests on 80 tasks in 80 groups" in alone.stdout

    # The 20 tasks the candidate gains are 5 whole groups of 4: 5 units, not 20.
    grouped = heldout("compare", base, candidate, "--out", tmp_path / "grouped",
                      "--groups", groups_of_four(tmp_path))
    assert grouped.returncode == 0, grouped.stderr
    assert "Rests on 80 tasks in 20 groups" in grouped.stdout
    # Five groups differ: the sign-flip test's p is 2·0.5^5 = 0.0625, and the p printed is the
    # largest of the deciding tests' (below 100 groups the betting test decides too).
    printed = re.search(
        r"bootstrap-t over 20 groups of 80 tasks, 9,999 resamples, sign-flip permutation over "
        r"20 groups, exact and hedged-capital betting over 20 groups of 80 tasks \(fewer than "
        r"100 units\), all rejecting \(p the largest\) on the per-task differences of pass "
        r"rates over every episode \(5 of 20 groups differ\): two-sided p = ([0-9.]*[0-9])",
        grouped.stdout)
    assert printed is not None and float(printed.group(1)) >= 0.0625
    assert metrics(tmp_path / "grouped")["test_p"] > 1000 * metrics(tmp_path / "alone")["test_p"]

    column = tmp_path / "column"
    column.mkdir()
    for path in (base, candidate):
        table = pd.read_parquet(path)
        table.assign(group=[f"g{int(task[1:]) // 4:02d}" for task in table["task_id"]]) \
            .to_parquet(column / path.name)
    by_column = heldout("compare", column / base.name, column / candidate.name,
                        "--out", tmp_path / "by_column")
    assert by_column.returncode == 0, by_column.stderr
    assert "Rests on 80 tasks in 20 groups" in by_column.stdout
    assert metrics(tmp_path / "by_column")["test_p"] == metrics(tmp_path / "grouped")["test_p"]

    task_file = tmp_path / "tasks.jsonl"
    task_file.write_text("".join(json.dumps(
        {"id": f"t{i:03d}", "group": f"g{i // 4:02d}", "prompt": "def f(x):\n",
         "entry_point": "f", "tests": "assert True\n"}) + "\n" for i in range(80)))
    by_tasks = heldout("compare", base, candidate, "--out", tmp_path / "by_tasks",
                       "--tasks", task_file)
    assert by_tasks.returncode == 0, by_tasks.stderr
    assert "Rests on 80 tasks in 20 groups" in by_tasks.stdout


def test_groups_that_disagree_or_a_bad_groups_file_exit_2_naming_the_problem(tmp_path: Path):
    base, candidate = rollout_files(tmp_path)
    table = pd.read_parquet(base)
    table.assign(group="one").to_parquet(base)
    clash = heldout("compare", base, candidate, "--out", tmp_path / "clash",
                    "--groups", groups_of_four(tmp_path))
    assert clash.returncode == 2
    assert (f"task 't000' is in group 'one' by the 'group' column of {base} and in group "
            f"'g00' by --groups {tmp_path / 'groups.jsonl'}: one task, one group") in clash.stderr
    assert "Traceback" not in clash.stderr and not (tmp_path / "clash").exists()

    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"task_id": "t000", "group": "g"}\n{"task_id": "t001"}\nnot json\n')
    refused = heldout("compare", base, candidate, "--out", tmp_path / "bad", "--groups", bad)
    assert refused.returncode == 2
    assert f"{bad}:2: not {{\"task_id\": ..., \"group\": ...}} with string values" in \
        refused.stderr
    assert f"{bad}:3: not JSON" in refused.stderr and "Traceback" not in refused.stderr


def test_target_effect_says_how_many_tasks_the_verdict_would_need(tmp_path: Path):
    import math

    import numpy as np
    from scipy import stats as sps

    base, candidate = rollout_files(tmp_path)
    done = heldout("compare", base, candidate, "--out", tmp_path / "out",
                   "--target-effect", "0.05")
    assert done.returncode == 0, done.stderr
    power = json.loads((tmp_path / "out/report.json").read_text())["power"]
    # 20 gains of 80: sd 0.4357; from 100 tasks on the bootstrap-t decides, (z.975 + z.8)²·sd²/δ².
    sd = float(np.std(np.r_[np.ones(20), np.zeros(60)], ddof=1))
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert power["target_effect"] == 0.05
    assert power["target_units"] == math.ceil((z * sd / 0.05) ** 2) == 597
    assert "| tasks (or groups) a +5.0-point effect needs (--target-effect) | 597 |" in \
        (tmp_path / "out/report.md").read_text()
    for bad in ("0", "1.5"):
        refused = heldout("compare", base, candidate, "--out", tmp_path / "bad",
                          "--target-effect", bad)
        assert refused.returncode == 2 and "an effect is a difference of pass rates" in \
            refused.stderr
