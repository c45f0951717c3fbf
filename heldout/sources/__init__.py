"""Results other harnesses wrote, read into heldout's rollout table: inspect_ai logs,
lm-evaluation-harness `--log_samples` files, evalplus results, SWE-bench reports and verifiers
rollouts (`read_source`). Which one a file is comes from its content (heldout.sources.sniff).
"""

from __future__ import annotations

import dataclasses
import hashlib
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
        sniff.INSPECT_EVAL: lambda: inspect_logs.read_inspect_log(path, "eval", score_key,
                                                                  group_key),
        sniff.INSPECT_JSON: lambda: inspect_logs.read_inspect_log(path, "json", score_key,
                                                                  group_key),
        sniff.LM_EVAL: lambda: lm_eval.read_lm_eval_samples(path, score_key, group_key),
        sniff.EVALPLUS: lambda: evalplus.read_evalplus_results(path, score_key, group_key),
        sniff.SWEBENCH_REPORTS: lambda: swebench_reports.read_reports(path, score_key,
                                                                      group_key),
        sniff.SWEBENCH_SUMMARY: lambda: swebench_reports.read_summary(path, score_key,
                                                                      group_key),
        sniff.VERIFIERS: lambda: verifiers.read_verifiers_results(path, score_key, group_key),
    }
    imported = readers[kind]()
    source = dataclasses.replace(imported.source, file_sha256=file_sha256(path))
    return dataclasses.replace(imported, source=source)
