"""Choosing a checkpoint on validation only, by a rule written down before any test number.

A choice among checkpoints whose validation difference is below what the validation set can
detect is a choice made on noise; the selection says so rather than hiding it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from heldout.errors import ParamsError
from heldout.statistics.estimators import pass_at_k
from heldout.statistics.intervals import task_bootstrap_ci, task_bootstrap_se
from heldout.statistics.power import mde

RULES = ("best", "one_se", "last")
_METRIC = re.compile(r"^pass@(\d+)$")


class SelectConfig(BaseModel):
    """`params.select`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: Literal["best", "one_se", "last"] = "best"
    metric: str = Field(default="pass@1", description="pass@k for a stated k")
    final: str | None = Field(default=None, description="the pre-registered checkpoint of `last`")

    @field_validator("metric")
    @classmethod
    def _pass_at_k(cls, metric: str) -> str:
        if not _METRIC.match(metric) or int(_METRIC.match(metric).group(1)) < 1:
            raise ValueError(f"must be pass@k with a whole k >= 1, e.g. pass@1, not {metric!r}")
        return metric

    @property
    def k(self) -> int:
        return int(_METRIC.match(self.metric).group(1))


def per_task_metric(counts: pd.DataFrame, k: int) -> pd.DataFrame:
    """Tasks × checkpoints table of the per-task unbiased pass@k."""
    if k > counts["n"].min():
        raise ParamsError(
            f"params.yaml: select.metric: pass@{k} needs at least {k} episodes per task; the "
            f"val rollouts have {counts['n'].min()} (harness.n)"
        )
    values = counts.assign(value=pass_at_k(counts["n"].to_numpy(), counts["c"].to_numpy(), k))
    return values.pivot(index="task_id", columns="checkpoint", values="value")


def select_checkpoint(
    counts: pd.DataFrame, order: list[str], config: SelectConfig, seed: int = 0
) -> dict[str, Any]:
    """Apply the rule to per-task val counts (columns checkpoint, task_id, n, c).

    best: the highest val metric (ties: the earlier checkpoint in `order`); one_se: the
    earliest checkpoint within one task-bootstrap standard error of the best; last: `final`.
    """
    values = per_task_metric(counts, config.k)
    missing = [name for name in order if name not in values.columns]
    if missing:
        raise ParamsError(f"no val scores for checkpoint(s) {', '.join(missing)}: run `dvc repro`")
    table = []
    for name in order:
        column = values[name].to_numpy()
        interval = task_bootstrap_ci(column, seed=seed)
        table.append({
            "checkpoint": name, "value": interval.estimate, "low": interval.low,
            "high": interval.high, "se": task_bootstrap_se(column, seed=seed),
        })
    best = max(table, key=lambda row: (row["value"], -order.index(row["checkpoint"])))
    if config.rule == "best":
        chosen = best
    elif config.rule == "one_se":
        chosen = next(row for row in table if row["value"] >= best["value"] - best["se"])
    else:
        if config.final not in order:
            raise ParamsError(
                f"params.yaml: select.final: {config.final!r} is not a checkpoint; rule 'last' "
                f"needs one of {', '.join(order)}"
            )
        chosen = table[order.index(config.final)]
    return {
        "rule": config.rule,
        "metric": config.metric,
        "table": table,
        "chosen": chosen["checkpoint"],
        **_lead(values, table, chosen),
    }


def _lead(values: pd.DataFrame, table: list[dict], chosen: dict) -> dict[str, Any]:
    """How far the chosen checkpoint is ahead of the best of the rest, against the smallest
    difference this val set could detect between the two (paired, 80% power, α = 0.05)."""
    others = [row for row in table if row["checkpoint"] != chosen["checkpoint"]]
    if not others:
        return {"runner_up": None, "lead": None, "val_mde": None, "lead_exceeds_mde": None,
                "note": "only one checkpoint: nothing to choose between"}
    runner_up = max(others, key=lambda row: row["value"])
    differences = (values[chosen["checkpoint"]] - values[runner_up["checkpoint"]]).to_numpy()
    sd = float(np.std(differences, ddof=1)) if differences.size > 1 else 0.0
    detectable = mde(sd, differences.size)
    lead = chosen["value"] - runner_up["value"]
    exceeds = bool(lead > detectable)
    note = (
        f"{chosen['checkpoint']} leads {runner_up['checkpoint']} by {lead:+.3f} on val, "
        + (f"more than the {detectable:.3f} this val set can detect."
           if exceeds else
           f"less than the {detectable:.3f} this val set can detect: the choice between them "
           "is noise, and the test split will say how the chosen one compares with the base.")
    )
    return {"runner_up": runner_up["checkpoint"], "lead": lead, "val_mde": detectable,
            "lead_exceeds_mde": exceeds, "note": note}
