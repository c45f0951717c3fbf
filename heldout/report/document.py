"""The report's wording, once: a Report record becomes sections of paragraphs, tables and
figures that the Markdown and HTML renderers lay out without deciding what to say."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection
from typing import Any

from heldout.report.beneath_blocks import best_of_k_blocks, effort_blocks, slices_blocks
from heldout.report.blocks import Block, Document, Figure, Paragraph, Section, Subheading, Table
from heldout.report.contamination import Contamination
from heldout.report.contamination_blocks import contamination_part
from heldout.report.core import Report
from heldout.report.family_blocks import family_sections
from heldout.report.formatting import (
    id_list,
    interval_percent,
    interval_points,
    percent,
    points,
    short_fingerprint,
)
from heldout.report.headline import headline_section
from heldout.report.protocol import ProtocolCard
from heldout.report.sections import Curve, Outcomes, PerArm
from heldout.statistics.pvalues import alpha_text


def report_document(report: Report, figures: Collection[str]) -> Document:
    """Every section of the report; `figures` names the figures that were drawn."""
    sections = [
        headline_section(report),
        _flips(report, figures),
        _curves(report, figures),
        _power(report),
        _beneath(report),
        *family_sections(report),
    ]
    sections += [part for part in [contamination_part(report)] if part is not None]
    if report.protocol is not None:
        sections.append(_protocol(report.protocol, figures))
    return Document(f"{report.names.candidate} against {report.names.base}", sections)


def _contamination_cells(contamination: Contamination | None) -> dict[str, str]:
    """The per-task table's contamination column, by task id; empty when no task is flagged,
    and the column is then left out."""
    flagged = contamination.flagged if contamination is not None else []
    return {task.task_id: "flagged: " + (", ".join(task.methods) or "method not given")
            for task in flagged}


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
        "exclude 0 by chance; read them as description, not as findings. They run to k ≤ n/2 "
        f"(n = {min(span.min for span in report.tasks.episodes_per_task)} episodes per task "
        "here): the unbiased estimator's variance grows as k nears n.", "note")]
    if "pass_k" in figures:
        blocks.append(Figure("pass_k", "pass@k and pass^k for both arms; bands are each arm's "
                                       "95% interval, over groups when the tasks have them"
                                       + ("; dashed: best-of-k" if report.best_of_k else "")
                                       + "."))
    for curve, label in ((report.pass_at_k, "pass@k"), (report.pass_hat_k, "pass^k")):
        blocks += [Paragraph(_crossing_text(curve, label)),
                   _curve_table(report.names, curve, label)]
        if label == "pass@k":
            blocks += best_of_k_blocks(report)
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
    floor = power.noise_floor
    if floor is not None:
        rows.append([f"the seed's noise floor, t₀.₉₇₅({floor.runs - 1}) × sd of the base's "
                     f"{floor.runs} runs' pass@1 × √2 (information)",
                     f"{100 * floor.floor:.1f} points ({floor.t:.2f} × "
                     f"{100 * floor.run_sd:.2f} × √2)"])
    blocks: list[Block] = [Table(["", "value"], rows)]
    if floor is not None:
        blocks.append(Paragraph(
            "The noise floor is information, not a hurdle: a difference smaller than it is one "
            "that rerunning the base alone can make between two runs. The verdict already "
            "carries the run-level drift, as the spread of the arms' paired differences run by "
            "run, and asks no difference to clear this floor.", "note"))
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
    blocks += effort_blocks(report) + slices_blocks(report)
    if beneath.groups:
        blocks.append(Subheading("Per group"))
        blocks.append(Table(
            ["group", "tasks", f"{names.base} pass@1", f"{names.candidate} pass@1",
             "difference (points)", "95% interval", "improved / regressed / tied"],
            [[g.group, str(g.tasks), percent(g.base), percent(g.candidate),
              points(g.difference),
              "unmeasured" if g.low is None else interval_points(g.low, g.high),
              f"{g.improved} / {g.regressed} / {'—' if g.tied is None else g.tied}"]
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
    "split": {"kind": "split kind", "group": "what a group is"},
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
        shares, curse = _honest_selection(fields) if key == "selection" else (None, None)
        blocks.append(Subheading(PROTOCOL_TITLES.get(key, key)))
        labels, formats = FIELD_LABELS.get(key, {}), FIELD_FORMATS.get(key, {})
        shown = {name: formats[name](value) if name in formats and value is not None else value
                 for name, value in fields.items()}
        rows = [[labels.get(name, name), value] for name, value in _flatten(shown)]
        blocks.append(Table(["field", "value"], rows))
        metric = fields.get("metric", "score")
        if table_rows:
            blocks.append(selection_table(table_rows, fields.get("chosen"), metric, shares))
        if curse:
            blocks.append(Paragraph(curse))
        blocks += [Paragraph(f"Public-versus-hidden alarm, {name} (val): {reason}", "warning")
                   for name, reason in (alarms or {}).items()]
        if key == "selection" and "val_selection" in figures:
            blocks.append(Figure("val_selection", f"Validation {metric} per checkpoint with 95% "
                                                  "intervals; the chosen checkpoint is marked."))
    return Section("protocol", "Protocol card", blocks)


def _honest_selection(fields: dict[str, Any]) -> tuple[dict[str, float] | None, str | None]:
    """Out of the card's selection fields: the pick stability's shares (a column of the
    selection table, not a row per checkpoint) and the winner's-curse note (a line under it,
    its fractions already in points); None for a selection.json from before issue 41."""
    stability, curse = fields.pop("pick_stability", None), fields.pop("winners_curse", None)
    if stability is not None:
        fields["pick_stability"] = {name: value for name, value in stability.items()
                                    if name != "shares"}
    return (stability or {}).get("shares"), (curse or {}).get("note")


def selection_table(rows: list[dict[str, Any]], chosen: str | None, metric: str,
                    shares: dict[str, float] | None = None) -> Table:
    """The val table the rule chose from; `shares` (pick_stability.shares) adds how often the
    rule picks each checkpoint over resamples of the val set."""
    picked = ["picked in resamples"] if shares is not None else []
    # Effort per episode against the base's, where the val scores recorded any (issue 41).
    effort = ["effort vs base"] if any(row.get("effort_ratio") for row in rows) else []
    return Table(
        ["checkpoint", f"val {metric}", "95% interval", *picked, *effort,
         "public-vs-hidden alarm", "chosen"],
        [[row["checkpoint"], percent(row["value"]), interval_percent(row["low"], row["high"]),
          *([percent(shares.get(row["checkpoint"], 0.0))] if shares is not None else []),
          *([", ".join(f"{measure} {ratio:.2f}×" for measure, ratio in
                       row.get("effort_ratio", {}).items())] if effort else []),
          "⚠ passes public, fails hidden" if row.get("public_hidden_alarm") else "",
          "◀ chosen" if row["checkpoint"] == chosen else ""] for row in rows],
    )
