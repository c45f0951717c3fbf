"""`heldout import`, and the arms of `heldout compare`: results another harness wrote
(heldout.sources: inspect_ai, lm-eval, evalplus, SWE-bench, verifiers) imported into rollout
tables (cli/imported_files.py), samples files scored, and the pair refused unless comparable.

Registered by cli/main.py. Imports stay inside the functions: `heldout --help` must not pay
for pandas or mlflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from cli.imported_files import ImportedFile, describe, foreign_kind, import_file, stem
from cli.scoring_options import GroupKeyOption, ScoreKeyOption

stdout = Console()
SAY = {"markup": False, "highlight": False, "soft_wrap": True}


def import_command(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="Results of another harness: an inspect_ai log (.eval, .json), "
                                "an lm-eval --log_samples file, evalplus's eval_results.json, "
                                "a SWE-bench report or run folder, verifiers' results.")],
    out: Annotated[Path, typer.Option(help="Folder for <stem>.parquet and <stem>.source.json.",
                                      file_okay=False)],
    score_key: ScoreKeyOption = None,
    group_key: GroupKeyOption = None,
    mlflow: Annotated[bool, typer.Option(
        "--mlflow/--no-mlflow", help="Log each import as an MLflow run with the file's digest "
                                     "(the default).")] = True,
) -> None:
    """Read other harnesses' results into heldout's rollout tables, to compare
    (`heldout compare A.parquet B.parquet`), report and log like heldout's own."""
    from heldout.errors import HeldoutError
    from heldout.sources.sniff import ROLLOUTS, SAMPLES, UNKNOWN, source_kind, unknown_source

    stems = [stem(path) for path in files]
    clash = sorted({name for name in stems if stems.count(name) > 1})
    if clash:
        raise HeldoutError(f"two files would both write {out / (clash[0] + '.parquet')}: "
                           "import them into different folders (--out)")
    for path, name in zip(files, stems, strict=True):
        if not path.exists():
            raise HeldoutError(f"{path}: no such file or folder")
        kind = source_kind(path)
        if kind in (ROLLOUTS, SAMPLES):
            raise HeldoutError(f"{path}: heldout's own {kind} file, not another harness's "
                               "results: heldout score and heldout compare read it as it is")
        if kind == UNKNOWN:
            raise unknown_source(path)
        done = import_file(path, kind, out / f"{name}.parquet", score_key, group_key)
        stdout.print(describe(done), **SAY)
        stdout.print(f"  {done.card['tasks']} tasks, {done.card['samples']} samples -> "
                     f"{done.rollouts}", **SAY)
        if mlflow:
            stdout.print(f"  MLflow run {log_import(done)}", **SAY)


def log_import(done: ImportedFile) -> str:
    from cli.command_runs import log_run

    card = done.card
    params = {key: card[key] for key in ("file", "kind", "tool", "tool_version", "task",
                                         "scorer", "model", "file_sha256", "tasks", "samples")}
    return log_run(f"import {card['model']}", {"command": "import", "tool": card["tool"]},
                   params, {"pass_at_1": card["pass_at_1"], **{
                       f"reported_{name}": value for name, value in card["reported"].items()}},
                   [done.rollouts, done.rollouts.with_suffix(".source.json")])


@dataclass(frozen=True)
class Arms:
    """What `heldout compare` reads: each arm's rollout file, the protocol card's section on
    where the results came from, and whether the arms were scored differently (an import
    against heldout's own rollouts: compared when the tasks match, the headline says so)."""

    paths: tuple[Path, Path]
    protocol: dict[str, Any] | None
    mixed: bool


def _origin(imported: ImportedFile | None, path: Path) -> str:
    if imported is None:
        return f"{path}: heldout's own rollouts, judged in heldout's sandbox"
    card = imported.card
    return (f"{path} ({card['kind']}, sha256 {card['file_sha256'][:12]}): task {card['task']}, "
            f"model {card['model']}, {card['scored_by']}"
            + "".join(f"; {note}" for note in card["notes"]))


