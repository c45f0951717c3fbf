"""lm-evaluation-harness `--log_samples` files (`samples_<task>_<date>.jsonl`), read line by
line: no library reads them.

A line is one document under one filter: `doc_id`, the document (`doc`), the metrics it was
scored on (`metrics`, each a field of the line), `filter`, `resps` (with `repeats`, one list of
that many responses) and the digests `doc_hash`, `prompt_hash`, `target_hash`, which two files
must share task by task. The score is one metric under one filter: `--score-key acc`, or
`acc,none` in lm-eval's own notation (the only one there is by default). lm-eval scores a
document once, on the filtered response (`take_first` keeps the first of the repeats), so each
document is one sample; a metric that is not pass/fail for a document (pass@1 averaged over
repeats, a BLEU score) is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from heldout.bounded import read_document
from heldout.canonical import canonical_json, sha256_hex
from heldout.errors import HeldoutError, InputFileError, Problem
from heldout.sources.lines import records as read_records
from heldout.sources.record import Imported, Outcome, Source
from heldout.sources.values import as_pass, describe

HASHES = ("doc_hash", "prompt_hash", "target_hash")
# lm-eval names its files samples_<task>_<ISO time>.jsonl; the task is said nowhere else.
FILE_NAME = re.compile(r"^samples_(?P<task>.+)_(?P<time>\d{4}-\d{2}-\d{2}T[\d.-]+)\.jsonl$")


def is_lm_eval_line(record: dict) -> bool:
    return "doc_id" in record and "metrics" in record and "filter" in record


def _key(records: list[tuple[int, dict]], wanted: str | None, path: Path) -> tuple[str, str]:
    available = sorted({f"{metric},{record['filter']}" for _, record in records
                        for metric in record["metrics"]})
    if wanted is None:
        if len(available) == 1:
            return tuple(available[0].split(",", 1))
        raise HeldoutError(f"{path}: the file holds the scores {', '.join(available)}: "
                           "choose one with --score-key METRIC[,FILTER]")
    metric, _, filter_name = wanted.partition(",")
    matching = [key for key in available if key.split(",", 1)[0] == metric
                and (not filter_name or key.split(",", 1)[1] == filter_name)]
    if len(matching) != 1:
        reason = "is not a score of this file" if not matching else "names several filters"
        raise HeldoutError(f"{path}: --score-key {wanted!r} {reason}; it holds "
                           f"{', '.join(available)}")
    return tuple(matching[0].split(",", 1))


def _group(record: dict, group_key: str | None, where: str) -> str | None:
    if group_key is None:
        return None
    doc = record.get("doc")
    if not isinstance(doc, dict) or group_key not in doc:
        fields = ", ".join(doc) if isinstance(doc, dict) else "no doc"
        raise HeldoutError(f"{where}: the doc has no field {group_key!r} for --group-key; it "
                           f"has {fields}")
    return str(doc[group_key])


def read_lm_eval_samples(path: Path, score_key: str | None, group_key: str | None) -> Imported:
    records = read_records(path, "an lm-eval samples file", is_lm_eval_line,
                           "an lm-eval sample (doc_id, metrics, filter and their values)")
    metric, filter_name = _key(records, score_key, path)
    outcomes, problems, seen = [], [], {}
    for number, record in records:
        if record["filter"] != filter_name:
            continue
        task_id = str(record["doc_id"])
        if task_id in seen:
            problems.append(Problem(number, "doc_id", (
                f"{task_id} under filter {filter_name} repeated (first on line "
                f"{seen[task_id]})")))
            continue
        seen[task_id] = number
        passed = as_pass(record.get(metric))
        if passed is None:
            repeats = len(record["resps"][0]) if record.get("resps") else 1
            problems.append(Problem(number, metric, (
                f"{describe(record.get(metric))} for doc {task_id}, not pass/fail"
                + (f" (one number over its {repeats} repeats)" if repeats > 1 else "")
                + ": heldout counts passes per sample; choose a 0/1 metric with --score-key")))
            continue
        outcomes.append(Outcome(
            task_id=task_id, sample=0, passed=passed,
            completion=str((record.get("filtered_resps") or [""])[0]),
            content=sha256_hex(canonical_json({key: record.get(key) for key in HASHES})),
            group=_group(record, group_key, f"{path}:{number}")))
    if problems:
        raise InputFileError(path, problems)
    named = FILE_NAME.match(path.name)
    task = named["task"] if named else "(unnamed: not a samples_<task>_<date>.jsonl file)"
    run = _run_results(path.parent / f"results_{named['time']}.json") if named else {}
    return Imported(Source(
        tool="lm-evaluation-harness", form="a --log_samples file", task=task,
        scorer=f"{metric} (filter {filter_name})",
        model=str(run.get("model_name") or "lm-eval"),
        tool_version=str(run.get("lm_eval_version") or ""),
        reported=_reported(run, task, metric, filter_name)), outcomes)


def _run_results(path: Path) -> dict:
    """The run's results file beside the samples (the model's name and lm-eval's own
    figures), or nothing when it is not there or not lm-eval's."""
    try:
        results = read_document(path, "an lm-eval results file")
    except InputFileError:
        return {}
    return results if isinstance(results, dict) else {}


def _reported(run: dict, task: str, metric: str, filter_name: str) -> dict[str, float]:
    figures = (run.get("results") or {}).get(task) or {}
    value = figures.get(f"{metric},{filter_name}") if isinstance(figures, dict) else None
    return {metric: float(value)} if isinstance(value, int | float) else {}
