"""The paired report as data: a candidate against its base on the same tasks (DESIGN §5).

Pure: two rollout tables in, a dict of JSON values out (no NaN, no numpy types), so the same
object is report.json, feeds the renderers and can be rebuilt from report.json. Every interval
and test comes from heldout.stats; the unit of uncertainty is the task, never the episode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from itertools import pairwise
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from heldout.report.formatting import interval_points, percent, points, pvalue, short_fingerprint
from heldout.report.inputs import ROLES, Arm, pair_arms
from heldout.statistics.counts import default_ks
from heldout.stats import (
    CountsSummary,
    Interval,
    NoiseFloor,
    PairedBootstrap,
    mcnemar_exact,
    mde,
    noise_floor,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    required_tasks,
    summarize_counts,
    task_bootstrap_ci,
)

SCHEMA = "heldout.report/1"
BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference detected"
POWER, ALPHA = 0.8, 0.05
# McNemar's test is usually trusted from 10 discordant pairs on; with 5 or fewer the exact
# test cannot reach p < 0.05 whichever way they fall (2·0.5^5 = 0.0625).
FEW_DISCORDANT = 10


class ProtocolCard(TypedDict, total=False):
    """What `build_report(protocol=...)` renders as the protocol card. Every section is
    optional and may hold more fields than listed: the card shows every field it is given.

    tasks:       {"source", "digest", "count"}
    split:       {"salt", "fractions": {"train", "val", "test"}, "test_version",
                  "digests": {"train", "val", "test"}}
    harness:     {"fingerprint", **Harness.model_dump(mode="json")} (every field: template,
                  sampling, budgets, n, sandbox image and network, scorer version)
    selection:   data/selection.json as the select stage writes it: {"rule", "metric",
                  "chosen", "table": [{"checkpoint", "value", "low", "high", ...}, ...], ...}
                  (the val table the rule chose from, drawn as a chart)
    test_access: {"test_version", "opened", "models_evaluated", "ledger"} (from the ledger)
    """

    tasks: dict[str, Any]
    split: dict[str, Any]
    harness: dict[str, Any]
    selection: dict[str, Any]
    test_access: dict[str, Any]


# --------------------------------------------------------------------------------------------
# Sections


def _interval(interval: Interval) -> dict[str, Any]:
    return {
        "estimate": float(interval.estimate),
        "low": float(interval.low),
        "high": float(interval.high),
        "method": interval.method,
    }


def _paired(difference: PairedBootstrap) -> dict[str, Any]:
    return {
        "estimate": difference.diff,
        "low": difference.low,
        "high": difference.high,
        "method": difference.method,
    }


def _verdict(difference: PairedBootstrap, floor: NoiseFloor | None) -> dict[str, str]:
    rule = (
        '"better" or "worse" only when the 95% paired task-bootstrap interval of the '
        "difference excludes 0"
        + (
            f" and the difference clears the noise floor of {100 * floor.floor:.1f} points "
            f"(from {floor.n_runs} reruns)"
            if floor
            else " (no reruns were given, so no noise floor applies)"
        )
        + '; otherwise "no difference detected"'
    )
    shown = f"{interval_points(difference.low, difference.high)} points"
    if difference.low <= 0 <= difference.high:
        return {"verdict": NO_DIFFERENCE, "rule": rule,
                "reason": f"the interval {shown} includes 0"}
    if floor and abs(difference.diff) < floor.floor:
        return {
            "verdict": NO_DIFFERENCE,
            "rule": rule,
            "reason": f"the interval {shown} excludes 0, but {points(difference.diff)} points "
            f"is within the noise floor of {100 * floor.floor:.1f}",
        }
    return {
        "verdict": BETTER if difference.diff > 0 else WORSE,
        "rule": rule,
        "reason": f"the interval {shown} excludes 0"
        + (f" and {points(difference.diff)} points clears the noise floor" if floor else ""),
    }


def _exact_bound_notes(
    arms: tuple[Arm, Arm], summaries: tuple[CountsSummary, CountsSummary],
    difference: PairedBootstrap,
) -> list[str]:
    """Say so wherever the zero-width bootstrap interval was replaced by an exact bound."""
    notes = []
    for arm, summary in zip(arms, summaries, strict=True):
        if summary.pass_at_1.method == "clopper-pearson":
            outcome = "passed" if summary.pass_at_1.estimate == 1 else "failed"
            notes.append(
                f"Every episode of every task {outcome} for {arm.name}: a bootstrap over tasks "
                "would give a zero-width interval, so its pass@1 interval is the exact "
                "Clopper-Pearson bound."
            )
    if difference.method == "clopper-pearson":
        notes.append(
            f"Every task has the same difference ({points(difference.diff)} points) in both "
            "arms: a bootstrap over tasks would give a zero-width interval, so the exact "
            "Clopper-Pearson bound on the share of tasks that could differ is reported instead."
        )
    return notes


def _headline(
    arms: tuple[Arm, Arm],
    summaries: tuple[CountsSummary, CountsSummary],
    sample: int,
    rerun_scores: Sequence[float] | None,
    seed: int,
) -> dict[str, Any]:
    base, candidate = arms
    difference = paired_bootstrap(candidate.rates, base.rates, seed=seed)
    sd = _paired_sd(arms)
    standard_error = sd / math.sqrt(len(base.rates)) if sd is not None else None
    discordant = mcnemar_exact(
        int(np.sum(base.at_sample & ~candidate.at_sample)),
        int(np.sum(~base.at_sample & candidate.at_sample)),
    )
    floor = noise_floor(rerun_scores) if rerun_scores is not None else None
    return {
        "pass_at_1": {
            role: _interval(summary.pass_at_1)
            for role, summary in zip(ROLES, summaries, strict=True)
        },
        "difference": {**_paired(difference), "standard_error": standard_error},
        "mcnemar": {"sample": sample, **asdict(discordant)},
        "noise_floor": asdict(floor) if floor else None,
        **_verdict(difference, floor),
        "warnings": [],
        "notes": _exact_bound_notes(arms, summaries, difference),
    }


def _flips(arms: tuple[Arm, Arm], groups: Mapping[str, str] | None) -> dict[str, Any]:
    base, candidate = arms
    flip = np.select(
        [base.at_sample & ~candidate.at_sample, ~base.at_sample & candidate.at_sample,
         base.at_sample & candidate.at_sample],
        ["regressed", "improved", "both pass"],
        "both fail",
    )
    rows = [
        {
            "task_id": task,
            "group": groups.get(task, task) if groups is not None else None,
            "base_c": int(base.counts.at[task, "c"]),
            "base_n": int(base.counts.at[task, "n"]),
            "candidate_c": int(candidate.counts.at[task, "c"]),
            "candidate_n": int(candidate.counts.at[task, "n"]),
            "difference": float(d),
            "flip": str(f),
        }
        for task, d, f in zip(base.counts.index, candidate.rates - base.rates, flip, strict=True)
    ]
    rows.sort(key=lambda row: (-row["difference"], row["task_id"]))
    ids = {kind: [row["task_id"] for row in rows if row["flip"] == kind] for kind in set(flip)}
    return {
        "improved": ids.get("improved", []),
        "regressed": ids.get("regressed", []),
        "both_pass": len(ids.get("both pass", [])),
        "both_fail": len(ids.get("both fail", [])),
        "tasks": rows,
    }


def _leader(difference: float, names: tuple[str, str]) -> str | None:
    """The arm ahead; none where the curves meet (both at 1, say) up to rounding."""
    if abs(difference) <= 1e-12:
        return None
    return names[1] if difference > 0 else names[0]


def _crossings(differences: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the leader changes between consecutive k at which one arm leads."""
    led = [point for point in differences if point["leader"] is not None]
    return [
        {"after_k": before["k"], "by_k": after["k"], "leader_before": before["leader"],
         "leader_after": after["leader"]}
        for before, after in pairwise(led)
        if before["leader"] != after["leader"]
    ]


