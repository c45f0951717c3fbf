"""The report's wording, once: a Report record becomes sections of paragraphs, tables and
figures that the Markdown and HTML renderers lay out without deciding what to say."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from heldout.report.contamination import contamination_words
from heldout.report.core import Report
from heldout.report.formatting import (
    id_list,
    interval_percent,
    interval_points,
    percent,
    points,
    short_fingerprint,
)
from heldout.report.protocol import ProtocolCard
from heldout.report.sections import Contamination, Curve, Outcomes, PerArm
from heldout.report.verdict_words import verdict_line
from heldout.statistics.pvalues import alpha_text, p_value_text


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


def report_document(report: Report, figures: Collection[str]) -> Document:
    """Every section of the report; `figures` names the figures that were drawn."""
    sections = [
        _headline(report),
        _flips(report, figures),
        _curves(report, figures),
        _power(report),
        _beneath(report),
    ]
    if report.protocol is not None:
        sections.append(_protocol(report.protocol, figures))
    return Document(f"{report.names.candidate} against {report.names.base}", sections)


def _episodes(report: Report) -> str:
    """Episodes per task, arm by arm only where the arms differ."""
    counts = report.tasks.episodes_per_task.map(
        lambda span: str(span.min) if span.min == span.max else f"{span.min} to {span.max}"
    )
    if counts.base == counts.candidate:
        return f"{counts.base} episode{'' if counts.base == '1' else 's'} per task"
    return "episodes per task: " + ", ".join(
        f"{name} {count}" for name, count in zip(report.names, counts, strict=True)
    )


def _headline(report: Report) -> Section:
    """The verdict line first, then the numbers in one table with no method in it (so no
    interval wraps), then why, then how: each method stated once."""
    names, headline = report.names, report.headline
    decision = headline.decision
    difference = decision.difference
    arm_rows = [[name, percent(interval.estimate), interval_percent(interval.low, interval.high)]
                for name, interval in zip(names, headline.pass_at_1, strict=True)]
    difference_row = [f"difference ({names.candidate} − {names.base})",
                      f"{points(difference.estimate)} points",
                      interval_points(difference.low, difference.high)]
    blocks: list[Block] = [
        Paragraph(verdict_line(names, headline.pass_at_1, decision), "verdict"),
        *(Paragraph(text, "warning") for text in headline.warnings),
        Table(["", "pass@1", "95% interval"], [*arm_rows, difference_row]),
        Paragraph(f"Why: {headline.reason}."),
        Paragraph(_how(report)),
        Paragraph(_mcnemar(report)),
        *(Paragraph(text, tone) for text, tone in contamination_words(
            report.contamination, names, report.tasks.compared)),
        Paragraph(f"Rule: {headline.rule}."),
        *(Paragraph(text, "note") for text in headline.notes),
    ]
    return Section("headline", "Headline", blocks)


def _how(report: Report) -> str:
    """What was compared and by which methods, once each."""
    names, headline = report.names, report.headline
    deciding, difference = headline.decision.test, headline.decision.difference
    test_version = ((report.protocol or {}).get("split") or {}).get("test_version")
    arm_methods = sorted({_method(interval.method) for interval in headline.pass_at_1})
    standard_error = headline.standard_error
    return (
        f"How: {names.candidate} against {names.base} on {report.tasks.compared} tasks, "
        f"{_episodes(report)}"
        + (f", test set {test_version}" if test_version else "")
        + f". Decided by {deciding.method} on the per-task differences of pass rates over "
        f"every episode ({deciding.nonzero_units} of {deciding.units} "
        f"{'groups' if 'group' in deciding.method else 'tasks'} differ): two-sided "
        f"{deciding.printed_p_value}. The difference's interval: "
        f"{_interval_method(difference.method, deciding.method)}"
        + (f", standard error {100 * standard_error:.1f} points" if standard_error is not None
           else "")
        + f"; each arm's: {', '.join(arm_methods)}."
    )


def _interval_method(interval: str, deciding: str) -> str:
    """The interval's method, or "the bootstrap-t's" where the deciding test already named
    it, so that no method is described twice."""
    for shared in ("bootstrap-t", "newcombe paired score"):
        if interval.startswith(shared) and deciding.startswith(shared):
            widened = interval.partition(", widened to ")[2]
            if widened.removeprefix("the ").split(" (")[0] in deciding:
                widened = "the betting test's"
            return f"the {shared}'s" + (f", widened to {widened}" if widened else "")
    return ("" if "paired" in interval else "paired ") + _method(interval)


def _mcnemar(report: Report) -> str:
    names, headline = report.names, report.headline
    test = headline.decision.mcnemar
    return (f"Exact McNemar test on sample {headline.sample} (reported, not deciding): b = "
            f"{test.b} ({names.base} passes, {names.candidate} fails), c = {test.c} "
            f"({names.candidate} passes, {names.base} fails); two-sided "
            f"{p_value_text(test.pvalue)}, mid-{p_value_text(test.midp)}.")


def _contamination_cells(contamination: Contamination | None) -> dict[str, str]:
    """The per-task table's contamination column, by task id; empty when no task is flagged,
    and the column is then left out."""
    flagged = contamination.flagged if contamination is not None else []
    return {task.task_id: "flagged: " + (", ".join(task.methods) or "method not given")
            for task in flagged}


def _method(method: str) -> str:
    """The method's name for a reader: the older internal names spelt out, the rest as given."""
    return {
        "bootstrap-indices": "task bootstrap",
        "bootstrap-multinomial": "task bootstrap",
        "clopper-pearson": "exact Clopper-Pearson bound",
    }.get(method, method)


