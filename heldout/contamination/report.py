"""The decontamination report: every match with its evidence, counts per method and split, and
what the policy does with the eval items a training corpus leaked."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import asdict
from typing import Any

from heldout.contamination.config import DecontaminateConfig, Policy
from heldout.contamination.fingerprints import PROGRAM, program_text
from heldout.contamination.index import METHODS, Match, snippet
from heldout.contamination.scan import SourceScan
from heldout.contamination.sources import TRAIN_SPLIT_SOURCE
from heldout.errors import HeldoutError
from heldout.tasks.record import Task


class ContaminationError(HeldoutError):
    """Policy `fail` and a training corpus holds copies of evaluation items."""


def eval_items_matched(scans: list[SourceScan]) -> dict[str, list[str]]:
    """Eval item ids, per split, that some training *corpus* overlaps. Train-split matches are
    not among them: those training items are removed, so they no longer reach training."""
    matched: dict[str, set[str]] = {"val": set(), "test": set()}
    for scan in scans:
        if scan.source != TRAIN_SPLIT_SOURCE:
            for match in scan.matches:
                matched.setdefault(match.eval_split, set()).add(match.eval_id)
    return {split: sorted(ids) for split, ids in matched.items()}


def build_report(
    config: DecontaminateConfig,
    scans: list[SourceScan],
    fingerprint_digests: dict[str, str],
    val_tasks: dict[str, Task],
) -> dict[str, Any]:
    """The report: every match with its evidence, counts per method and split, the eval items
    a corpus leaked and what the policy does with them. Snippets show the val side only: a
    training text that matches a test item *is* test text, and the report is read widely."""
    matches = sorted((m for scan in scans for m in scan.matches),
                     key=lambda m: (m.eval_split, m.eval_id, m.method, m.source, m.training_id))
    counts = {method: Counter() for method in METHODS}
    for match in matches:
        counts[match.method][match.eval_split] += 1
    flagged = eval_items_matched(scans)
    return {
        "policy": config.policy,
        "config": config.model_dump(exclude={"training_corpora", "workers"}),
        "fingerprints": fingerprint_digests,
        "sources": [
            {"source": s.source, "items": s.items, "matched": len(s.matched_ids),
             "code_unparsable": s.code_unparsable}
            for s in scans
        ],
        "counts": {method: {split: counts[method][split] for split in ("val", "test")}
                   for method in METHODS},
        "flagged_eval_ids": flagged,
        "excluded_eval_ids": excluded_eval_ids(config.policy, flagged),
        "removed_train_ids": sorted(next((s.matched_ids for s in scans
                                          if s.source == TRAIN_SPLIT_SOURCE), set())),
        "matches": [_match_record(m, val_tasks) for m in matches],
    }


def excluded_eval_ids(policy: Policy, flagged: dict[str, list[str]]) -> dict[str, list[str]]:
    return flagged if policy == "drop" else {split: [] for split in flagged}


def _match_record(match: Match, val_tasks: dict[str, Task]) -> dict[str, Any]:
    record = asdict(match)
    if match.eval_split == "val" and match.eval_id in val_tasks:
        task = val_tasks[match.eval_id]
        text = {PROGRAM: program_text(task), "group": task.group}.get(
            match.eval_field, getattr(task, match.eval_field, None) or "")
        record["eval_snippet"] = snippet(text)
    else:
        record["training_snippet"] = record["eval_snippet"] = None
    return record


def report_table(report: dict[str, Any]) -> str:
    """The report as the stage's log shows it: what was read, counts per method and split, one
    line per match, and what the policy does."""
    sources = ", ".join(f"{s['source']} {s['items']}" for s in report["sources"])
    unparsable = sum(s["code_unparsable"] for s in report["sources"])
    lines = [f"training items: {sources}; {unparsable} hold code that does not parse "
             "(compared as text only)", "", f"{'method':<12}{'val':>5}{'test':>6}"]
    counts = report["counts"]
    lines += [f"{m:<12}{counts[m]['val']:>5}{counts[m]['test']:>6}" for m in METHODS]
    lines += ["", f"{'eval item':<22}{'method':<12}{'score':>5}  {'eval field':<12}training item"]
    lines += [f"{m['eval_split'] + '/' + m['eval_id']:<22}{m['method']:<12}{m['score']:>5.2f}  "
              f"{m['eval_field']:<12}{m['source']}:{m['training_id']}" for m in report["matches"]]
    listed = {split: ", ".join(ids) or "none" for split, ids in report["flagged_eval_ids"].items()}
    removed = ", ".join(report["removed_train_ids"]) or "none"
    lines += ["", f"removed from the train split: {removed}",
              f"leaked by a training corpus (policy {report['policy']}): val {listed['val']}; "
              f"test {listed['test']}"]
    return "\n".join(lines)


def _corpus_matches(report: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """A report's matches with a training corpus: the leaks. A train-split match is not one
    (its training item is removed; see eval_items_matched)."""
    return (m for m in report["matches"] if m["source"] != TRAIN_SPLIT_SOURCE)


def leak_methods(report: Mapping[str, Any], split: str) -> dict[str, list[str]]:
    """Each of the report's flagged items of `split`, with the methods that found it in a
    training corpus: what the paired report marks (stages/report.py)."""
    methods: dict[str, set[str]] = {item: set() for item in report["flagged_eval_ids"][split]}
    for m in _corpus_matches(report):
        if m["eval_split"] == split and m["eval_id"] in methods:
            methods[m["eval_id"]].add(m["method"])
    return {item: sorted(found) for item, found in methods.items()}


def describe_leaks(report: dict[str, Any]) -> str:
    by_item = defaultdict(set)
    for m in _corpus_matches(report):
        by_item[f"{m['eval_split']}/{m['eval_id']}"].add(f"{m['method']} ({m['source']}:"
                                                          f"{m['training_id']})")
    lines = [f"  {item}: {', '.join(sorted(how))}" for item, how in sorted(by_item.items())]
    return ("training corpora hold copies of evaluation items (decontaminate.policy is fail):\n"
            + "\n".join(lines) + "\nRemove those training items, or set the policy to drop to "
            "score without these eval items.")
