"""One number per quantity (issue 27, item 5): an arm's pass@1 and its interval are the same
wherever heldout shows them, and every p-value and α is written one way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from heldout.report import Report, build_report, headline_markdown
from heldout.statistics.counts import per_task_counts, summarize_checkpoint
from heldout.statistics.estimators import pass_at_k
from heldout.statistics.intervals import Interval
from heldout.statistics.pvalues import alpha_text, p_value_text
from heldout.statistics.selection import SelectConfig, select_checkpoint
from tests.report.test_report import full_markdown, passing, rollouts

TASKS, EPISODES = 60, 10


def ragged_arm(checkpoint: str, seed: int) -> pd.DataFrame:
    """60 tasks of 10 episodes at skewed Beta(0.5, 1) rates: pass rates like 3/10, where
    1 − 7/10 is not 3/10 in floating point."""
    rng = np.random.default_rng(seed)
    rates = rng.beta(0.5, 1.0, TASKS)
    return rollouts(checkpoint, {f"t{i:03d}": list(rng.random(EPISODES) < rates[i])
                                 for i in range(TASKS)})


def bounds(interval: Interval | dict) -> tuple[float, float, float]:
    if isinstance(interval, dict):  # a summary's interval, or a selection row's
        return interval.get("estimate", interval.get("value")), interval["low"], interval["high"]
    return float(interval.estimate), float(interval.low), float(interval.high)


def test_pass_at_1_is_the_pass_rate_to_the_last_bit():
    n = np.full(11, 10)
    c = np.arange(11)
    assert np.array_equal(pass_at_k(n, c, 1), c / n)
    assert np.array_equal(pass_at_k(n, c, [1, 2])[:, 0], c / n)


def test_every_path_gives_an_arm_the_same_pass_at_1_interval():
    base, candidate = ragged_arm("base", 1), ragged_arm("cand", 2)
    report = build_report(base, candidate)
    counts = per_task_counts(pd.concat([base, candidate]))
    headline = bounds(report.headline.pass_at_1.base)
    at_k_row, hat_k_row = (curve.arms.base[0] for curve in (report.pass_at_k, report.pass_hat_k))
    assert at_k_row.k == hat_k_row.k == 1
    score = summarize_checkpoint(counts[counts["checkpoint"] == "base"], [1, 2])
    selection = select_checkpoint(counts, ["base", "cand"], SelectConfig(metric="pass@1"))
    row = next(row for row in selection["table"] if row["checkpoint"] == "base")
    assert bounds(at_k_row.interval) == headline  # the pass@k table's k = 1 row
    assert bounds(hat_k_row.interval) == headline  # pass^1 is pass@1
    assert bounds(score["pass_at_1"]) == headline  # the val scores, `heldout score`
    assert bounds(row) == headline  # the selection table
    assert report.metrics["base_pass_at_1_low"] == float(f"{headline[1]:.6g}")


def heldout(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *map(str, args)],
                          capture_output=True, text=True)


def test_score_and_compare_give_one_file_the_same_interval(tmp_path: Path):
    """A rollout file's own `group` column counts for `heldout score` as for `heldout
    compare`: the score once showed Wilson over 60 tasks where compare showed the cluster
    bootstrap over 15 groups."""
    files = []
    for name, passes in (("A", 3), ("B", 2)):
        table = rollouts(name, {f"t{i:03d}": [i % passes == 0] for i in range(TASKS)})
        table["group"] = [f"g{int(task[1:]) // 4:02d}" for task in table["task_id"]]
        files.append(tmp_path / f"{name}.parquet")
        table.to_parquet(files[-1])
    scored = heldout("score", files[0], "--out", tmp_path / "score")
    compared = heldout("compare", *files, "--out", tmp_path / "compare")
    assert scored.returncode == compared.returncode == 0, scored.stderr + compared.stderr
    summary = json.loads((tmp_path / "score/A.summary.json").read_text())
    report = json.loads((tmp_path / "compare/report.json").read_text())
    assert "over 15 groups" in summary["pass_at_1"]["method"]
    assert summary["pass_at_1"] == report["headline"]["pass_at_1"]["base"]
    low, high = (f"{100 * summary['pass_at_1'][end]:.1f}%" for end in ("low", "high"))
    assert f"pass@1 33.3% [{low}, {high}]" in scored.stdout
    assert f"| 33.3% | [{low}, {high}] |" in compared.stdout


@pytest.mark.parametrize("same", ["path", "copy"])
def test_compare_of_a_file_with_itself_warns_and_exits_0(tmp_path: Path, same: str):
    path = tmp_path / "A.parquet"
    rollouts("a", {f"t{i:03d}": [i % 3 == 0] for i in range(TASKS)}).to_parquet(path)
    other = path
    if same == "copy":
        other = tmp_path / "copy.parquet"
        other.write_bytes(path.read_bytes())
    done = heldout("compare", path, other, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    expected = (f"warning: A and B are the same file: {path}" if same == "path" else
                f"warning: A and B have identical content ({path} and {other})")
    assert expected in done.stderr
    assert "every difference is 0" in done.stderr
    assert done.stdout.startswith(("Not decidable", "No difference detected"))


# --------------------------------------------------------------------------------------------
# p-values and α: one way of writing each


def test_a_p_value_is_written_exactly_or_with_its_resolution():
    assert p_value_text(4.5e-10) == "p = 4.5e-10"
    assert p_value_text(1 / 20_001, draws=20_000) == "p < 5e-05 (Monte Carlo, 20,000 draws)"
    assert p_value_text(0.0123, draws=20_000) == "p = 0.0123 (Monte Carlo, 20,000 draws)"
    # The bootstrap-t's two-sided floor is twice its smaller tail's, 2/(1 + B).
    assert p_value_text(2 * (1 / 10_000), draws=9_999, floor=2 / 10_000) == \
        "p < 0.0002 (Monte Carlo, 9,999 draws)"
    assert alpha_text(1 - 0.95) == "α = 0.05"


def floor_and_exact_report() -> Report:
    """300 tasks of 3 episodes: the candidate passes the base's 100 and 100 more, breaking
    none. The deciding test's p is the bootstrap-t's, at the floor of its 9,999 resamples (the
    sign-flip test's is an exact binomial tail, far smaller); McNemar's exact p is 1.6e-30."""
    return build_report(rollouts("base", passing(300, range(100), 3)),
                        rollouts("cand", passing(300, range(200), 3)))


def test_the_report_writes_a_monte_carlo_p_with_its_resolution_beside_an_exact_one():
    report = floor_and_exact_report()
    test = report.headline.decision.test
    assert (test.draws, test.floor, test.exact) == (9_999, 2 / 10_000, False)
    headline = headline_markdown(report)
    assert "two-sided p < 0.0002 (Monte Carlo, 9,999 draws)." in headline
    assert "c = 100 (cand passes, base fails); two-sided p = 1.58e-30" in headline
    assert "p = 0.0002" not in headline  # the floor is never written as a measured p


def test_the_exact_sign_test_p_is_written_without_a_resolution():
    report = build_report(rollouts("base", passing(200, range(80))),
                          rollouts("fixed", passing(200, range(90))))
    assert report.headline.decision.test.draws is None
    assert "two-sided p = 0.00195." in headline_markdown(report)  # 2 · 0.5^10


def test_alpha_is_written_without_float_noise_and_the_selection_card_in_points():
    base, candidate = ragged_arm("base", 1), ragged_arm("cand", 2)
    counts = per_task_counts(pd.concat([base, candidate]))
    selection = select_checkpoint(counts, ["base", "cand"], SelectConfig())
    report = build_report(base, candidate, protocol={"selection": selection})
    assert report.power.alpha == 0.05
    written = full_markdown(report)
    assert "0.050000000000000044" not in written + json.dumps(report.to_json())
    assert "(80% power, two-sided α = 0.05) |" in written
    assert "only when the paired test rejects at α = 0.05 and" in written
    card = written.split("## Protocol card")[1]
    lead, detectable = selection["lead"], selection["val_mde"]
    assert f"| lead | {100 * lead:+.1f} points |" in card
    assert f"| val_mde | {100 * detectable:.1f} points |" in card
    assert f"by {100 * lead:+.1f} points on val" in card
    base_row = next(row for row in selection["table"] if row["checkpoint"] == "base")
    assert f"| base | {100 * base_row['value']:.1f}% | [{100 * base_row['low']:.1f}%, " in card
    assert not re.search(r"\| [+-]?0\.\d+ \|", card)  # no raw fraction in any cell