def _curves(
    arms: tuple[Arm, Arm], estimator: Callable[..., Any], ks: list[int], seed: int
) -> dict[str, Any]:
    """pass@k or pass^k per arm with task-bootstrap bands, their paired difference, and where
    the two curves cross."""
    per_task = [
        np.asarray(estimator(arm.counts["n"].to_numpy(), arm.counts["c"].to_numpy(), ks))
        for arm in arms
    ]
    curves: dict[str, Any] = {
        role: [
            {"k": k, **_interval(task_bootstrap_ci(table[:, column], seed=seed))}
            for column, k in enumerate(ks)
        ]
        for role, table in zip(ROLES, per_task, strict=True)
    }
    names = (arms[0].name, arms[1].name)
    differences = [
        paired_bootstrap(per_task[1][:, column], per_task[0][:, column], seed=seed)
        for column in range(len(ks))
    ]
    curves["difference"] = [
        {"k": k, **_paired(difference), "leader": _leader(difference.diff, names)}
        for k, difference in zip(ks, differences, strict=True)
    ]
    curves["crossings"] = _crossings(curves["difference"])
    return curves


def _paired_sd(arms: tuple[Arm, Arm]) -> float | None:
    """Standard deviation of the per-task differences; None for a single task."""
    per_task = arms[1].rates - arms[0].rates
    return float(per_task.std(ddof=1)) if per_task.size > 1 else None


