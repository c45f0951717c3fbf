"""Best-of-k beside pass@k (issue 41, item 3): pass@k assumes an oracle picks the passing one of
k episodes; best-of-k submits the first episode a selector accepts (the public tests by
default) and counts its hidden result (heldout.statistics.best_of_k). The gap between the two
curves is what the selector fails to find; a candidate whose pass@k rises while its best-of-k
does not gained reach no deployable selector can use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from heldout.report.curves import curve_of
from heldout.report.sections import ROLES, Curve, PerArm
from heldout.statistics.best_of_k import best_of_k

PUBLIC_TESTS = "public_passed"


@dataclass(frozen=True)
class BestOfK:
    """Best-of-k of both arms at the pass@k curve's k, with bands and their difference."""

    selector: str  # the column that accepted episodes; "public_passed": the public tests
    accepted: PerArm[float]  # each arm's share of episodes the selector accepted
    curve: Curve

    def to_json(self) -> dict[str, Any]:
        return {"selector": self.selector, "accepted": self.accepted.to_json(),
                "curve": self.curve.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BestOfK:
        return cls(data["selector"], PerArm.from_json(data["accepted"]),
                   Curve.from_json(data["curve"]))

    def metrics(self) -> dict[str, float]:
        """metrics/test.json's best-of-k of each arm at every k above 1 (at k = 1 it is pass@1)."""
        return {f"{role}_best_of_{point.k}": point.interval.estimate
                for role, points in zip(ROLES, self.curve.arms, strict=True)
                for point in points if point.k > 1}

    def selector_words(self) -> str:
        return ("the public tests" if self.selector == PUBLIC_TESTS
                else f"the column {self.selector!r}")


def _selector_counts(table: pd.DataFrame, selector: str,
                     task_ids: Sequence[str]) -> pd.DataFrame:
    """Per task: episodes n, accepted s, and the hidden passes among accepted and rejected. An
    errored episode fails the hidden tests whatever it says (DESIGN §3); a missing selector
    value (no public tests, an errored run) rejects."""
    passed = table["passed"].astype(bool) & (table["status"] != "error")
    accepted = table[selector].astype("boolean").fillna(False).astype(bool)
    frame = pd.DataFrame({"task_id": table["task_id"].astype(str).to_numpy(),
                          "accepted": accepted.to_numpy(), "passed": passed.to_numpy()})
    frame["accepted_passed"] = frame["accepted"] & frame["passed"]
    frame["rejected_passed"] = ~frame["accepted"] & frame["passed"]
    counts = frame.groupby("task_id").agg(
        n=("passed", "size"), accepted=("accepted", "sum"),
        accepted_passed=("accepted_passed", "sum"), rejected_passed=("rejected_passed", "sum"))
    return counts.reindex(list(task_ids))


def best_of_k_section(tables: PerArm[pd.DataFrame], names: PerArm[str], task_ids: Sequence[str],
                      ks: list[int], seed: int, groups: np.ndarray | None = None,
                      selector: str = PUBLIC_TESTS) -> BestOfK | None:
    """Best-of-k over the compared `task_ids` at `ks`; None when either arm's rows lack the
    selector column or the selector accepted no episode of either arm (no task has public
    tests): the curve would be the pass rate at every k and say nothing."""
    if not all(selector in table.columns for table in tables):
        return None
    counts = tables.map(lambda table: _selector_counts(table, selector, task_ids))
    if not any(int(arm["accepted"].sum()) for arm in counts):
        return None
    per_task = counts.map(lambda arm: best_of_k(
        arm["n"].to_numpy(), arm["accepted"].to_numpy(), arm["accepted_passed"].to_numpy(),
        arm["rejected_passed"].to_numpy(), ks))
    return BestOfK(selector,
                   counts.map(lambda arm: float(arm["accepted"].sum() / arm["n"].sum())),
                   curve_of(per_task, ks, names, seed, groups))
