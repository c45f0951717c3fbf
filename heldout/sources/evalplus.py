"""evalplus's results (`<samples>_eval_results.json`), read as a JSON document: no library
offers a reader.

`eval` maps each task id to its samples, in the samples file's order (sample k is the k-th),
each with the `solution` judged, `base_status` (the original tests) and `plus_status` (the
added tests): "pass", "fail" or "timeout". Two scorers: `--score-key base` (the base tests)
and `plus` (the default, evalplus's own headline: base and plus tests both pass). `hash` names
the dataset version the samples were judged against; two files must share it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heldout.bounded import read_document
from heldout.errors import HeldoutError
from heldout.sources.record import Imported, Outcome, Source

PASS, TIMEOUT = "pass", "timeout"
SCORERS = {"base": "base tests", "plus": "base and plus tests"}


def is_evalplus_results(document: Any) -> bool:
    if not (isinstance(document, dict) and isinstance(document.get("eval"), dict)):
        return False
    first = next(iter(document["eval"].values()), None)
    return isinstance(first, list) and bool(first) and isinstance(first[0], dict) and (
        "base_status" in first[0])


def _status(sample: dict, key: str) -> tuple[bool, str]:
    statuses = [sample.get("base_status")] + ([sample.get("plus_status")] if key == "plus"
                                              else [])
    if TIMEOUT in statuses:
        return False, "timeout"
    return all(status == PASS for status in statuses), "ok"


def read_evalplus_results(path: Path, score_key: str | None,
                          group_key: str | None) -> Imported:
    key = score_key or "plus"
    if key not in SCORERS:
        raise HeldoutError(f"{path}: --score-key {key!r}: an evalplus file has the scores "
                           f"{', '.join(SCORERS)}")
    if group_key is not None:
        raise HeldoutError(f"{path}: --group-key {group_key!r}: an evalplus file holds nothing "
                           "per task but its id; give the groups with --groups FILE")
    document = read_document(path, "an evalplus results file")
    if not is_evalplus_results(document):
        raise HeldoutError(f"{path}: not evalplus's results (an `eval` object of task ids, "
                           "each a list of samples with base_status)")
    outcomes = []
    for task_id, samples in sorted(document["eval"].items()):
        for index, sample in enumerate(samples):
            if not isinstance(sample, dict):
                raise HeldoutError(f"{path}: eval.{task_id}[{index}] is not an object")
            if key == "plus" and sample.get("plus_status") is None:
                raise HeldoutError(f"{path}: eval.{task_id}[{index}] has no plus_status (the "
                                   "file was judged on the base tests only): --score-key base")
            passed, status = _status(sample, key)
            outcomes.append(Outcome(task_id=str(task_id), sample=index, passed=passed,
                                    status=status, completion=str(sample.get("solution", "")),
                                    content=str(document.get("hash", ""))))
    first = outcomes[0].task_id if outcomes else ""
    dataset = "MBPP+" if first.startswith("Mbpp/") else "HumanEval+"
    # Nothing in the file names the model; evalplus names it after the samples file.
    model = path.name.removesuffix(".json").removesuffix("_eval_results") or "evalplus"
    return Imported(Source(tool="evalplus", form="an eval_results.json", task=dataset,
                           scorer=f"{key} ({SCORERS[key]})", model=model), outcomes)
