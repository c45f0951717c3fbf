"""Results other harnesses wrote, read into heldout's rollout table: inspect_ai logs,
lm-evaluation-harness `--log_samples` files, evalplus results, SWE-bench reports and verifiers
rollouts (`read_source`). Which one a file is comes from its content (heldout.sources.sniff).
"""

from __future__ import annotations

import dataclasses
import hashlib
from functools import partial
from pathlib import Path

from heldout.sources import sniff
from heldout.sources.record import Imported

FOREIGN = (sniff.INSPECT_EVAL, sniff.INSPECT_JSON, sniff.LM_EVAL, sniff.EVALPLUS,
           sniff.SWEBENCH_REPORTS, sniff.SWEBENCH_SUMMARY, sniff.VERIFIERS)


def file_sha256(path: Path) -> str:
    """The file's digest, read in pieces; a folder's, over its files' names and digests."""
    digest = hashlib.sha256()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{file.relative_to(path)}\0{file_sha256(file)}\n".encode())
        return digest.hexdigest()
    with path.open("rb") as stream:
        while piece := stream.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()


def read_source(path: Path, kind: str, score_key: str | None = None,
                group_key: str | None = None) -> Imported:
    """The outcomes of a file of one of the FOREIGN kinds (sniff.source_kind tells which)."""
    from heldout.sources import evalplus, inspect_logs, lm_eval, swebench_reports, verifiers

    readers = {
        sniff.INSPECT_EVAL: partial(inspect_logs.read_inspect_log, form="eval"),
        sniff.INSPECT_JSON: partial(inspect_logs.read_inspect_log, form="json"),
        sniff.LM_EVAL: lm_eval.read_lm_eval_samples,
        sniff.EVALPLUS: evalplus.read_evalplus_results,
        sniff.SWEBENCH_REPORTS: swebench_reports.read_reports,
        sniff.SWEBENCH_SUMMARY: swebench_reports.read_summary,
        sniff.VERIFIERS: verifiers.read_verifiers_results,
    }
    imported = readers[kind](path, score_key, group_key)
    source = dataclasses.replace(imported.source, file_sha256=file_sha256(path))
    return dataclasses.replace(imported, source=source)
