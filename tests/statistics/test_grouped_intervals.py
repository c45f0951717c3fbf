"""Groups everywhere (issue 24 item 2): the intervals outside the verdict (the alarm's paired
interval, one arm's pass@1 and gap shares, the selection table and its detectable lead, the
pass@k and pass^k bands) count a group of tasks as one unit when the tasks have groups. Each
case is one where counting the tasks apart would make the templated tasks look like
independent evidence."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from heldout.report.curves import curve
from heldout.report.inputs import Arm
from heldout.report.sections import PerArm
from heldout.statistics.estimators import pass_at_k
from heldout.statistics.grouping import group_labels
from heldout.statistics.public_hidden import AlarmConfig, gap_alarm, gap_counts, summarize_gap
from heldout.statistics.selection import SelectConfig, select_checkpoint
from tests.statistics.test_public_hidden import episodes

TEMPLATES = {f"t{i:03d}": f"template-{i // 20}" for i in range(100)}  # 5 templates of 20


def test_group_labels_are_none_when_every_task_is_its_own_group():
    assert group_labels(["a", "b"], None) is None
    assert group_labels(["a", "b"], {"a": "a"}) is None  # b is its own group too
    assert group_labels(["a", "b", "c"], {"a": "g", "b": "g"}).tolist() == ["g", "g", "c"]


def test_a_leak_in_one_template_is_one_group_of_evidence_not_twenty_tasks():
    base = gap_counts(episodes([0] * 100))
    leaky = gap_counts(episodes([5] * 20 + [0] * 80))  # half the episodes of template 0 leak
    by_task = gap_alarm(leaky, base, AlarmConfig())
    by_group = gap_alarm(leaky, base, AlarmConfig(), groups=TEMPLATES)
    assert by_task.fired and by_task.difference.low > 0.05
    assert not by_group.fired and by_group.difference.low < 0
    assert "over 100 tasks in 5 groups" in by_group.reason
    summary = summarize_gap(leaky, groups=TEMPLATES)
    assert summary.gap.estimate == pytest.approx(0.1)
    assert "over 5 groups" in summary.gap.method
    assert summary.gap.low < summarize_gap(leaky).gap.low


def _val_counts() -> tuple[pd.DataFrame, dict[str, str]]:
    """40 val tasks in 5 groups of 8; checkpoint b gains 0, 1, 2, 3 or 4 passes of 10 by
    group, the same within a group."""
    rows = [{"checkpoint": name, "task_id": f"t{i:03d}", "n": 10,
             "c": 3 + i % 3 + (i // 8 if name == "b" else 0)}
            for name in ("a", "b") for i in range(40)]
    return pd.DataFrame(rows), {f"t{i:03d}": f"g{i // 8}" for i in range(40)}


def test_the_selection_table_and_its_detectable_lead_rest_on_groups():
    counts, groups = _val_counts()
    by_task = select_checkpoint(counts, ["a", "b"], SelectConfig())
    by_group = select_checkpoint(counts, ["a", "b"], SelectConfig(), groups=groups)
    b = counts[counts.checkpoint == "b"].set_index("task_id")
    rates = (b["c"] / b["n"]).to_numpy()
    sums = pd.Series(rates).groupby(np.arange(40) // 8).sum().to_numpy()
    cluster_se = np.sqrt(5 / 4 * np.sum((sums - 8 * rates.mean()) ** 2)) / 40  # by hand
    row = by_group["table"][1]
    assert row["se"] == pytest.approx(cluster_se, rel=1e-12)
    assert row["se"] > by_task["table"][1]["se"]
    assert "over 5 groups" in row["method"]
    # The lead is the same 0.2; what 5 groups can detect is three times what 40 tasks can.
    assert by_group["lead"] == pytest.approx(by_task["lead"]) == pytest.approx(0.2)
    assert by_group["val_mde"] > 3 * by_task["val_mde"]


def test_pass_at_k_bands_and_differences_rest_on_groups():
    counts, groups = _val_counts()
    arms = PerArm(*(Arm(name, counts[counts.checkpoint == name].set_index("task_id")[["n", "c"]],
                        at_sample=np.zeros(40, dtype=bool))  # not read by the curves
                    for name in ("a", "b")))
    labels = group_labels(arms.base.counts.index, groups)
    grouped = curve(arms, pass_at_k, [1, 2], seed=0, groups=labels)
    ungrouped = curve(arms, pass_at_k, [1, 2], seed=0)
    for k_index in range(2):
        wide = grouped.arms.candidate[k_index].interval
        narrow = ungrouped.arms.candidate[k_index].interval
        assert "over 5 groups" in wide.method
        assert wide.high - wide.low > narrow.high - narrow.low
        assert grouped.difference[k_index].interval.low < ungrouped.difference[k_index].interval.low