def _power(arms: tuple[Arm, Arm], headline: dict[str, Any]) -> dict[str, Any]:
    tasks = len(arms[0].rates)
    effect = headline["difference"]["estimate"]
    sd = _paired_sd(arms) or 0.0
    spread = sd > 0
    power: dict[str, Any] = {
        "power": POWER,
        "alpha": ALPHA,
        "tasks": tasks,
        "paired_sd": sd if spread else None,
        "mde": mde(sd, tasks, ALPHA, POWER) if spread else None,
        "observed_effect": effect,
        "required_tasks": required_tasks(sd, effect, ALPHA, POWER) if spread and effect else None,
    }
    warnings = []
    if not spread:
        warnings.append(
            "Every task has the same difference, so the paired standard deviation is 0 and "
            "power cannot be estimated from these tasks."
        )
    discordant = headline["mcnemar"]["n_discordant"]
    if discordant < FEW_DISCORDANT:
        floor = mcnemar_exact(0, discordant).pvalue
        warnings.append(
            f"Underpowered: only {discordant} task(s) disagree at sample "
            f"{headline['mcnemar']['sample']} (fewer than {FEW_DISCORDANT}); the smallest "
            f"p-value the exact test can reach with {discordant} is {pvalue(floor)}."
        )
    below_mde = power["mde"] is not None and abs(effect) < power["mde"]
    if below_mde and headline["verdict"] == NO_DIFFERENCE:
        warnings.append(
            f"The observed difference ({points(effect)} points) is smaller than the minimum "
            f"detectable effect ({100 * power['mde']:.1f} points): \"no difference detected\" "
            "here is not evidence that there is none."
        )
    power["underpowered"] = discordant < FEW_DISCORDANT or below_mde
    power["warnings"] = warnings
    return power


def _design_effect(summary: CountsSummary) -> dict[str, float | None] | None:
    if summary.design_effect is None:
        return None
    return {key: value if math.isfinite(value) else None
            for key, value in asdict(summary.design_effect).items()}


def _outcome_rates(arm: Arm, summary: CountsSummary) -> dict[str, Any]:
    counts = arm.counts
    tasks, episodes = len(counts), int(counts["n"].sum())
    all_pass = int((counts["c"] == counts["n"]).sum())
    rates = {}
    for column, label in (("errors", "error"), ("timeouts", "timeout"),
                          ("truncations", "truncation"), ("refusals", "refusal")):
        rates[column] = int(counts[column].sum())
        rates[f"{label}_rate"] = rates[column] / episodes
    return {
        "tasks": tasks,
        "episodes": episodes,
        "all_pass": all_pass,
        "all_pass_fraction": all_pass / tasks,
        "all_fail": summary.all_fail,
        "all_fail_fraction": summary.all_fail / tasks,
        "failure_capable": summary.failure_capable,
        **rates,
        "design_effect": _design_effect(summary),
    }


