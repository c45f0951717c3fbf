"""The paired report as data: a candidate against its base on the same tasks (DESIGN §5).

Pure: two rollout tables in, a typed Report out, made of the records of
heldout.report.sections: the renderers read the record, `Report.to_json()` is report.json and
`Report.from_json` rebuilds the record from it. The verdict is decided by
heldout.statistics.decision and only worded here; every interval and test comes from
heldout.statistics, and the unit of uncertainty is the task, never the episode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from heldout.report.beneath import beneath_section
from heldout.report.best_of_k import PUBLIC_TESTS, BestOfK, best_of_k_section
from heldout.report.by_date import ByDate, ReleaseDates, by_date_section
from heldout.report.contamination import (
    Contamination,
    Decontamination,
    contamination_metrics,
    contamination_section,
)
from heldout.report.curves import curve
from heldout.report.effort import Effort, effort_section
from heldout.report.estimates import headline_estimates
from heldout.report.families import ByFamily, FamilySplit, by_family_section
from heldout.report.flips import flips_section
from heldout.report.formatting import (
    percent,
    points,
    short_fingerprint,
)
from heldout.report.inputs import Arm, pair_arms
from heldout.report.power import paired_sd, power_section
from heldout.report.protocol import ProtocolCard, protocol_copy, protocol_warnings
from heldout.report.sections import (
    ROLES,
    Beneath,
    Curve,
    Flips,
    Harness,
    Headline,
    PerArm,
    Power,
    Tasks,
)
from heldout.report.slices import Passable, Slices, slices_section
from heldout.report.verdict_words import claim_words, reason_words, rule_words, support_words
from heldout.statistics.counts import default_ks
from heldout.statistics.decision import (
    BETTER,
    NOT_DECIDABLE,
    WORSE,
    Decision,
    Gate,
)
from heldout.statistics.estimators import pass_at_k, pass_hat_k
from heldout.statistics.grouping import group_labels
from heldout.statistics.intervals import Interval
from heldout.statistics.power import Reruns
from heldout.statistics.summary import CountsSummary

SCHEMA = "heldout.report/2"  # /2: the verdict rule of issue 15 (test, support, gates)

# --------------------------------------------------------------------------------------------
# The headline: the decision, worded


def _exact_bound_notes(
    arms: PerArm[Arm], summaries: PerArm[CountsSummary], decision: Decision
) -> list[str]:
    """Say so wherever the zero-width bootstrap interval was replaced by an exact bound."""
    notes = []
    for arm, summary in zip(arms, summaries, strict=True):
        # Tasks (or groups) all at one rate inside (0, 1) get an exact bound too, but not
        # because every episode went one way.
        if (summary.pass_at_1.method.startswith("clopper-pearson")
                and summary.pass_at_1.estimate in (0, 1)):
            outcome = "passed" if summary.pass_at_1.estimate == 1 else "failed"
            notes.append(
                f"Every episode of every task {outcome} for {arm.name}: a bootstrap over tasks "
                "would give a zero-width interval, so its pass@1 interval is the exact "
                "Clopper-Pearson bound."
            )
    if decision.difference.method.startswith("clopper-pearson"):
        notes.append(
            f"Every task has the same difference ({points(decision.difference.estimate)} "
            "points) in both arms: a bootstrap over tasks would give a zero-width interval, so "
            "the exact Clopper-Pearson bound on the share of tasks that could differ is "
            "reported instead."
        )
    return notes


def _mismatch_note(harness: Harness, names: PerArm[str]) -> str:
    base, candidate = (", ".join(map(short_fingerprint, found)) for found in harness.fingerprints)
    return (
        f"HARNESS MISMATCH: {names.base} ran under harness {base} and {names.candidate} under "
        f"{candidate}. Compared only because the mismatch was allowed: part of any difference "
        "may come from the harness, not the checkpoint."
    )


def _context_notes(names: PerArm[str], tasks: Tasks, beneath: Beneath) -> list[str]:
    """Dropped tasks and errored episodes: what a reader of the headline alone must know."""
    notes = []
    if any(dropped.count for dropped in tasks.dropped):
        notes.append(
            f"Compared on the {tasks.compared} tasks both files hold: dropped "
            + " and ".join(f"{dropped.count} task(s) only in {name}"
                           for name, dropped in zip(names, tasks.dropped, strict=True))
            + "."
        )
    if any(outcomes.errors for outcomes in beneath.arms):
        notes.append(
            "Errored episodes count as failures: "
            + ", ".join(f"{name} {outcomes.errors} ({percent(outcomes.error_rate)} of episodes)"
                        for name, outcomes in zip(names, beneath.arms, strict=True))
            + "."
        )
    return notes


# --------------------------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class Report:
    """The paired report: every section, and the protocol card when one was given."""

    names: PerArm[str]
    tasks: Tasks
    harness: Harness
    headline: Headline
    flips: Flips
    pass_at_k: Curve
    pass_hat_k: Curve
    power: Power
    beneath: Beneath
    protocol: ProtocolCard | None
    # None when no decontamination was given (heldout compare): the report then says nothing
    # about contamination, rather than claiming none was found.
    contamination: Contamination | None = None
    # What each arm spent per episode beside what it passed; None in a report.json written
    # before it was reported (issue 41).
    effort: Effort | None = None
    # Slices by the base's rate and the both-fail split, and best-of-k beside pass@k; None in
    # a report.json from before them, and best_of_k also when no selector accepted an episode.
    slices: Slices | None = None
    best_of_k: BestOfK | None = None
    # The tasks by release date against the arms' data cutoffs (heldout.report.by_date).
    by_date: ByDate | None = None
    by_family: ByFamily | None = None  # only where the split held families out (issue 42)

    @property
    def verdict(self) -> str:
        return self.headline.decision.verdict

    @property
    def metrics(self) -> dict[str, float | int]:
        """Flat numbers for metrics/test.json, keyed by role so `dvc metrics diff` compares
        like with like across runs whatever the checkpoints are called."""
        metrics: dict[str, float | int] = {"tasks": self.tasks.compared}
        for role, pass_at_1, at_k, hat_k, outcomes, dropped in zip(
            ROLES, self.headline.pass_at_1, self.pass_at_k.arms, self.pass_hat_k.arms,
            self.beneath.arms, self.tasks.dropped, strict=True,
        ):
            metrics |= {f"{role}_pass_at_1": pass_at_1.estimate,
                        f"{role}_pass_at_1_low": pass_at_1.low,
                        f"{role}_pass_at_1_high": pass_at_1.high}
            for prefix, curve_points in (("pass_at_", at_k), ("pass_hat_", hat_k)):
                # k = 1 of both curves is pass@1 itself, already above with its interval.
                metrics |= {f"{role}_{prefix}{point.k}": point.interval.estimate
                            for point in curve_points if point.k > 1}
            metrics |= {f"{role}_error_rate": outcomes.error_rate,
                        f"{role}_truncation_rate": outcomes.truncation_rate,
                        f"{role}_all_pass_fraction": outcomes.all_pass_fraction,
                        f"{role}_all_fail_fraction": outcomes.all_fail_fraction,
                        f"{role}_failure_capable": outcomes.failure_capable,
                        f"{role}_dropped_tasks": dropped.count}
        decision = self.headline.decision
        difference, test, mcnemar = decision.difference, decision.test, decision.mcnemar
        metrics |= {
            "difference": difference.estimate,
            "difference_low": difference.low,
            "difference_high": difference.high,
            "test_p": test.p_value,
            "mcnemar_b": mcnemar.b,
            "mcnemar_c": mcnemar.c,
            "mcnemar_p": mcnemar.pvalue,
            "mcnemar_midp": mcnemar.midp,
            # 1 better, -1 worse, 0 no difference detected; `decidable` 0 when a gate voided it.
            "verdict": {BETTER: 1, WORSE: -1}.get(self.verdict, 0),
            "decidable": int(not self.verdict.startswith(NOT_DECIDABLE)),
            "groups": decision.support.groups,
            "tied": self.flips.tied,
            "improved": len(self.flips.improved),
            "regressed": len(self.flips.regressed),
            "both_pass": self.flips.both_pass,
            "both_fail": self.flips.both_fail,
        }
        if self.power.mde is not None:
            metrics["mde"] = self.power.mde
        if self.power.noise_floor is not None:
            metrics["noise_floor"] = self.power.noise_floor.floor
        if decision.drift is not None:
            metrics["run_drift_sd"] = decision.drift.run_sd
        if self.contamination is not None:
            metrics |= contamination_metrics(self.contamination)
        for section in (self.effort, self.slices, self.best_of_k, self.by_date,
                        self.by_family):
            metrics |= section.metrics() if section is not None else {}
        # Six significant digits, not decimals: a p-value of 1e-9 must not print as 0.
        return {key: float(f"{value:.6g}") if isinstance(value, float) else int(value)
                for key, value in metrics.items()}

    def to_json(self) -> dict[str, Any]:
        """report.json: every section, and the metrics of metrics/test.json."""
        return {
            "schema": SCHEMA,
            "names": self.names.to_json(),
            "tasks": self.tasks.to_json(),
            "harness": self.harness.to_json(),
            "headline": self.headline.to_json(),
            "flips": self.flips.to_json(),
            "pass_at_k": self.pass_at_k.to_json(),
            "pass_hat_k": self.pass_hat_k.to_json(),
            "power": self.power.to_json(),
            "beneath": self.beneath.to_json(),
            "protocol": self.protocol,
            "contamination": (None if self.contamination is None
                              else self.contamination.to_json()),
            "effort": None if self.effort is None else self.effort.to_json(),
            "slices": None if self.slices is None else self.slices.to_json(),
            "best_of_k": None if self.best_of_k is None else self.best_of_k.to_json(),
            "by_date": None if self.by_date is None else self.by_date.to_json(),
            "by_family": None if self.by_family is None else self.by_family.to_json(),
            "metrics": self.metrics,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """The report a report.json holds; its metrics are recomputed from its sections."""
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} report: schema {data.get('schema')!r}")
        return cls(
            names=PerArm.from_json(data["names"]),
            tasks=Tasks.from_json(data["tasks"]),
            harness=Harness.from_json(data["harness"]),
            headline=Headline.from_json(data["headline"]),
            flips=Flips.from_json(data["flips"]),
            pass_at_k=Curve.from_json(data["pass_at_k"]),
            pass_hat_k=Curve.from_json(data["pass_hat_k"]),
            power=Power.from_json(data["power"]),
            beneath=Beneath.from_json(data["beneath"]),
            protocol=data["protocol"],
            # Absent from report.json files written before contamination was reported.
            contamination=(None if data.get("contamination") is None
                           else Contamination.from_json(data["contamination"])),
            effort=None if data.get("effort") is None else Effort.from_json(data["effort"]),
            slices=None if data.get("slices") is None else Slices.from_json(data["slices"]),
            best_of_k=(None if data.get("best_of_k") is None
                       else BestOfK.from_json(data["best_of_k"])),
            by_date=None if data.get("by_date") is None else ByDate.from_json(data["by_date"]),
            by_family=data.get("by_family") and ByFamily.from_json(data["by_family"]),
        )


def _reference_note(reference: Interval | None) -> list[str]:
    if reference is None:
        return []
    return [f"Drift control: the reference checkpoint, run beside each arm, moved "
            f"{100 * reference.estimate:+.1f} points (95% interval [{100 * reference.low:+.1f}, "
            f"{100 * reference.high:+.1f}]) between the arms' times; a claim must clear that "
            "interval."]


def build_report(
    base: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    base_name: str | None = None,
    candidate_name: str | None = None,
    sample: int = 0,
    allow_harness_mismatch: bool = False,
    groups: Mapping[str, str] | None = None,
    reruns: Reruns | None = None,
    protocol: ProtocolCard | Mapping[str, Any] | None = None,
    decontamination: Decontamination | None = None,
    target_effect: float | None = None,
    reference: Interval | None = None,
    passable: Passable | None = None,
    selector: str = PUBLIC_TESTS,
    judge: tuple[Gate, ...] = (),
    dates: ReleaseDates | None = None,
    families: FamilySplit | None = None,
    seed: int = 0,
) -> Report:
    """The paired report of `candidate` against `base`, two rollout tables (heldout.episodes.episode
    ROW_COLUMNS; at least heldout.report.inputs.REQUIRED_COLUMNS).

    Compared on the task ids both hold (the rest are listed as dropped, with the reason).
    Different harness fingerprints raise IncomparableRolloutsError unless
    `allow_harness_mismatch`, and then the mismatch is in the headline. Errored episodes are
    failures, counted separately. McNemar's exact test uses the episode with index `sample`
    of every task. `groups` maps task id to group (a task it omits is its own group);
    `reruns`: each run's pass@1 of both arms when the tables hold R ≥ 2 paired runs pooled
    (heldout.statistics.counts.pool_runs), whose spread the test and the interval carry;
    `protocol` (see ProtocolCard) is copied into the report and rendered as the protocol card.
    `decontamination` lists the task ids a training corpus holds a copy of
    (heldout.report.contamination): compared ones are marked, and pass@1 and the difference
    are also given without them; None (the default) says nothing about contamination.
    `target_effect`: the report also says how many tasks (or groups) it needs. Names default
    to each table's `checkpoint`. `reference`: a reference checkpoint's movement between the
    arms' times, the drift control of arms that ran apart (heldout.statistics.timing).
    `passable`: tasks a run other than the two arms passed, which splits the both-fail ties
    (heldout.report.slices). `selector`: the boolean column best-of-k submits by
    (heldout.report.best_of_k). `judge`: gates that void any verdict of the judge that scored
    both arms (heldout.statistics.judge_trust). `dates`: release dates and data cutoffs, for
    the by_date split (heldout.report.by_date). `families`: the test tasks' families where the
    split held some out (heldout.report.families). `seed` seeds every bootstrap.
    """
    protocol_card = protocol_copy(protocol) if protocol is not None else None
    paired = pair_arms(base, candidate, names=(base_name, candidate_name), sample=sample,
                       allow_harness_mismatch=allow_harness_mismatch)
    arms, harness = paired.arms, paired.harness
    names = arms.map(lambda arm: arm.name)
    ks = default_ks(min(int(arm.counts["n"].min()) for arm in arms))
    mismatch = None if harness.match else (
        "the arms ran under different harnesses, so part of any difference may be the "
        "harness's")
    estimates = headline_estimates(arms, groups=groups, reruns=reruns,
                                   mismatch=mismatch, seed=seed, reference=reference, judge=judge)
    summaries, decision = estimates.summaries, estimates.decision
    contamination = None if decontamination is None else contamination_section(
        arms, decontamination, groups=groups, reruns=reruns, mismatch=mismatch,
        seed=seed, reference=reference)
    flips = flips_section(arms, groups, contamination)
    beneath = beneath_section(arms, summaries, flips.tasks, seed)
    warnings = [] if harness.match else [_mismatch_note(harness, names)]
    if protocol_card is not None:
        warnings += protocol_warnings(protocol_card,
                                      [*harness.fingerprints.base, *harness.fingerprints.candidate])
    sd = paired_sd(arms)
    labels = group_labels(arms.base.counts.index, groups)
    effort = effort_section(PerArm(base, candidate), list(arms.base.counts.index), groups, seed)
    headline = Headline(
        pass_at_1=estimates.pass_at_1,
        decision=decision,
        standard_error=sd / math.sqrt(len(arms.base.rates)) if sd is not None else None,
        sample=sample,
        rule=rule_words(decision),
        reason=reason_words(decision),
        warnings=warnings,
        notes=([support_words(decision, protocol_card)]
               + _reference_note(reference)
               + _exact_bound_notes(arms, summaries, decision)
               + _context_notes(names, paired.tasks, beneath)
               + [line for line in [effort.line(names)] if line]),
        claim=claim_words(names, decision, protocol_card),
    )
    both_fail = [row.task_id for row in flips.tasks if row.flip == "both fail"]
    return Report(
        names=names,
        tasks=paired.tasks,
        harness=harness,
        headline=headline,
        flips=flips,
        pass_at_k=curve(arms, pass_at_k, ks, seed, labels),
        pass_hat_k=curve(arms, pass_hat_k, ks, seed, labels),
        power=power_section(arms, decision, target_effect),
        beneath=beneath,
        protocol=protocol_card,
        contamination=contamination,
        effort=effort,
        slices=slices_section(arms, labels, both_fail, passable, seed),
        best_of_k=best_of_k_section(PerArm(base, candidate), names, list(arms.base.counts.index),
                                    ks, seed, labels, selector),
        by_date=by_date_section(arms, dates, labels, seed),
        by_family=families and by_family_section(arms, families, labels, seed),
    )
