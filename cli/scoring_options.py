"""The options of `heldout score` and `heldout compare` (cli/samples.py, cli/main.py),
each checked as the command line is read: a value no program could be judged under is one line
naming the option, exit 2 (cli/usage.py), never a traceback from deep in the sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

MAX_TIMEOUT_S = 3600.0  # one program's time limit, at most an hour
MAX_MEMORY_MB = 2**20  # one program's memory, at most 1 TiB
MAX_WORKERS = 1024
MAX_K = 10**6  # the largest k of pass@k and pass^k

TasksOption = Annotated[str | None, typer.Option(
    "--tasks", help="The tasks the samples answer: 'humaneval' or a JSONL task file "
                    "(needed for samples files).")]
GroupsOption = Annotated[Path | None, typer.Option(
    "--groups", help="A JSON Lines file of {\"task_id\", \"group\"}: tasks of one group "
                     "(repository, family, template) count as one unit. Groups also come from "
                     "--tasks and from a 'group' column of a rollout file.")]
RerunAOption = Annotated[list[Path] | None, typer.Option(
    "--rerun-a", help="Another run of A on the same tasks under new seeds (repeat, with as "
                      "many --rerun-b, run r of B under the seeds of run r of A): the arms are "
                      "compared over every run pooled, and the runs' spread is carried in the "
                      "test.")]
RerunBOption = Annotated[list[Path] | None, typer.Option(
    "--rerun-b", help="Another run of B, paired with the --rerun-a of the same place.")]
ReferenceAOption = Annotated[Path | None, typer.Option(
    "--reference-a", help="A reference checkpoint's rollouts run beside A (turn about, or at "
                          "the same time): with --reference-b, the drift control of arms that "
                          "ran at different times; a claim must clear the reference's own "
                          "movement between them.")]
ReferenceBOption = Annotated[Path | None, typer.Option(
    "--reference-b", help="The same reference checkpoint's rollouts run beside B.")]


def _effect(value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise typer.BadParameter(f"an effect is a difference of pass rates in (0, 1] "
                                 f"(0.05 is 5 points; a loss needs as many tasks as a gain of "
                                 f"its size), got {value}")
    return value


TargetEffectOption = Annotated[float | None, typer.Option(
    "--target-effect", callback=_effect,
    help="A difference of pass@1 (0.05: 5 points): the report says how many tasks or groups "
         "the verdict would need to find it with 80% power, at the measured spread and drift.")]
SelectorOption = Annotated[str, typer.Option(
    "--selector", help="A true/false column of both files' rows that best-of-k submits by: the "
                       "first of k episodes it accepts (default: the public tests' verdict).")]
SandboxOption = Annotated[str, typer.Option(
    "--sandbox", help="Sandbox backend that judges the samples: subprocess or docker.")]


def seconds(value: float | None) -> float | None:
    """`--timeout-s`: a finite number of seconds, more than 0 and at most MAX_TIMEOUT_S."""
    if value is not None and not 0 < value <= MAX_TIMEOUT_S:  # NaN fails both comparisons
        raise typer.BadParameter(f"{value:g} is not a number of seconds in (0, "
                                 f"{MAX_TIMEOUT_S:g}]")
    return value


TimeoutOption = Annotated[float | None, typer.Option(
    "--timeout-s", callback=seconds,
    help=f"Seconds per program, more than 0 and at most {MAX_TIMEOUT_S:g} (default: the "
         "harness default, 10).")]
MemoryOption = Annotated[int | None, typer.Option(
    "--memory-mb", min=64, max=MAX_MEMORY_MB,
    help="Memory per program, 64 MB or more (default: the harness default, 512).")]
WorkersOption = Annotated[int | None, typer.Option(
    "--workers", min=1, max=MAX_WORKERS,
    help="Programs judged at once (default: the harness default, 2); not part of the "
         "fingerprint.")]
MlflowOption = Annotated[bool, typer.Option(
    "--mlflow", help="Log an MLflow run (params, metrics, summaries and files as artifacts).")]
CompareMlflowOption = Annotated[bool | None, typer.Option(
    "--mlflow/--no-mlflow", help="Log an MLflow run (the report's metrics, the inputs' digests, "
                                 "the report as artifacts); by default when an input is another "
                                 "harness's results.")]
CanariesOption = Annotated[bool, typer.Option(
    "--canaries/--no-canaries", help="Check the sandbox first: the references must pass the "
                                     "tasks used, a do-nothing answer none (a warning if not).")]



def parse_ks(text: str | None) -> list[int] | None:
    """`--ks`: whole numbers from 1 to MAX_K, comma-separated."""
    if not text:
        return None
    shown = repr(text) if len(text) <= 60 else repr(text[:57]) + "..."
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(part.isdecimal() and part.isascii() and len(part) <= 7 for part in parts):
        raise typer.BadParameter(f"{shown}: expected whole numbers from 1 to {MAX_K}, e.g. "
                                 "1,10,100")
    ks = sorted({int(part) for part in parts})
    if not ks or not 1 <= ks[0] <= ks[-1] <= MAX_K:
        raise typer.BadParameter(f"{shown}: each k must be from 1 to {MAX_K}")
    return ks
ScoreKeyOption = Annotated[str | None, typer.Option(
    "--score-key", help="Which of another harness's scores is pass/fail: an inspect_ai scorer "
                        "(match) or a key of its dict value (graded.correct), an lm-eval metric "
                        "(acc, or acc,none with its filter), evalplus's base or plus (the "
                        "default), a verifiers metric (default: reward). Default: the only one.")]
GroupKeyOption = Annotated[str | None, typer.Option(
    "--group-key", help="Group tasks by a field of another harness's file: an inspect_ai "
                        "sample's metadata, an lm-eval doc, a verifiers task's data, or repo "
                        "for SWE-bench (the instance id before its number).")]


SampleOption = Annotated[int, typer.Option(
    help="Sample index of the episode the exact McNemar test uses.")]
AllowMismatchOption = Annotated[bool, typer.Option(
    "--allow-harness-mismatch",
    help="Compare rollouts made under different harnesses; the headline says so.")]
BaseNameOption = Annotated[str | None, typer.Option(
    help="A's label (default: its checkpoint column).")]
CandidateNameOption = Annotated[str | None, typer.Option(
    help="B's label (default: its checkpoint column).")]


def _cutoff(value: str | None) -> str | None:
    from heldout.tasks.record import iso_date_problem

    problem = None if value is None else iso_date_problem(value)
    if problem:
        raise typer.BadParameter(f"a data cutoff {problem}")
    return value


CutoffAOption = Annotated[str | None, typer.Option(
    "--cutoff-a", callback=_cutoff,
    help="A's training-data cutoff (YYYY-MM-DD): the report splits the tasks by their "
         "`released` date (from --tasks) at the later of the arms' cutoffs.")]
CutoffBOption = Annotated[str | None, typer.Option(
    "--cutoff-b", callback=_cutoff, help="B's training-data cutoff (YYYY-MM-DD).")]
