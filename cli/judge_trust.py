"""`heldout judge-trust LABELS.jsonl --judged FILE`: the judge measured against hand labels
(heldout.statistics.judge_trust), written as TRUST.json; and what `heldout compare` takes from
it: the gates that void a verdict the judge scored.

Registered by cli/main.py. Imports stay inside the functions: `heldout --help` must not pay
for pandas or the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from cli.scoring_options import (
    MemoryOption,
    SandboxOption,
    TasksOption,
    TimeoutOption,
    WorkersOption,
)

if TYPE_CHECKING:
    import pandas as pd

    from cli.imports import Arms

stdout = Console()
SAY = {"markup": False, "highlight": False, "soft_wrap": True}
LABEL_SHAPE = '{"task_id": str, "sample": int, "label": true|false}'
SHOWN = 20  # rows listed by key in TRUST.json: the disagreements and flips to look at first

JudgeTrustOption = Annotated[Path | None, typer.Option(
    "--judge-trust", dir_okay=False, help="TRUST.json from `heldout judge-trust`: a verdict "
    "scored by a judge below its agreement threshold is not decidable.")]


def read_labels(path: Path) -> dict[tuple[str, int], bool]:
    """(task_id, sample) → the person's pass or fail, every bad line named at once."""
    from heldout.errors import InputFileError, Problem

    labels: dict[tuple[str, int], bool] = {}
    problems: list[Problem] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            problems.append(Problem(number, None, f"not JSON ({error})"))
            continue
        shaped = isinstance(record, dict) and isinstance(record.get("task_id"), str) and \
            type(record.get("sample")) is int and record["sample"] >= 0 and \
            type(record.get("label")) is bool
        key = (record["task_id"], record["sample"]) if shaped else None
        if not shaped:
            problems.append(Problem(number, None, f"a label line is {LABEL_SHAPE}"))
        elif key in labels:
            problems.append(Problem(number, None, f"{key[0]} sample {key[1]} labeled twice"))
        else:
            labels[key] = record["label"]
    if problems:
        raise InputFileError(path, problems)
    return labels


def labeled_rows(labels: dict[tuple[str, int], bool], table: pd.DataFrame,
                 judged: Path) -> pd.DataFrame:
    """The judged rows the labels name, in the labels' order, with the label as `label`."""
    from heldout.errors import HeldoutError

    rows = table.set_index(["task_id", "sample"])
    missing = [key for key in labels if key not in rows.index]
    if missing:
        raise HeldoutError(f"{len(missing)} labeled row(s) not in {judged} (first: " + ", ".join(
            f"{task} sample {sample}" for task, sample in missing[:5]) + ")")
    return rows.loc[list(labels)].assign(label=list(labels.values())).reset_index()


def rejudge(rows: pd.DataFrame, scoring: Any) -> list[bool]:
    """The labeled rows' completions judged once more, through the path `heldout score` uses."""
    from cli.samples import observed
    from heldout.episodes import samples as judged
    from heldout.errors import HeldoutError

    if "completion" not in rows or not rows["completion"].astype(bool).all():
        raise HeldoutError("judging again needs each labeled row's completion, and this file "
                           "holds none for some (a test split's outcome file): --no-rejudge")
    samples = [judged.SampleRow(0, task, int(sample), completion, None) for task, sample,
               completion in zip(rows["task_id"], rows["sample"], rows["completion"], strict=True)]
    with scoring.setup.sandbox.open() as sandbox:
        again = observed("judge again", len(samples), lambda tell: judged.score_samples(
            samples, scoring.by_id, sandbox, scoring.setup, scoring.fingerprint, tell))
    return [bool(row["passed"]) for row in again]