def _group_breakdown(task_rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Per group, when some group holds several tasks (else the per-task table says it all)."""
    rows = pd.DataFrame(task_rows)
    if not 1 < rows["group"].nunique() < len(rows):
        return None
    table = rows.assign(
        base=rows["base_c"] / rows["base_n"],
        candidate=rows["candidate_c"] / rows["candidate_n"],
        improved=rows["flip"] == "improved",
        regressed=rows["flip"] == "regressed",
    ).groupby("group", sort=True).agg(
        tasks=("task_id", "size"), base=("base", "mean"), candidate=("candidate", "mean"),
        improved=("improved", "sum"), regressed=("regressed", "sum"),
    )
    return [
        {"group": str(group), "tasks": int(row.tasks), "base": float(row.base),
         "candidate": float(row.candidate), "difference": float(row.candidate - row.base),
         "improved": int(row.improved), "regressed": int(row.regressed)}
        for group, row in table.iterrows()
    ]


def _beneath(
    arms: tuple[Arm, Arm], summaries: tuple[CountsSummary, CountsSummary], flips: dict[str, Any]
) -> dict[str, Any]:
    outcomes = [_outcome_rates(arm, summary) for arm, summary in zip(arms, summaries, strict=True)]
    flags = []
    sides = list(zip(arms, outcomes, strict=True))
    for (arm, mine), (other_arm, theirs) in (sides, sides[::-1]):
        if mine["truncation_rate"] > 2 * theirs["truncation_rate"]:
            flags.append(
                f"{arm.name} was truncated in {percent(mine['truncation_rate'])} of episodes, "
                f"more than twice {other_arm.name}'s {percent(theirs['truncation_rate'])}: the "
                "token budget, not only skill, holds its pass rate down."
            )
    return {
        **dict(zip(ROLES, outcomes, strict=True)),
        "flags": flags,
        "groups": _group_breakdown(flips["tasks"]),
    }


def _protocol_warnings(protocol: dict[str, Any], harness: dict[str, Any]) -> list[str]:
    declared = protocol.get("harness", {}).get("fingerprint")
    produced = set(harness["base"]) | set(harness["candidate"])
    if declared and produced != {declared}:
        return [
            f"The protocol's harness is {short_fingerprint(declared)}, but the rollouts were "
            f"produced under {', '.join(map(short_fingerprint, sorted(produced)))}."
        ]
    return []


def _protocol_copy(protocol: Mapping[str, Any]) -> dict[str, Any]:
    """The protocol as plain JSON values (never aliasing the caller's objects), checked where
    the card relies on its shape: sections are objects, selection rows can be drawn."""
    try:
        copy = json.loads(json.dumps(protocol, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ValueError(f"protocol must hold plain JSON values: {error}") from None
    for name, section in copy.items():
        if not isinstance(section, dict):
            raise ValueError(f"protocol.{name} must be an object, got {section!r}")
    for index, row in enumerate(copy.get("selection", {}).get("table", [])):
        shaped = isinstance(row, dict) and isinstance(row.get("checkpoint"), str) and all(
            isinstance(row.get(key), int | float) for key in ("value", "low", "high")
        )
        if not shaped:
            raise ValueError(
                f"protocol.selection.table[{index}] must be {{checkpoint, value, low, high}}, "
                f"got {row!r}"
            )
    return copy


def _metrics(report: dict[str, Any]) -> dict[str, float | int]:
    """Flat numbers for metrics/test.json, keyed by role so `dvc metrics diff` compares like
    with like across runs whatever the checkpoints are called."""
    headline = report["headline"]
    metrics: dict[str, float | int] = {"tasks": report["tasks"]["compared"]}
    for role in ROLES:
        interval = headline["pass_at_1"][role]
        metrics |= {f"{role}_pass_at_1": interval["estimate"],
                    f"{role}_pass_at_1_low": interval["low"],
                    f"{role}_pass_at_1_high": interval["high"]}
        for curve in ("pass_at_k", "pass_hat_k"):
            # k = 1 of both curves is pass@1 itself, already above with its interval.
            metrics |= {f"{role}_{curve.removesuffix('k')}{point['k']}": point["estimate"]
                        for point in report[curve][role] if point["k"] > 1}
        outcomes = report["beneath"][role]
        metrics |= {f"{role}_{key}": outcomes[key] for key in (
            "error_rate", "truncation_rate", "all_pass_fraction", "all_fail_fraction",
            "failure_capable")}
        metrics[f"{role}_dropped_tasks"] = report["tasks"]["dropped"][role]["count"]
    difference = headline["difference"]
    mcnemar = headline["mcnemar"]
    verdict_sign = {BETTER: 1, WORSE: -1, NO_DIFFERENCE: 0}[headline["verdict"]]
    metrics |= {
        "difference": difference["estimate"],
        "difference_low": difference["low"],
        "difference_high": difference["high"],
        "mcnemar_b": mcnemar["b"],
        "mcnemar_c": mcnemar["c"],
        "mcnemar_p": mcnemar["pvalue"],
        "mcnemar_midp": mcnemar["midp"],
        "verdict": verdict_sign,
        "improved": len(report["flips"]["improved"]),
        "regressed": len(report["flips"]["regressed"]),
        "both_pass": report["flips"]["both_pass"],
        "both_fail": report["flips"]["both_fail"],
    }
    if report["power"]["mde"] is not None:
        metrics["mde"] = report["power"]["mde"]
    # Six significant digits, not decimals: a p-value of 1e-9 must not print as 0.
    return {key: float(f"{value:.6g}") if isinstance(value, float) else int(value)
            for key, value in metrics.items()}


# --------------------------------------------------------------------------------------------
# The report


def build_report(
    base: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    base_name: str | None = None,
    candidate_name: str | None = None,
    sample: int = 0,
    allow_harness_mismatch: bool = False,
    groups: Mapping[str, str] | None = None,
    rerun_scores: Sequence[float] | None = None,
    protocol: ProtocolCard | Mapping[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The paired report of `candidate` against `base`, two rollout tables (heldout.episodes.episode
    ROW_COLUMNS; at least heldout.report.inputs.REQUIRED_COLUMNS).

    Compared on the task ids both hold (the rest are listed as dropped, with the reason).
    Different harness fingerprints raise IncomparableRolloutsError unless
    `allow_harness_mismatch`, and then the mismatch is in the headline. Errored episodes are
    failures, counted separately. McNemar's exact test uses the episode with index `sample`
    of every task. `groups` maps task id to group (a task it omits is its own group);
    `rerun_scores` are pass@1 scores of ≥ 2 reruns of one unchanged version, from which the
    noise floor the verdict must clear is computed; `protocol` (see ProtocolCard) is copied
    into the report and rendered as the protocol card. Names default to each table's
    `checkpoint`. `seed` seeds every bootstrap.
    """
    protocol_card = _protocol_copy(protocol) if protocol is not None else None
    paired = pair_arms(base, candidate, names=(base_name, candidate_name), sample=sample,
                       allow_harness_mismatch=allow_harness_mismatch)
    arms, harness = (paired.base, paired.candidate), paired.harness
    names = (paired.base.name, paired.candidate.name)
    smallest_n = min(int(arm.counts["n"].min()) for arm in arms)
    ks = default_ks(smallest_n)
    summaries = tuple(
        summarize_counts(arm.counts["c"].to_numpy(), arm.counts["n"].to_numpy(), [1], seed=seed)
        for arm in arms
    )
    headline = _headline(arms, summaries, sample, rerun_scores, seed)
    if not harness["match"]:
        headline["warnings"].append(_mismatch_note(harness, names))
    if protocol_card is not None:
        headline["warnings"] += _protocol_warnings(protocol_card, harness)
    flips = _flips(arms, groups)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "names": dict(zip(ROLES, names, strict=True)),
        "tasks": paired.tasks,
        "harness": harness,
        "headline": headline,
        "flips": flips,
        "pass_at_k": _curves(arms, pass_at_k, ks, seed),
        "pass_hat_k": _curves(arms, pass_hat_k, ks, seed),
        "power": _power(arms, headline),
        "beneath": _beneath(arms, summaries, flips),
        "protocol": protocol_card,
    }
    headline["notes"] += _context_notes(report)
    report["metrics"] = _metrics(report)
    return report


def _mismatch_note(harness: dict[str, Any], names: tuple[str, str]) -> str:
    base, candidate = (", ".join(map(short_fingerprint, harness[role])) for role in ROLES)
    return (
        f"HARNESS MISMATCH: {names[0]} ran under harness {base} and {names[1]} under "
        f"{candidate}. Compared only because the mismatch was allowed: part of any difference "
        "may come from the harness, not the checkpoint."
    )


def _context_notes(report: dict[str, Any]) -> list[str]:
    """Dropped tasks and errored episodes: what a reader of the headline alone must know."""
    notes = []
    dropped = report["tasks"]["dropped"]
    if dropped["base"]["count"] or dropped["candidate"]["count"]:
        notes.append(
            f"Compared on the {report['tasks']['compared']} tasks both files hold: dropped "
            + " and ".join(
                f"{dropped[role]['count']} task(s) only in {report['names'][role]}"
                for role in ROLES
            )
            + "."
        )
    errors = {role: report["beneath"][role]["errors"] for role in ROLES}
    if any(errors.values()):
        notes.append(
            "Errored episodes count as failures: "
            + ", ".join(
                f"{report['names'][role]} {errors[role]} "
                f"({percent(report['beneath'][role]['error_rate'])} of episodes)"
                for role in ROLES
            )
            + "."
        )
    return notes
