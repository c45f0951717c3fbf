"""The report's wording, once: a report dict becomes sections of paragraphs, tables and figures
that the Markdown and HTML renderers lay out without deciding what to say."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from heldout.report.formatting import (
    interval_percent,
    interval_points,
    percent,
    points,
    pvalue,
    short_fingerprint,
)

# Ids listed inline before "and N more"; the per-task table and report.json hold them all.
IDS_SHOWN = 30


@dataclass(frozen=True)
class Paragraph:
    text: str
    tone: str = "plain"  # plain | verdict | warning | note


@dataclass(frozen=True)
class Subheading:
    text: str


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Figure:
    name: str  # figures/<name>.png
    caption: str


Block = Paragraph | Subheading | Table | Figure


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    blocks: list[Block]


@dataclass(frozen=True)
class Document:
    title: str
    sections: list[Section]


def report_document(report: dict[str, Any], figures: Collection[str]) -> Document:
    """Every section of the report; `figures` names the figures that were drawn."""
    names = report["names"]
    sections = [
        _headline(report),
        _flips(report, figures),
        _curves(report, figures),
        _power(report),
        _beneath(report),
    ]
    if report["protocol"] is not None:
        sections.append(_protocol(report["protocol"], figures))
    return Document(f"{names['candidate']} against {names['base']}", sections)


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:IDS_SHOWN])
    return shown + (f" and {len(ids) - IDS_SHOWN} more" if len(ids) > IDS_SHOWN else "") or "none"


def _episodes(report: dict[str, Any]) -> str:
    """Episodes per task, arm by arm only where the arms differ."""
    counts = {
        role: str(span["min"]) if span["min"] == span["max"] else f"{span['min']} to {span['max']}"
        for role, span in report["tasks"]["episodes_per_task"].items()
    }
    if len(set(counts.values())) == 1:
        count = counts["base"]
        return f"{count} episode{'' if count == '1' else 's'} per task"
    return "episodes per task: " + ", ".join(
        f"{report['names'][role]} {count}" for role, count in counts.items()
    )


def _headline(report: dict[str, Any]) -> Section:
    names, headline = report["names"], report["headline"]
    base, candidate = names["base"], names["candidate"]
    test_version = ((report["protocol"] or {}).get("split") or {}).get("test_version")
    difference, mcnemar = headline["difference"], headline["mcnemar"]
    standard_error = difference["standard_error"]
    arm_rows = [
        [names[role], percent(interval["estimate"]),
         interval_percent(interval["low"], interval["high"]), _method(interval["method"])]
        for role, interval in headline["pass_at_1"].items()
    ]
    difference_row = [
        f"difference ({candidate} − {base})",
        f"{points(difference['estimate'])} points",
        interval_points(difference["low"], difference["high"]),
        "paired " + _method(difference["method"])
        + (f", SE {100 * standard_error:.1f} points" if standard_error is not None else ""),
    ]
    blocks: list[Block] = [
        Paragraph(
            f"Candidate: {candidate}. Base: {base}. {report['tasks']['compared']} tasks "
            f"compared, {_episodes(report)}"
            + (f", on test set {test_version}" if test_version else "") + "."
        ),
        *(Paragraph(text, "warning") for text in headline["warnings"]),
        Table(["", "pass@1", "95% interval", "method"], [*arm_rows, difference_row]),
        Paragraph(
            f"Exact McNemar test on sample {mcnemar['sample']}: b = {mcnemar['b']} ({base} "
            f"passes, {candidate} fails), c = {mcnemar['c']} ({candidate} passes, {base} "
            f"fails); two-sided p = {pvalue(mcnemar['pvalue'])}, mid-p = "
            f"{pvalue(mcnemar['midp'])}."
        ),
        Paragraph(f"Verdict: {headline['verdict']}: {headline['reason']}.", "verdict"),
        Paragraph(f"Rule: {headline['rule']}."),
        *(Paragraph(text, "note") for text in headline["notes"]),
    ]
    return Section("headline", "Headline", blocks)


def _method(method: str) -> str:
    return {
        "bootstrap-indices": "task bootstrap",
        "bootstrap-multinomial": "task bootstrap",
        "clopper-pearson": "exact Clopper-Pearson bound",
        "constant": "constant",
    }[method]


def _flips(report: dict[str, Any], figures: Collection[str]) -> Section:
    names, flips = report["names"], report["flips"]
    sample = report["headline"]["mcnemar"]["sample"]
    with_groups = any(row["group"] is not None for row in flips["tasks"])
    header = ["task", *(["group"] if with_groups else []), f"{names['base']} c/n",
              f"{names['candidate']} c/n", "difference (points)", f"at sample {sample}"]
    rows = [
        [row["task_id"], *([str(row["group"])] if with_groups else []),
         f"{row['base_c']}/{row['base_n']}", f"{row['candidate_c']}/{row['candidate_n']}",
         points(row["difference"]), row["flip"]]
        for row in flips["tasks"]
    ]
    blocks: list[Block] = [
        Paragraph(
            f"At sample {sample}: {len(flips['improved'])} improved, {len(flips['regressed'])} "
            f"regressed, {flips['both_pass']} pass in both, {flips['both_fail']} fail in both."
        ),
        Paragraph(f"Improved ({names['base']} fails, {names['candidate']} passes): "
                  f"{_ids(flips['improved'])}."),
        Paragraph(f"Regressed ({names['base']} passes, {names['candidate']} fails): "
                  f"{_ids(flips['regressed'])}."),
    ]
    if "forest" in figures:
        blocks.append(Figure("forest", "Per-task difference in pass rate over all episodes, "
                                       "with the paired mean and its 95% interval."))
    blocks.append(Table(header, rows))
    return Section("flips", "Task flips", blocks)


def _curve_table(report: dict[str, Any], curve: str, label: str) -> Table:
    names, points_by_role = report["names"], report[curve]
    rows = []
    for base, candidate, difference in zip(
        points_by_role["base"], points_by_role["candidate"], points_by_role["difference"],
        strict=True,
    ):
        rows.append([
            str(base["k"]),
            f"{percent(base['estimate'])} {interval_percent(base['low'], base['high'])}",
            f"{percent(candidate['estimate'])} "
            f"{interval_percent(candidate['low'], candidate['high'])}",
            f"{points(difference['estimate'])} "
            f"{interval_points(difference['low'], difference['high'])}",
        ])
    return Table(["k", f"{names['base']} {label}", f"{names['candidate']} {label}",
                  "difference (points)"], rows)


def _crossing_text(report: dict[str, Any], curve: str, label: str) -> str:
    crossings = report[curve]["crossings"]
    if not crossings:
        leaders = {p["leader"] for p in report[curve]["difference"]} - {None}
        who = f"{leaders.pop()} is ahead or level" if leaders else "the arms are level"
        return f"The {label} curves do not cross: {who} at every k."
    described = "; ".join(
        f"{c['leader_before']} leads up to k = {c['after_k']}, {c['leader_after']} from "
        f"k = {c['by_k']}" for c in crossings
    )
    return f"The {label} curves cross: {described}."


def _curves(report: dict[str, Any], figures: Collection[str]) -> Section:
    blocks: list[Block] = []
    if "pass_k" in figures:
        blocks.append(Figure("pass_k", "pass@k and pass^k for both arms; bands are 95% "
                                       "task-bootstrap intervals."))
    for curve, label in (("pass_at_k", "pass@k"), ("pass_hat_k", "pass^k")):
        blocks += [Paragraph(_crossing_text(report, curve, label)),
                   _curve_table(report, curve, label)]
    return Section("pass-k", "pass@k and pass^k", blocks)


def _power(report: dict[str, Any]) -> Section:
    power = report["power"]
    effect = power["observed_effect"]
    mde_text = f"{100 * power['mde']:.1f} points" if power["mde"] is not None else "not estimable"
    required = power["required_tasks"]
    rows = [
        ["tasks", str(power["tasks"])],
        ["paired standard deviation of per-task differences",
         f"{100 * power['paired_sd']:.1f} points" if power["paired_sd"] is not None else "0"],
        [f"minimum detectable effect ({power['power']:.0%} power, two-sided α = "
         f"{power['alpha']})", mde_text],
        ["observed difference", f"{points(effect)} points"],
        [f"tasks the observed difference needs for {power['power']:.0%} power",
         str(required) if required is not None else "not estimable"],
    ]
    blocks: list[Block] = [Table(["", "value"], rows)]
    blocks += [Paragraph(text, "warning") for text in power["warnings"]]
    return Section("power", "Power", blocks)


def _beneath(report: dict[str, Any]) -> Section:
    names, beneath, tasks = report["names"], report["beneath"], report["tasks"]
    arms = (beneath["base"], beneath["candidate"])

    def row(label: str, show: Callable[[dict[str, Any]], str]) -> list[str]:
        return [label, *(show(arm) for arm in arms)]

    def count_and_rate(count: str, rate: str) -> Callable[[dict[str, Any]], str]:
        return lambda arm: f"{arm[count]} ({percent(arm[rate])})"

    rows = [
        row("tasks", lambda arm: str(arm["tasks"])),
        row("episodes", lambda arm: str(arm["episodes"])),
        row("all-pass tasks", count_and_rate("all_pass", "all_pass_fraction")),
        row("all-fail tasks", count_and_rate("all_fail", "all_fail_fraction")),
        row("failure-capable tasks (not all-pass)", lambda arm: str(arm["failure_capable"])),
        row("errored episodes (counted as failures)", count_and_rate("errors", "error_rate")),
        row("timed-out episodes", count_and_rate("timeouts", "timeout_rate")),
        row("truncated episodes", count_and_rate("truncations", "truncation_rate")),
        row("refused episodes", count_and_rate("refusals", "refusal_rate")),
        row("design effect 1 + (n − 1)ρ", _design_effect),
        ["harness", *(", ".join(map(short_fingerprint, report["harness"][role]))
                      for role in ("base", "candidate"))],
    ]
    blocks: list[Block] = [Table(["", names["base"], names["candidate"]], rows)]
    blocks += [Paragraph(text, "warning") for text in beneath["flags"]]
    blocks.append(Paragraph(
        f"Tasks compared: {tasks['compared']} ({names['base']}'s file holds "
        f"{tasks['in_file']['base']}, {names['candidate']}'s {tasks['in_file']['candidate']})."
    ))
    for role in ("base", "candidate"):
        dropped = tasks["dropped"][role]
        if dropped["count"]:
            blocks.append(Paragraph(
                f"Dropped {dropped['count']} task(s) of {names[role]}, {dropped['reason']}: "
                f"{_ids(dropped['ids'])}."
            ))
    if beneath["groups"]:
        blocks.append(Subheading("Per group"))
        blocks.append(Table(
            ["group", "tasks", f"{names['base']} pass@1", f"{names['candidate']} pass@1",
             "difference (points)", "improved", "regressed"],
            [[g["group"], str(g["tasks"]), percent(g["base"]), percent(g["candidate"]),
              points(g["difference"]), str(g["improved"]), str(g["regressed"])]
             for g in beneath["groups"]],
        ))
    return Section("beneath", "Beneath the mean", blocks)


def _design_effect(arm: dict[str, Any]) -> str:
    effect = arm["design_effect"]
    if effect is None or effect["design_effect"] is None:
        return "not estimable"
    return f"{effect['design_effect']:.2f} (ρ = {effect['rho']:.3f})"


def _flatten(value: Any, prefix: str = "") -> list[list[str]]:
    """Nested fields as dotted names, so the card shows every field it is given."""
    if isinstance(value, dict) and value:
        return [row for key, item in value.items()
                for row in _flatten(item, f"{prefix}.{key}" if prefix else str(key))]
    if isinstance(value, str):
        return [[prefix, value]]
    if isinstance(value, float):
        return [[prefix, f"{value:.6g}"]]
    return [[prefix, json.dumps(value, ensure_ascii=False)]]


# Fields whose bare names would puzzle a reader of the card; others show as they are named.
FIELD_LABELS = {
    "test_access": {
        "opened": "times this test set has been opened",
        "models_evaluated": "models evaluated on this test set",
    },
}
PROTOCOL_TITLES = {
    "tasks": "Tasks",
    "split": "Split",
    "harness": "Harness",
    "selection": "Selection (on validation only)",
    "test_access": "Test-set access (from the ledger)",
}


def _protocol(protocol: dict[str, Any], figures: Collection[str]) -> Section:
    blocks: list[Block] = []
    ordered = [*PROTOCOL_TITLES, *(key for key in protocol if key not in PROTOCOL_TITLES)]
    for key in (key for key in ordered if key in protocol):
        fields = dict(protocol[key])
        table_rows = fields.pop("table", None) if key == "selection" else None
        blocks.append(Subheading(PROTOCOL_TITLES.get(key, key)))
        labels = FIELD_LABELS.get(key, {})
        rows = [[labels.get(name, name), value] for name, value in _flatten(fields)]
        blocks.append(Table(["field", "value"], rows))
        metric = fields.get("metric", "score")
        if table_rows:
            blocks.append(_selection_table(table_rows, fields.get("chosen"), metric))
        if key == "selection" and "val_selection" in figures:
            blocks.append(Figure("val_selection", f"Validation {metric} per checkpoint with 95% "
                                                  "intervals; the chosen checkpoint is marked."))
    return Section("protocol", "Protocol card", blocks)


def _selection_table(rows: list[dict[str, Any]], chosen: str | None, metric: str) -> Table:
    return Table(
        ["checkpoint", f"val {metric}", "95% interval", "chosen"],
        [[row["checkpoint"], percent(row["value"]), interval_percent(row["low"], row["high"]),
          "◀ chosen" if row["checkpoint"] == chosen else ""] for row in rows],
    )