def judge_trust(
    labels: Annotated[Path, typer.Argument(
        metavar="LABELS.jsonl", dir_okay=False,
        help=f"Hand labels, one {LABEL_SHAPE} a line, at least 60.")],
    judged: Annotated[Path, typer.Option(
        dir_okay=False, help="What the judge said: a rollout file (.parquet) or a samples file "
                             "(.jsonl, judged first as `heldout score` does; needs --tasks).")],
    out: Annotated[Path, typer.Option(
        dir_okay=False, help="TRUST.json to write (samples judged go beside it).")],
    threshold: Annotated[float, typer.Option(
        help="The agreement below which the judge's verdicts are void.")] = 0.8,
    again: Annotated[bool, typer.Option(
        "--rejudge/--no-rejudge", help="Judge the labeled rows again and count the flips "
                                       "(needs --tasks and the rows' completions).")] = True,
    tasks: TasksOption = None,
    sandbox: SandboxOption = "subprocess",
    timeout_s: TimeoutOption = None,
    memory_mb: MemoryOption = None,
    workers: WorkersOption = None,
) -> None:
    """How far the judge agrees with people on a labeled slice: agreement with its interval,
    on the rows people passed and on those they failed, Cohen's kappa, and the flips of
    judging the rows again. `heldout compare --judge-trust TRUST.json` voids the verdict of a
    judge below the threshold."""
    from cli.samples import score_files, scoring
    from heldout.errors import HeldoutError
    from heldout.files import write_json_atomic
    from heldout.report.inputs import read_rollouts
    from heldout.statistics.judge_trust import SCHEMA as TRUST_SCHEMA
    from heldout.statistics.judge_trust import judge_agreement

    setup = scoring(tasks, sandbox, timeout_s, memory_mb, workers, canaries=False)
    given = read_labels(labels)
    rollouts = score_files([judged], [out.parent], setup)[0].rollouts
    rows = labeled_rows(given, read_rollouts(rollouts, ("error", "completion")), judged)
    rejudged = rejudge(rows, setup) if again and tasks else None
    try:
        trust = judge_agreement(rows["passed"].tolist(), rows["label"].tolist(),
                                threshold=threshold, rejudged=rejudged)
    except ValueError as error:
        raise HeldoutError(f"{labels}: {error}") from None
    keys = list(zip(rows["task_id"], rows["sample"].astype(int), strict=True))
    record = {"schema": TRUST_SCHEMA, "labels": str(labels), "judged": str(judged),
              "harness": sorted(set(rows["harness"].astype(str))), **trust.to_json(),
              "disagree": differing(keys, rows["passed"], rows["label"]),
              "flipped": None if rejudged is None else differing(keys, rows["passed"], rejudged)}
    write_json_atomic(out, record)
    print_trust(trust)
    stdout.print(f"wrote {out}", **SAY)


def differing(keys: list[tuple[str, int]], first: Any, second: Any) -> list[list[Any]]:
    """The first SHOWN rows, as [task_id, sample], where the two verdicts differ."""
    return [[task, sample] for (task, sample), one, other in zip(keys, first, second, strict=True)
            if one != other][:SHOWN]


def print_trust(trust: Any) -> None:
    from heldout.report.formatting import interval_percent, percent

    def share(part: Any) -> str:
        interval = part.interval
        return "none labeled" if interval is None else (
            f"{part.agree} of {part.rows}, {percent(interval.estimate)} "
            f"{interval_percent(interval.low, interval.high)}")

    stdout.print(f"agreement with hand labels: {share(trust.agreement)} (95% Wilson interval)",
                 **SAY)
    stdout.print(f"  labeled pass, judge passed: {share(trust.labeled_pass)}; labeled fail, "
                 f"judge failed: {share(trust.labeled_fail)}; Cohen's kappa "
                 + ("not defined" if trust.kappa is None else f"{trust.kappa:.2f}"), **SAY)
    if trust.rejudged is not None:
        stdout.print(f"  judged again: {trust.flips} of {trust.rejudged} verdicts flipped", **SAY)
    gate = trust.gate()
    stdout.print(f"judge trusted (at least {percent(trust.threshold)})" if gate is None
                 else f"judge UNTRUSTED: {gate.message}", **SAY)


def read_trust(path: Path) -> tuple[dict[str, Any], Any]:
    """TRUST.json as written, and the JudgeTrust it holds (its shares' intervals recomputed)."""
    from heldout.errors import HeldoutError
    from heldout.statistics.judge_trust import trust_from_record

    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise HeldoutError(f"{path}: not a TRUST.json `heldout judge-trust` wrote") from None
    return record, trust_from_record(record, str(path))


def judge_inputs(trust_file: Path | None, arms: Arms) -> dict[str, Any]:
    """build_report's `judge` (the gates: an untrusted judge, one grader reason in either arm)
    and `protocol` (the arms' own, with the judge-trust record as its `judge_trust` section).
    `arms`: compare's (cli.imports.compare_arms); their files are read again for the judge's
    messages, which the report leaves unread."""
    from heldout.report.inputs import read_rollouts
    from heldout.statistics.judge_trust import failing_reasons, grader_reason_gate

    gates, protocol = [], arms.protocol
    if trust_file is not None:
        record, trust = read_trust(trust_file)
        gates.append(trust.gate())
        protocol = {**(protocol or {}), "judge_trust": {"file": str(trust_file), **record}}
    for path in arms.paths:
        table = read_rollouts(path, read_too=("error",))
        gates.append(grader_reason_gate(path.name, failing_reasons(table)))
    return {"judge": tuple(gate for gate in gates if gate is not None), "protocol": protocol}
