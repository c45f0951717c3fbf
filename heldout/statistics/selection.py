"""Choosing a checkpoint on validation only, by a rule written down before any test number.

A choice among checkpoints whose validation difference is below what the validation set can
detect is a choice made on noise; the selection says so rather than hiding it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from heldout.errors import ParamsError
from heldout.statistics.bca import mean_standard_error
from heldout.statistics.estimators import pass_at_k
from heldout.statistics.grouping import group_labels
from heldout.statistics.pick_stability import honest_selection, rule_picks
from heldout.statistics.power import mde
from heldout.statistics.summary import estimate_intervals

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
    counts: pd.DataFrame, order: list[str], config: SelectConfig, seed: int = 0,
    groups: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Apply the rule to per-task val counts (columns checkpoint, task_id, n, c).

    best: the highest val metric (ties: the earlier checkpoint in `order`); one_se: the
    earliest checkpoint within one standard error of the best; last: `final`. `groups` maps
    task id to group: the intervals (estimate_intervals), the standard errors (the cluster
    one, mean_standard_error) and the detectable lead then rest on the groups, since tasks of
    one group rise and fall together and counting them apart would make noise look like a lead.
    The record also holds how often the same rule picks each checkpoint over resamples of the
    val tasks or groups, and the expected winner's-curse inflation of the pick's val score
    (heldout.statistics.pick_stability.honest_selection, seeded with `seed`).
    """
    values = per_task_metric(counts, config.k)
    missing = [name for name in order if name not in values.columns]
    if missing:
        raise ParamsError(f"no val scores for checkpoint(s) {', '.join(missing)}: run `dvc repro`")
    labels = group_labels(values.index, groups)
    table = []
    for name in order:
        column = values[name].to_numpy()
        arm = counts[counts["checkpoint"] == name].set_index("task_id").loc[values.index]
        # The val scores' and the report's own function, so the row shows their interval.
        interval, = estimate_intervals(pass_at_k, arm["n"].to_numpy(), arm["c"].to_numpy(),
                                       config.k, groups=labels, seed=seed)
        table.append({
            "checkpoint": name, "value": interval.estimate, "low": interval.low,
            "high": interval.high, "se": mean_standard_error(column, groups=labels),
            "method": interval.method,
        })
    if config.rule == "last" and config.final not in order:
        raise ParamsError(
            f"params.yaml: select.final: {config.final!r} is not a checkpoint; rule 'last' "
            f"needs one of {', '.join(order)}"
        )
    final = order.index(config.final) if config.rule == "last" else None
    # The whole val set is one sample to the rule, as each resample of it is to pick stability.
    index = int(rule_picks(np.array([[row["value"] for row in table]]),
                           np.array([[row["se"] for row in table]]), config.rule, final)[0])
    chosen = table[index]
    return {
        "rule": config.rule,
        "metric": config.metric,
        "table": table,
        "chosen": chosen["checkpoint"],
        **_lead(values, table, chosen, labels),
        **honest_selection(values[order].to_numpy(), labels=labels, names=order,
                           rule=config.rule, chosen=index, standard_error=chosen["se"],
                           seed=seed),
    }


def _lead(values: pd.DataFrame, table: list[dict], chosen: dict,
          labels: np.ndarray | None) -> dict[str, Any]:
    """How far the chosen checkpoint is ahead of the best of the rest, against the smallest
    difference this val set could detect between the two (paired, 80% power, α = 0.05), over
    tasks or, with `labels`, over groups."""
    others = [row for row in table if row["checkpoint"] != chosen["checkpoint"]]
    if not others:
        return {"runner_up": None, "lead": None, "val_mde": None, "lead_exceeds_mde": None,
                "note": "only one checkpoint: nothing to choose between"}
    runner_up = max(others, key=lambda row: row["value"])
    differences = (values[chosen["checkpoint"]] - values[runner_up["checkpoint"]]).to_numpy()
    units = differences.size if labels is None else np.unique(labels).size
    # mde takes the spread of the units and their number; the cluster standard error times √U
    # is that spread for groups (and the tasks' standard deviation without them).
    spread = mean_standard_error(differences, groups=labels) * np.sqrt(units)
    detectable = mde(float(spread), units)
    lead = chosen["value"] - runner_up["value"]
    exceeds = bool(lead > detectable)
    # In percentage points, as the report writes every difference of rates.
    note = (
        f"{chosen['checkpoint']} leads {runner_up['checkpoint']} by {100 * lead:+.1f} points "
        "on val, "
        + (f"more than the {100 * detectable:.1f} points this val set can detect."
           if exceeds else
           f"less than the {100 * detectable:.1f} points this val set can detect: the choice "
           "between them is noise, and the test split will say how the chosen one compares "
           "with the base.")
    )
    return {"runner_up": runner_up["checkpoint"], "lead": lead, "val_mde": detectable,
            "lead_exceeds_mde": exceeds, "note": note}
