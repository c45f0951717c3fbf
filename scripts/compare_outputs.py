"""Are two runs of the pipeline the same? Compares every output dvc.yaml declares, in two
project folders (say, a run before a refactoring and one after), file by file.

    .venv/bin/python scripts/compare_outputs.py BEFORE_ROOT AFTER_ROOT

Equal means byte-equal, except where a run must differ: rollout tables are compared as tables
without their wall-clock columns (heldout.episodes.rows.TIMING_COLUMNS), and the test
access's record without the id of the MLflow run that witnessed it. Exits 1 and names every
file that differs, or is missing on one side.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import yaml

from heldout.episodes.rows import TIMING_COLUMNS
from stages.catalog import ACCESS

RUN_SPECIFIC_FIELDS = {ACCESS.as_posix(): {"mlflow_run_id"}}


def declared_outputs(root: Path) -> list[Path]:
    """Every output path of every stage, foreach stages expanded over params.checkpoints."""
    stages = yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    checkpoints = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))["checkpoints"]
    paths = []
    for stage in stages.values():
        body = stage.get("do", stage)
        keys = list(checkpoints) if "foreach" in stage else [None]
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []):
                path = next(iter(entry)) if isinstance(entry, dict) else entry
                paths += [Path(path.replace("${key}", key) if key else path) for key in keys]
    return paths


def files_under(root: Path, path: Path) -> list[Path]:
    full = root / path
    if full.is_dir():
        return sorted(p.relative_to(root) for p in full.rglob("*") if p.is_file())
    return [path]


def same(before: Path, after: Path, relative: Path) -> bool:
    if relative.suffix == ".parquet":
        tables = [pd.read_parquet(side).drop(columns=list(TIMING_COLUMNS), errors="ignore")
                  for side in (before, after)]
        return tables[0].equals(tables[1]) and tables[0].dtypes.equals(tables[1].dtypes)
    ignored = RUN_SPECIFIC_FIELDS.get(relative.as_posix())
    if ignored:
        records = [{key: value for key, value in json.loads(side.read_text("utf-8")).items()
                    if key not in ignored} for side in (before, after)]
        return records[0] == records[1]
    return before.read_bytes() == after.read_bytes()


def compare(before_root: Path, after_root: Path) -> list[str]:
    """One line per difference; none when the two runs' outputs agree."""
    differences = []
    for declared in declared_outputs(after_root):
        files = set(files_under(before_root, declared)) | set(files_under(after_root, declared))
        for relative in sorted(files):
            before, after = before_root / relative, after_root / relative
            if not before.is_file() or not after.is_file():
                side = "after" if after.is_file() else "before"
                differences.append(f"{relative}: only in {side}")
            elif not same(before, after, relative):
                differences.append(f"{relative}: differs")
    return differences


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = map(Path, argv)
    differences = compare(before, after)
    for line in differences:
        print(line)
    compared = sum(len(files_under(after, p)) for p in declared_outputs(after))
    print(f"{compared} output files compared: "
          + (f"{len(differences)} differ" if differences else "all the same"))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