def _flips(report: Report, figures: Collection[str]) -> Section:
    names, flips = report.names, report.flips
    with_groups = any(row.group is not None for row in flips.tasks)
    contaminated = _contamination_cells(report.contamination)
    header = ["task", *(["group"] if with_groups else []), f"{names.base} c/n",
              f"{names.candidate} c/n", "difference (points)", "by pass rate",
              *(["contamination"] if contaminated else [])]
    rows = [
        [row.task_id, *([str(row.group)] if with_groups else []),
         f"{row.base_c}/{row.base_n}", f"{row.candidate_c}/{row.candidate_n}",
         points(row.difference), row.flip,
         *([contaminated.get(row.task_id, "")] if contaminated else [])]
        for row in flips.tasks
    ]
    blocks: list[Block] = [
        Paragraph(
            f"By pass rate over every episode: {len(flips.improved)} improved, "
            f"{len(flips.regressed)} regressed, {flips.both_pass} pass in both, "
            f"{flips.both_fail} fail in both, {flips.tied} tied in between."
        ),
        Paragraph(f"Improved ({names.candidate} passes more often than {names.base}): "
                  f"{id_list(flips.improved)}."),
        Paragraph(f"Regressed ({names.base} passes more often than {names.candidate}): "
                  f"{id_list(flips.regressed)}."),
    ]
    if "forest" in figures:
        blocks.append(Figure("forest", "Per-task difference in pass rate over all episodes, "
                                       "with the paired mean and its 95% interval."))
    if contaminated:
        blocks.append(Paragraph(
            f"{len(contaminated)} task(s) marked \"flagged\" in the contamination column: a "
            "training corpus holds a copy, found by the methods listed. They are scored like "
            "the rest; the headline also gives its numbers without them.", "note"))
    blocks.append(Table(header, rows))
    return Section("flips", "Task flips", blocks)


def _curve_table(names: PerArm[str], curve: Curve, label: str) -> Table:
    rows = [
        [str(base.k),
         f"{percent(base.interval.estimate)} "
         f"{interval_percent(base.interval.low, base.interval.high)}",
         f"{percent(candidate.interval.estimate)} "
         f"{interval_percent(candidate.interval.low, candidate.interval.high)}",
         f"{points(difference.interval.estimate)} "
         f"{interval_points(difference.interval.low, difference.interval.high)}"]
        for base, candidate, difference in zip(*curve.arms, curve.difference, strict=True)
    ]
    return Table(["k", f"{names.base} {label}", f"{names.candidate} {label}",
                  "difference (points)"], rows)


