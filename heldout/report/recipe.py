"""The recipe report (`heldout compare A1,A2,A3 B1,B2,B3`, issue 42): two recipes, each a set of
training seeds' rollout tables, compared with the seed as the unit
(heldout.statistics.recipe). Its own small record, not the two-checkpoint Report: a recipe
verdict has no task flips, no slices and no pass@k by task to show, and what it adds (seed
scores, the variance in parts, seeds per arm) has no place in that one."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heldout.files import staged_outputs
from heldout.report.formatting import interval_points, percent, points, short_fingerprint
from heldout.statistics.counts import IncomparableRolloutsError, per_task_counts
from heldout.statistics.pvalues import alpha_text, p_value_text
from heldout.statistics.recipe import (
    MIN_SEEDS,
    NO_DIFFERENCE,
    TEST_NAME,
    Decomposition,
    RecipeComparison,
    SeedCounts,
    compare_recipes,
)
from heldout.statistics.rule import ALPHA, CONFIDENCE, POWER

ROLES = ("base", "candidate")
NAME_WIDTH = 24  # the verdict line stays within 160 characters


def seed_counts(seeds: list[tuple[str, pd.DataFrame]], tasks: list[str]) -> SeedCounts:
    """One arm's rollout tables (file, table), a row per seed, on `tasks` in that order."""
    counts = [per_task_counts(table.assign(checkpoint="seed")).set_index("task_id").loc[tasks]
              for _, table in seeds]
    return SeedCounts(np.stack([part["c"].to_numpy(float) for part in counts]),
                      np.stack([part["n"].to_numpy(float) for part in counts]))


def recipe_from_access(record: Mapping[str, Any]) -> RecipeReport:
    """The recipe verdict of a test access's `recipes` record (stages/test_recipes.py): each
    seed's passes and episodes by task, the baseline recipe and the candidate one."""
    names = (str(record["baseline"]), str(record["candidate"]))
    seeds = tuple(tuple(record["seeds"][name]) for name in names)
    counts = record["counts"]
    tasks = sorted(counts[seeds[0][0]]["episodes"])

    def arm(checkpoints: tuple[str, ...]) -> SeedCounts:
        return SeedCounts(*(np.array([[counts[seed][part][task] for task in tasks]
                                      for seed in checkpoints], dtype=float)
                            for part in ("passes", "episodes")))

    return RecipeReport(names, seeds, len(tasks), compare_recipes(*map(arm, seeds)))


def check_seeds_alike(seeds: list[tuple[str, pd.DataFrame]]) -> list[str]:
    """The task ids every seed file of both arms holds, in order; IncomparableRolloutsError
    naming the first file that ran under another harness or on other tasks than the first:
    a difference between recipes must not be one of harnesses or task sets."""
    first, table = seeds[0]
    harness = sorted(set(table["harness"].astype(str)))
    tasks = set(table["task_id"])
    for name, other in seeds:
        found = sorted(set(other["harness"].astype(str)))
        if found != harness or len(found) > 1:
            raise IncomparableRolloutsError(
                f"not comparable: {name} ran under harness "
                f"{', '.join(map(short_fingerprint, found))} and {first} under "
                f"{', '.join(map(short_fingerprint, harness))}: every seed of both recipes "
                "must be evaluated under one harness")
        differ = tasks ^ set(other["task_id"])
        if differ:
            raise IncomparableRolloutsError(
                f"not comparable: {name} and {first} hold different tasks ({len(differ)} "
                f"differ, first {sorted(differ)[0]}): every seed of both recipes must be "
                "evaluated on the same tasks")
    return sorted(tasks)


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _sd_points(variance: float | None) -> str:
    return "unknown" if variance is None else f"{100 * math.sqrt(variance):.1f}"


