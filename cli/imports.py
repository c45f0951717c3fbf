"""`heldout import`, and the imported half of `score` and `compare`: results another harness
wrote (heldout.sources: inspect_ai, lm-eval, evalplus, SWE-bench, verifiers), each read into a
rollout table `<stem>.parquet` with its card `<stem>.source.json` (what scored it, the file's
digest, the tool's own figures), which `compare`, the report and MLflow read like any rollout
file.

Registered by cli/main.py. Imports stay inside the functions: `heldout --help` must not pay
for pandas or mlflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from cli.scoring_options import GroupKeyOption, ScoreKeyOption

stdout = Console()
SAY = {"markup": False, "highlight": False, "soft_wrap": True}
# Suffixes a stem drops, longest first: `run.eval` -> `run`, `s.jsonl.gz` -> `s`.
SUFFIXES = (".jsonl.gz", ".jsonl", ".json", ".eval")


@dataclass(frozen=True)
class ImportedFile:
    path: Path
    kind: str
    rollouts: Path
    card: dict[str, Any]
    imported: Any  # heldout.sources.record.Imported


def foreign_kind(path: Path) -> str | None:
    """The harness that wrote `path`, when it is another's; None for heldout's own files
    (rollouts, samples) and for a path that is not there (its reader says so)."""
    from heldout.sources import FOREIGN
    from heldout.sources.sniff import source_kind

    if not path.exists():
        return None
    kind = source_kind(path)
    return kind if kind in FOREIGN else None


def stem(path: Path) -> str:
    name = path.name
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def import_file(path: Path, kind: str, rollouts: Path, score_key: str | None,
                group_key: str | None) -> ImportedFile:
    """Read `path` and write its rollout table to `rollouts` and its card beside it."""
    from heldout.files import staged_outputs
    from heldout.sources import read_source

    imported = read_source(path, kind, score_key, group_key)
    card = {"file": str(path), "kind": kind, **imported.source.card(),
            "samples": len(imported.outcomes), "tasks": len(imported.samples_per_task())}
    with staged_outputs() as outputs:
        imported.table().to_parquet(outputs.path(rollouts), index=False)
        outputs.write_json(rollouts.with_suffix(".source.json"), card)
    return ImportedFile(path, kind, rollouts, card, imported)


def describe(imported: ImportedFile) -> str:
    card = imported.card
    reported = ", ".join(f"{name} {value:.4g}" for name, value in card["reported"].items())
    return (f"{imported.path}: {card['kind']} ({card['tool']} {card['tool_version']}".rstrip()
            + f"), task {card['task']}, model {card['model']}; {card['scored_by']}"
            + (f"; the tool's own figures: {reported}" if reported else ""))


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

    stems = [stem(path) for path in files]
    clash = sorted({name for name in stems if stems.count(name) > 1})
    if clash:
        raise HeldoutError(f"two files would both write {out / (clash[0] + '.parquet')}: "
                           "import them into different folders (--out)")
    for path, name in zip(files, stems, strict=True):
        kind = foreign_kind(path)
        if kind is None:
            raise HeldoutError(f"{path}: not another harness's results (a rollout or samples "
                               "file is heldout's own: heldout score reads it)")
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
    passed = float(done.imported.table()["passed"].mean())
    return log_run(f"import {card['model']}", {"command": "import", "tool": card["tool"]},
                   params, {"pass_rate": passed, **{f"reported_{name}": value for name, value
                                                    in card["reported"].items()}},
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
    from cli.samples import compare_inputs
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


def scored_by_line(summary: dict[str, Any]) -> str:
    """`heldout score`'s line on what scored an imported file, and how far heldout agrees."""
    card = summary["source"]
    line = f"{card['kind']}: {card['scored_by']}"
    claimed = summary.get("file_passed")
    if claimed:  # judged again here
        line = (f"{card['kind']}: scored by {card['tool']}'s {card['scorer']} scorer and judged "
                f"again by heldout: they disagree on {claimed['disagree']} of "
                f"{claimed['rows']} samples, in {len(claimed['tasks'])} task(s)"
                + (f" ({', '.join(claimed['tasks'][:5])}"
                   f"{', ...' if len(claimed['tasks']) > 5 else ''})" if claimed['tasks'] else ""))
    reported = ", ".join(f"{name} {value:.4g}" for name, value in card["reported"].items())
    return line + (f"; the tool's own figures: {reported}" if reported else "")


def score_source(path: Path, kind: str, target: Path, scoring: Any,
                 ks: list[int] | None) -> tuple[Any, list | None]:
    """Another harness's file under `heldout score`: (its Scored summary, None) as the tool
    scored it; or, when --tasks holds every task and the file holds what was answered, (its
    card, the samples to judge again), each sample carrying the tool's verdict as its claim."""
    from cli.samples import Scored, summarize
    from heldout.episodes.samples import SampleRow
    from heldout.files import write_json_atomic
    from heldout.report.inputs import read_rollouts

    done = import_file(path, kind, target.with_name(f"{stem(path)}.imported.parquet"),
                       scoring.score_key, scoring.group_key)
    outcomes = done.imported.outcomes
    if scoring.tasks and outcomes and all(o.task_id in scoring.by_id and o.completion
                                          for o in outcomes):
        return done.card, [SampleRow(0, o.task_id, o.sample, o.completion, o.passed)
                           for o in outcomes]
    table = read_rollouts(done.rollouts)
    summary = summarize(table, path, scoring, ks) | {
        "kind": kind, "scoring": None, "rollouts": str(done.rollouts), "source": done.card}
    write_json_atomic(target, summary)
    return Scored(path, done.rollouts, target, summary), None
