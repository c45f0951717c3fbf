"""`heldout sweeps`: the project's DVC experiments, one row each, in a table a person can read.

`dvc exp show` draws a column for every params.yaml leaf, every key of every metrics file and
the hash of every dependency: 168 columns, 5,170 characters with --md, on a project of two
checkpoints, 307 columns with the default's eleven (docs/running.md). This table has six: the
experiment, when it was made, the best checkpoint on val and its pass@1 with its interval (from
metrics/val/<checkpoint>.json), the test verdict (metrics/test.json; a sweep's is "none: a
sweep (NAME)") and only the params that differ among the rows shown, as key=value. It is at
most --width characters wide: a cell too long for its column is cut with an ellipsis, never
wrapped. The experiments are read through DVC's Python API (`Repo.experiments.show`, what
`dvc exp show` itself calls), so the rows are DVC's: the workspace, each baseline commit and
the experiments made from it.

Registered by cli/main.py. Imports of DVC stay inside the functions: `heldout --help` must not
pay for them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from heldout.errors import ExperimentsError

stdout = Console()
# stages/catalog.py's (tests/pipeline/test_sweeps.py checks), without importing it for --help.
VAL_METRICS = "metrics/val/"  # one file per checkpoint
TEST_METRICS = "metrics/test.json"
PARAMS_FILE = "params.yaml"
COLUMN_GAP = "  "
ELLIPSIS = "…"
HEADERS = ("experiment", "created", "best on val", "val pass@1 [95%]", "test verdict",
           "params that differ")


@dataclass(frozen=True)
class Experiment:
    """One row of DVC's experiments, as plain data: what the table needs and nothing of DVC."""

    name: str
    kind: str  # "workspace", "baseline" (a commit) or "experiment"
    created: datetime | None = None
    state: str | None = None  # DVC's executor state when not a saved experiment: queued, ...
    params: dict[str, Any] = field(default_factory=dict)  # flattened, "harness.n" -> 10
    val: dict[str, dict[str, Any]] = field(default_factory=dict)  # checkpoint -> its metrics
    test: dict[str, Any] | None = None  # metrics/test.json
    error: str | None = None


def sweeps(
    width: Annotated[int, typer.Option(
        min=60, help="The widest a line may be; longer cells are cut with an ellipsis.")] = 200,
    num: Annotated[int, typer.Option(
        "--num", "-n", min=1, help="Show experiments of the last N commits (as "
                                   "`dvc exp show -n`).")] = 1,
) -> None:
    """List the project's DVC experiments (the workspace, each commit, each `dvc exp run`), one
    row each: when made, the best checkpoint on val and its pass@1, the test verdict, and the
    params that differ among the rows."""
    from heldout.environment import find_project_root

    for line in sweeps_table(read_experiments(find_project_root(), num), width):
        stdout.print(line, markup=False, highlight=False, soft_wrap=True)


# --- reading DVC's experiments -----------------------------------------------------------


def read_experiments(root: Path, num: int = 1) -> list[Experiment]:
    """The rows `dvc exp show -n NUM` shows, in its order; an ExperimentsError (one line) when
    DVC cannot list them."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo
    from dvc.scm import Git

    try:
        with Repo(str(root)) as repo:
            if not isinstance(repo.scm, Git):
                raise ExperimentsError(f"{root} is not in a git repository: DVC keeps "
                                       "experiments in git (git init, then commit)")
            if repo.scm.no_commits:
                raise ExperimentsError(f"{root}: no commit yet; DVC keeps experiments "
                                       "against a commit (git add -A && git commit)")
            states = repo.experiments.show(num=num)
    except DvcException as error:
        raise ExperimentsError(f"DVC cannot list the experiments of {root}: "
                               f"{str(error).splitlines()[0]}") from error
    rows = []
    for state in states:
        if state.rev == "workspace":
            rows.append(_experiment(state, "workspace", "workspace"))
            continue
        rows.append(_experiment(state, "baseline", _baseline_name(state)))
        for found in state.experiments or []:
            executor = found.executor
            status = executor.state if executor and executor.state != "success" else None
            for revision in found.revs:
                rows.append(_experiment(revision, "experiment",
                                        found.name or revision.name or revision.rev[:7],
                                        status))
    return rows


def _baseline_name(state: Any) -> str:
    short = state.rev[:7]
    return f"{state.name} ({short})" if state.name else short


def _experiment(state: Any, kind: str, name: str, status: str | None = None) -> Experiment:
    data = state.data
    if data is None:
        error = state.error.msg if state.error is not None else None
        return Experiment(name, kind, state=status, error=error)
    params: dict[str, Any] = {}
    for path, result in data.params.items():
        prefix = "" if path == PARAMS_FILE else f"{path}:"
        params.update(flatten(result.get("data") or {}, prefix))
    val = {Path(path).stem: result.get("data") or {} for path, result in data.metrics.items()
           if path.startswith(VAL_METRICS) and path.endswith(".json")}
    test = data.metrics.get(TEST_METRICS)
    return Experiment(name, kind, created=data.timestamp, state=status, params=params, val=val,
                      test=None if test is None else test.get("data"))


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """params.yaml's leaves by dotted path; a list is one leaf, as `-S key=[1,2]` sets it."""
    leaves: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            leaves.update(flatten(value, f"{prefix}{key}."))
        else:
            leaves[f"{prefix}{key}"] = value
    return leaves


# --- the table ------------------------------------------------------------------------------