def _crossing_text(curve: Curve, label: str) -> str:
    if not curve.crossings:
        leaders = {point.leader for point in curve.difference} - {None}
        who = f"{leaders.pop()} is ahead or level" if leaders else "the arms are level"
        return (f"The {label} curves do not cross beyond their intervals: {who} at every k "
                "(ahead only where the paired interval excludes 0).")
    described = "; ".join(
        f"{c.leader_before} leads up to k = {c.after_k}, {c.leader_after} from k = {c.by_k}"
        for c in curve.crossings
    )
    return f"The {label} curves cross (where the paired intervals exclude 0): {described}."


def _curves(report: Report, figures: Collection[str]) -> Section:
    blocks: list[Block] = [Paragraph(
        "Secondary: pass@1 is the one comparison fixed in advance. These curves carry one "
        "interval per k on each side, with no correction for multiplicity, so some will "
        "exclude 0 by chance; read them as description, not as findings.", "note")]
    if "pass_k" in figures:
        blocks.append(Figure("pass_k", "pass@k and pass^k for both arms; bands are each arm's "
                                       "95% interval, over groups when the tasks have them."))
    for curve, label in ((report.pass_at_k, "pass@k"), (report.pass_hat_k, "pass^k")):
        blocks += [Paragraph(_crossing_text(curve, label)),
                   _curve_table(report.names, curve, label)]
    return Section("pass-k", "pass@k and pass^k", blocks)


def _power(report: Report) -> Section:
    power = report.power
    mde_text = f"{100 * power.mde:.1f} points" if power.mde is not None else "not estimable"
    required = power.required_tasks
    rows = [
        ["tasks", str(power.tasks)],
        ["paired standard deviation of per-task differences",
         f"{100 * power.paired_sd:.1f} points" if power.paired_sd is not None else "0"],
        [f"minimum detectable effect of the verdict ({power.power:.0%} power, two-sided "
         f"{alpha_text(power.alpha)})",
         mde_text],
        ["observed difference", f"{points(power.observed_effect)} points"],
        [f"tasks (or groups) the observed difference needs for {power.power:.0%} power",
         str(required) if required is not None else "not estimable"],
    ]
    if power.target_effect is not None:
        rows.append([f"tasks (or groups) a {points(power.target_effect)}-point effect needs "
                     f"(--target-effect)",
                     str(power.target_units) if power.target_units is not None else
                     "none: the run-level drift alone keeps it out of reach"])
    blocks: list[Block] = [Table(["", "value"], rows)]
    blocks += [Paragraph(text, "warning") for text in power.warnings]
    return Section("power", "Power", blocks)


def _beneath(report: Report) -> Section:
    names, beneath, tasks = report.names, report.beneath, report.tasks

    def row(label: str, show: Callable[[Outcomes], str]) -> list[str]:
        return [label, *(show(arm) for arm in beneath.arms)]

    rows = [
        row("tasks", lambda arm: str(arm.tasks)),
        row("episodes", lambda arm: str(arm.episodes)),
        row("all-pass tasks", lambda arm: _count_and_rate(arm.all_pass, arm.all_pass_fraction)),
        row("all-fail tasks", lambda arm: _count_and_rate(arm.all_fail, arm.all_fail_fraction)),
        row("failure-capable tasks (not all-pass)", lambda arm: str(arm.failure_capable)),
        row("errored episodes (counted as failures)",
            lambda arm: _count_and_rate(arm.errors, arm.error_rate)),
        row("timed-out episodes", lambda arm: _count_and_rate(arm.timeouts, arm.timeout_rate)),
        row("truncated episodes",
            lambda arm: _count_and_rate(arm.truncations, arm.truncation_rate)),
        row("refused episodes", lambda arm: _count_and_rate(arm.refusals, arm.refusal_rate)),
        row("episodes a budget ended (failures)",
            lambda arm: _count_and_rate(arm.budget_ends, arm.budget_rate)),
        row("design effect 1 + (n − 1)ρ", _design_effect),
        ["harness", *(", ".join(map(short_fingerprint, found))
                      for found in report.harness.fingerprints)],
    ]
    blocks: list[Block] = [Table(["", names.base, names.candidate], rows)]
    blocks += [Paragraph(text, "warning") for text in beneath.flags]
    blocks.append(Paragraph(
        f"Tasks compared: {tasks.compared} ({names.base}'s file holds "
        f"{tasks.in_file.base}, {names.candidate}'s {tasks.in_file.candidate})."
    ))
    for name, dropped in zip(names, tasks.dropped, strict=True):
        if dropped.count:
            blocks.append(Paragraph(
                f"Dropped {dropped.count} task(s) of {name}, {dropped.reason}: "
                f"{id_list(dropped.ids)}."
            ))
    if beneath.groups:
        blocks.append(Subheading("Per group"))
        blocks.append(Table(
            ["group", "tasks", f"{names.base} pass@1", f"{names.candidate} pass@1",
             "difference (points)", "improved", "regressed"],
            [[g.group, str(g.tasks), percent(g.base), percent(g.candidate),
              points(g.difference), str(g.improved), str(g.regressed)]
             for g in beneath.groups],
        ))
    return Section("beneath", "Beneath the mean", blocks)