def compare_arms(base: Path, candidate: Path, out: Path, setup: Any, score_key: str | None,
                 group_key: str | None) -> Arms:
    """The two arms as rollout files: another harness's results imported into `out`/imported
    (and refused unless comparable), samples files scored, rollout files as they are."""
    from heldout.report.inputs import read_rollouts
    from heldout.sources.comparable import check_comparable, same_tasks

    given = (base, candidate)
    kinds = [foreign_kind(path) for path in given]
    if not any(kinds):
        return Arms(compare_inputs(base, candidate, out, setup), None, False)
    imported: list[ImportedFile | None] = [
        None if kind is None else import_file(path, kind, out / "imported" / f"{role}.parquet",
                                              score_key, group_key)
        for path, kind, role in zip(given, kinds, ("base", "candidate"), strict=True)]
    for done in imported:
        if done is not None:
            stdout.print(describe(done), **SAY)
    paths = compare_inputs(*(path if done is None else done.rollouts
                             for path, done in zip(given, imported, strict=True)), out, setup)
    if imported[0] is not None and imported[1] is not None:
        check_comparable(imported[0].imported, imported[1].imported)
    else:
        same_tasks(tuple(read_rollouts(path)["task_id"].value_counts().to_dict()
                         for path in paths))
    protocol = {"sources": {"A": _origin(imported[0], given[0]),
                            "B": _origin(imported[1], given[1])}}
    return Arms(paths, protocol, mixed=None in imported)


def compare_inputs(base: Path, candidate: Path, out: Path, setup: Any) -> tuple[Path, Path]:
    """The rollout files to compare: samples files are scored first into `out`/scored (per
    role when their names clash), rollout files are taken as they are."""
    from cli.samples import print_summary, score_files
    from heldout.episodes.samples import file_kind, file_stem

    paths = [base, candidate]
    samples = [i for i, path in enumerate(paths) if file_kind(path) == "samples"]
    if not samples:
        return base, candidate
    clash = file_stem(base) == file_stem(candidate)
    outs = [out / "scored" / (("base", "candidate")[i] if clash else "") for i in samples]
    scored = score_files([paths[i] for i in samples], outs, setup)
    for index, result in zip(samples, scored, strict=True):
        print_summary(result)
        paths[index] = result.rollouts
    return paths[0], paths[1]


def reference_inputs(reference_a: Path | None, reference_b: Path | None, base: Any,
                     candidate: Any, labels: Any) -> tuple[Any, Any]:
    """The reference checkpoint run beside each arm, as the report reads it: how far it moved
    between the arms' times (None without one), and the tasks it showed passable."""
    from heldout.report import read_rollouts
    from heldout.report.reference import passable_by_reference, reference_movement

    if reference_a is None or reference_b is None:
        return None, None
    beside_base, beside_candidate = read_rollouts(reference_a), read_rollouts(reference_b)
    return (reference_movement(beside_base, beside_candidate, base=base, candidate=candidate,
                               groups=labels),
            passable_by_reference(beside_base, beside_candidate))


def check_selector(selector: str, tables: dict[Path, Any]) -> None:
    """A selector column the user named must be in both arms' rows (the public tests' column
    may be absent: best-of-k is then left out, and the report says so)."""
    from heldout.report.best_of_k import PUBLIC_TESTS

    missing = [str(path) for path, table in tables.items() if selector not in table.columns]
    if selector != PUBLIC_TESTS and missing:
        raise typer.BadParameter(f"--selector {selector}: no such column in "
                                 f"{' and '.join(missing)}")


def release_dates(setup: Any, table: Any, cutoffs: tuple[str | None, str | None]) -> Any:
    """compare's --cutoff-a/-b with the tasks' `released` dates (from --tasks), for the
    report's by_date split; None without a cutoff. A cutoff that no compared task's date can be
    split by is refused (exit 2): the split it asks for could not be drawn."""
    if not any(cutoffs):
        return None
    from heldout.report.by_date import ReleaseDates
    from heldout.report.sections import PerArm

    released = {task.id: task.released for task in setup.tasks or () if task.released}
    if not released.keys() & set(table["task_id"].astype(str)):
        raise typer.BadParameter(
            "--cutoff-a/-b split the tasks by their `released` date, and no compared task "
            "has one: give --tasks with a task file whose tasks carry `released` (YYYY-MM-DD)")
    return ReleaseDates(released, PerArm(*cutoffs))
