"""Another harness's results file as `heldout score`, `compare` and `import` take it: which
harness wrote it (by content), and the file read into a rollout table `<stem>.parquet` with its
card `<stem>.source.json` (what scored it, the file's digest, the tool's own figures).

Imports stay inside the functions: `heldout --help` must not pay for pandas.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    from heldout.statistics.counts import per_task_counts

    imported = read_source(path, kind, score_key, group_key)
    table = imported.table()
    counts = per_task_counts(table)
    # The card doubles as a DVC metrics file: the tool's figures and heldout's pass@1.
    card = {"file": str(path), "kind": kind, **imported.source.card(),
            "samples": len(imported.outcomes), "tasks": len(counts),
            "pass_at_1": float((counts["c"] / counts["n"]).mean())}
    with staged_outputs() as outputs:
        table.to_parquet(outputs.path(rollouts), index=False)
        outputs.write_json(rollouts.with_suffix(".source.json"), card)
    return ImportedFile(path, kind, rollouts, card, imported)


def describe(imported: ImportedFile) -> str:
    card = imported.card
    reported = ", ".join(f"{name} {value:.4g}" for name, value in card["reported"].items())
    return (f"{imported.path}: {card['kind']} ({card['tool']} {card['tool_version']}".rstrip()
            + f"), task {card['task']}, model {card['model']}; {card['scored_by']}"
            + (f"; the tool's own figures: {reported}" if reported else ""))


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