def _count_and_rate(count: int, rate: float) -> str:
    return f"{count} ({percent(rate)})"


def _design_effect(arm: Outcomes) -> str:
    effect = arm.design_effect
    if effect is None or not math.isfinite(effect.design_effect):
        return "not estimable"
    return f"{effect.design_effect:.2f} (ρ = {effect.rho:.3f})"


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
        "tasks_seen_before": "of its tasks, opened by an earlier access",
        "runs": "paired runs of each arm",
        "episodes_per_run": "episodes per task in each run",
    },
}
# Fields that are differences of rates, in points as every other table of the report writes
# them, not as the raw fractions data/selection.json holds.
FIELD_FORMATS: dict[str, dict[str, Callable[[float], str]]] = {
    "selection": {"lead": lambda lead: f"{points(lead)} points",
                  "val_mde": lambda detectable: f"{100 * detectable:.1f} points"},
}
PROTOCOL_TITLES = {
    "tasks": "Tasks",
    "split": "Split",
    "harness": "Harness",
    "selection": "Selection (on validation only)",
    "test_access": "Test-set access (from the ledger)",
}


def _protocol(protocol: ProtocolCard, figures: Collection[str]) -> Section:
    blocks: list[Block] = []
    ordered = [*PROTOCOL_TITLES, *(key for key in protocol if key not in PROTOCOL_TITLES)]
    for key in (key for key in ordered if key in protocol):
        fields = dict(protocol[key])
        table_rows = fields.pop("table", None) if key == "selection" else None
        alarms = fields.pop("public_hidden_alarms", None) if key == "selection" else None
        blocks.append(Subheading(PROTOCOL_TITLES.get(key, key)))
        labels, formats = FIELD_LABELS.get(key, {}), FIELD_FORMATS.get(key, {})
        shown = {name: formats[name](value) if name in formats and value is not None else value
                 for name, value in fields.items()}
        rows = [[labels.get(name, name), value] for name, value in _flatten(shown)]
        blocks.append(Table(["field", "value"], rows))
        metric = fields.get("metric", "score")
        if table_rows:
            blocks.append(selection_table(table_rows, fields.get("chosen"), metric))
        blocks += [Paragraph(f"Public-versus-hidden alarm, {name} (val): {reason}", "warning")
                   for name, reason in (alarms or {}).items()]
        if key == "selection" and "val_selection" in figures:
            blocks.append(Figure("val_selection", f"Validation {metric} per checkpoint with 95% "
                                                  "intervals; the chosen checkpoint is marked."))
    return Section("protocol", "Protocol card", blocks)


def selection_table(rows: list[dict[str, Any]], chosen: str | None, metric: str) -> Table:
    return Table(
        ["checkpoint", f"val {metric}", "95% interval", "public-vs-hidden alarm", "chosen"],
        [[row["checkpoint"], percent(row["value"]), interval_percent(row["low"], row["high"]),
          "⚠ passes public, fails hidden" if row.get("public_hidden_alarm") else "",
          "◀ chosen" if row["checkpoint"] == chosen else ""] for row in rows],
    )