@dataclass(frozen=True)
class RecipeReport:
    names: tuple[str, str]
    files: tuple[tuple[str, ...], tuple[str, ...]]
    tasks: int
    comparison: RecipeComparison

    @property
    def seeds(self) -> tuple[int, int]:
        return len(self.files[0]), len(self.files[1])

    @property
    def means(self) -> tuple[float, float]:
        return (float(self.comparison.base.scores.mean()),
                float(self.comparison.candidate.scores.mean()))

    def p_text(self) -> str:
        p_value = self.comparison.p_value
        return "p unknown" if math.isnan(p_value) else p_value_text(p_value)

    def verdict_line(self) -> str:
        """"Better: recipe B 71.0% vs recipe A 64.2% over 3 and 3 seeds, +6.8 points [+2.1,
        +11.5], p = 0.0123 — unit: seed", within 160 characters."""
        found = self.comparison
        word = found.verdict[0].upper() + found.verdict[1:].split(":")[0]
        base, candidate = (name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 1] + "…"
                           for name in self.names)
        return (f"{word}: recipe {candidate} {percent(self.means[1])} vs recipe {base} "
                f"{percent(self.means[0])} over {self.seeds[1]} and {self.seeds[0]} seeds, "
                f"{points(found.difference)} points {interval_points(found.low, found.high)}, "
                f"{self.p_text()} — unit: seed")

    def claim(self) -> str:
        return (f"The claim: recipe {self.names[1]} against recipe {self.names[0]} as seeded "
                f"here ({self.seeds[1]} and {self.seeds[0]} training seeds, each evaluated), on "
                f"these {self.tasks} tasks, which every seed file holds: its error counts the "
                "seeds and the episodes, not the draw of the tasks (the by-task errors below "
                "are that part). It is not a claim about any one checkpoint's quality in "
                "deployment: for that, compare two checkpoints (heldout compare A B).")

    def rule(self) -> str:
        return (f'"better" or "worse" only when {TEST_NAME} on the seed scores rejects at '
                f"{alpha_text(ALPHA)} and its {CONFIDENCE:.0%} interval excludes 0; otherwise "
                f'"{NO_DIFFERENCE}". At least {MIN_SEEDS} seeds per arm.')

    def detail_lines(self) -> list[str]:
        """The variance in parts per arm, the standard errors beside the verdict's, sizing."""
        found = self.comparison
        lines = []
        for name, arm, parts in zip(self.names, (found.base, found.candidate), found.variance,
                                    strict=True):
            lines.append(
                f"Recipe {name}: seeds {', '.join(map(percent, arm.scores))}; sd between "
                f"seeds {_sd_points(parts.between_seeds)} points = evaluation "
                f"{_sd_points(parts.evaluation)} (+) training {_sd_points(parts.training)} "
                "(variances add; training = max(0, between − evaluation), a moment estimate)")
        correlation = ("unknown" if found.task_correlation is None
                       else f"{found.task_correlation:.2f}")
        lines.append(
            f"Standard errors: over seeds (Welch, unpaired; the verdict's, it counts training "
            f"noise) {100 * found.se:.1f} points; by task, paired {100 * found.paired_se:.1f}, "
            f"unpaired {100 * found.unpaired_task_se:.1f}, per-task correlation {correlation} "
            "(the draw of tasks, the seeds held fixed: these decide nothing)")
        sizing = found.sizing
        needed = ("not computable (no spread or no effect)" if sizing.seeds_per_arm is None
                  else f"{sizing.seeds_per_arm:,} seeds per arm")
        lines.append(f"Sizing: {needed} find a difference of {100 * sizing.effect:.1f} points "
                     f"({sizing.basis}) in {POWER:.0%} of comparisons at the seeds' spread seen")
        return lines

    def to_json(self) -> dict[str, Any]:
        found = self.comparison
        seeds = dict(zip(ROLES, self.seeds, strict=True))
        return {
            "kind": "recipe comparison",
            "headline": {
                "unit": "seed", "seeds": seeds, "names": dict(zip(ROLES, self.names, strict=True)),
                "line": self.verdict_line(), "verdict": found.verdict,
                "pass_at_1": dict(zip(ROLES, self.means, strict=True)),
                "difference": found.difference, "low": found.low, "high": found.high,
                "p_value": _finite(found.p_value), "df": _finite(found.df), "se": found.se,
                "test": TEST_NAME, "confidence": CONFIDENCE, "alpha": ALPHA,
                "claim": self.claim(), "rule": self.rule()},
            "files": dict(zip(ROLES, map(list, self.files), strict=True)),
            "tasks": self.tasks,
            "seed_scores": {"base": found.base.scores.tolist(),
                            "candidate": found.candidate.scores.tolist()},
            "variance": dict(zip(ROLES, map(_variance_json, found.variance), strict=True)),
            "paired_se": found.paired_se, "unpaired_se": found.se,
            "unpaired_task_se": found.unpaired_task_se,
            "task_correlation": found.task_correlation,
            "sizing": {"effect": found.sizing.effect, "basis": found.sizing.basis,
                       "seeds_per_arm": found.sizing.seeds_per_arm, "power": POWER,
                       "alpha": ALPHA},
        }

    def markdown(self) -> str:
        rows = [f"| {role} | {name} | {file} | {percent(score)} |"
                for role, name, files, arm in zip(
                    ROLES, self.names, self.files,
                    (self.comparison.base, self.comparison.candidate), strict=True)
                for file, score in zip(files, arm.scores, strict=True)]
        return "\n\n".join([
            "# Recipe comparison (unit: the training seed)", f"**{self.verdict_line()}**",
            self.claim(), "Rule: " + self.rule(), *self.detail_lines(),
            "\n".join(["| arm | recipe | seed | pass@1 |", "|---|---|---|---|", *rows]),
        ]) + "\n"


def recipe_note(report: RecipeReport) -> str:
    """The line the checkpoint report carries when the access also evaluated recipes."""
    return (f"The recipes were evaluated in this access too (params.recipes, unit: the training "
            f"seed): {report.verdict_line()}. Read reports/recipe/report.md: that, not the "
            "verdict above, is the claim about the recipes.")


def recipe_metrics(report: RecipeReport) -> dict[str, float]:
    """The recipe verdict's numbers for MLflow (`recipe.*`), those that are finite."""
    found = report.comparison
    values = {"difference": found.difference, "low": found.low, "high": found.high,
              "p_value": found.p_value, "se": found.se, "paired_se": found.paired_se,
              "seeds_base": report.seeds[0], "seeds_candidate": report.seeds[1],
              "pass_at_1_base": report.means[0], "pass_at_1_candidate": report.means[1],
              "seeds_per_arm_needed": found.sizing.seeds_per_arm or math.nan}
    return {f"recipe.{name}": float(value) for name, value in values.items()
            if not math.isnan(float(value))}


def _variance_json(parts: Decomposition) -> dict[str, float | None]:
    return {"between_seeds": parts.between_seeds, "evaluation": parts.evaluation,
            "training": parts.training}


def write_recipe_report(report: RecipeReport, out: Path) -> list[Path]:
    """report.json and report.md in `out`, both or neither."""
    with staged_outputs() as outputs:
        outputs.write_json(out / "report.json", report.to_json())
        outputs.write_bytes(out / "report.md", report.markdown().encode())
        return [out / "report.json", out / "report.md"]