def sweeps_table(experiments: list[Experiment], width: int = 200) -> list[str]:
    """The header, one line per experiment and two closing notes, each at most `width` long."""
    varying = differing_params(experiments)
    references = reference_params(experiments)
    rows = [row_cells(experiment, varying, reference)
            for experiment, reference in zip(experiments, references, strict=True)]
    lines = fit_columns([list(HEADERS), *rows], width)
    every = len({key for experiment in experiments for key in experiment.params})
    notes = [f"{len(experiments)} rows; params: the {len(varying)} of {every} that differ among "
             "them, each row's against its commit's (a commit's against the newest, "
             "~key: removed); every column: dvc exp show"]
    newest = next((row for row in experiments if row.kind == "baseline" and row.params), None)
    if newest is not None and varying:
        notes.append(f"{newest.name}: " + " ".join(
            f"{key}={compact(newest.params[key])}" for key in varying if key in newest.params))
    return [*lines, *(cut(note, width) for note in notes)]


def differing_params(experiments: list[Experiment]) -> list[str]:
    """The params whose value is not the same in every row that has params (a key some rows
    lack differs too)."""
    rows = [experiment.params for experiment in experiments if experiment.params]
    keys = sorted({key for params in rows for key in params})
    return [key for key in keys
            if len({compact(params[key]) if key in params else None for params in rows}) > 1]


def reference_params(experiments: list[Experiment]) -> list[dict[str, Any] | None]:
    """What each row's params are read against, as `-S` changed them: an experiment's, the
    commit it was made from (the baseline row above it, in DVC's order); the workspace's and
    every commit's, the newest commit (which so says nothing of itself)."""
    newest = next((row.params for row in experiments if row.kind == "baseline"), None)
    references, baseline = [], newest
    for experiment in experiments:
        if experiment.kind == "baseline":
            baseline = experiment.params
        references.append(baseline if experiment.kind == "experiment" else newest)
    return references


def row_cells(experiment: Experiment, varying: list[str],
              reference: dict[str, Any] | None) -> list[str]:
    name = experiment.name if experiment.kind != "experiment" else f"  {experiment.name}"
    if experiment.state:
        name += f" ({experiment.state})"
    created = experiment.created.strftime("%Y-%m-%d %H:%M") if experiment.created else "-"
    if experiment.error and not experiment.params:
        return [name, created, "-", "-", f"! {experiment.error}", ""]
    best, score = best_on_val(experiment.val)
    return [name, created, best, score, verdict_cell(experiment.test),
            changed_params(experiment.params, reference or {}, varying)]


def changed_params(params: dict[str, Any], reference: dict[str, Any], keys: list[str]) -> str:
    """`key=value` for each of `keys` whose value is not the reference's, `~key` for one the
    reference has and `params` lacks (as `-S` writes them)."""
    changed = []
    for key in keys:
        if key not in params:
            if key in reference:
                changed.append(f"~{key}")
        elif key not in reference or compact(reference[key]) != compact(params[key]):
            changed.append(f"{key}={compact(params[key])}")
    return " ".join(changed)


def best_on_val(val: dict[str, dict[str, Any]]) -> tuple[str, str]:
    """The checkpoint with the highest val pass@1 (ties: every one, by name) and that pass@1
    with its 95% interval, in percent."""
    scored = {name: metrics for name, metrics in val.items()
              if isinstance(metrics.get("pass@1"), int | float)}
    if not scored:
        return "-", "-"
    top = max(metrics["pass@1"] for metrics in scored.values())
    names = sorted(name for name, metrics in scored.items() if metrics["pass@1"] == top)
    best = scored[names[0]]
    low, high = best.get("pass@1_lo"), best.get("pass@1_hi")
    interval = (f" [{low * 100:.1f}, {high * 100:.1f}]"
                if isinstance(low, int | float) and isinstance(high, int | float) else "")
    return ", ".join(names), f"{top * 100:.1f}%{interval}"


def verdict_cell(test: dict[str, Any] | None) -> str:
    """metrics/test.json's verdict ("better", "none: a sweep (NAME)") and, for an access, the
    paired difference in points with its interval."""
    if not test:
        return "-"
    verdict = str(test.get("verdict", "-"))
    numbers = [test.get(key) for key in ("diff", "diff_lo", "diff_hi")]
    if all(isinstance(number, int | float) for number in numbers):
        diff, low, high = (number * 100 for number in numbers)
        verdict += f": {diff:+.1f} points [{low:+.1f}, {high:+.1f}]"
    return verdict


def compact(value: Any) -> str:
    """A params value as `-S` would set it: a bare word or number, JSON for lists and for
    strings with spaces."""
    if isinstance(value, str):
        return value if value and not any(c.isspace() for c in value) else json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def fit_columns(rows: list[list[str]], width: int) -> list[str]:
    """Rows as aligned lines no longer than `width`: while too wide, the widest column loses a
    character (its cells are cut with an ellipsis), so the long params column gives first."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    floor = len(ELLIPSIS) + 2
    while sum(widths) + len(COLUMN_GAP) * (len(widths) - 1) > width:
        widest = max(range(len(widths)), key=lambda column: (widths[column], column))
        if widths[widest] <= floor:
            break
        widths[widest] -= 1
    return [cut(COLUMN_GAP.join(cut(cell, size).ljust(size) for cell, size in zip(row, widths,
                                                                              strict=True))
                .rstrip(), width)
            for row in rows]


def cut(text: str, size: int) -> str:
    return text if len(text) <= size else text[:size - len(ELLIPSIS)] + ELLIPSIS
