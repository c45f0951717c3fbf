"""What `dvc repro` would do, asked of DVC without running anything, and without Prefect or
MLflow: the stages it would consider, in its order, and whether any of them is stale.

A stage is stale exactly when DVC's own `reproduce` would run it (`Stage.changed`: its command,
deps, params or outs differ from dvc.lock); a stage downstream of a stale one is reached only
through it, so "none is stale" means `dvc repro` would run nothing. That is what lets a no-op
`heldout pipeline` answer in about a second: no Prefect server, no flow run, no MLflow run.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from heldout.errors import StageError


@dataclass(frozen=True)
class Plan:
    planned: list[str]  # DVC's addresses, in the order `dvc repro` would run them
    stale: str | None  # the first stage DVC would run; None: nothing to do


def planned_stages(repo: object, targets: list[str] | None) -> list:
    """Every stage `dvc repro TARGETS` would consider, in the order it would run them."""
    from dvc.repo.reproduce import collect_stages, get_active_graph, plan_repro

    chosen = collect_stages(repo, targets or ["dvc.yaml"])
    return plan_repro(get_active_graph(repo.index.graph), chosen)


def plan(root: Path, targets: list[str] | None, force: bool = False) -> Plan:
    """The planned stages and the first stale one (all are, under `force`). DVC's own errors
    (a broken dvc.yaml, an unknown target) come back as one StageError, without DVC's log."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo, repo.lock:  # as `dvc status` holds it
            stages = planned_stages(repo, targets)
            stale = next((stage for stage in stages if force or stage.changed()), None)
            return Plan([stage.addressing for stage in stages],
                        None if stale is None else stale.addressing)
    except DvcException as error:
        raise StageError(f"dvc: {dvc_reason(error)}") from None


def stages_to_run(root: Path) -> set[str] | None:
    """Every stage `dvc repro` would run: the stale ones and every stage downstream of one
    (reached through it, it runs when its input changes, as it will). DVC's graph points
    from a stage to the stages it depends on, so a stale stage's ancestors are downstream.
    None outside a git repository, where DVC has run nothing (and cannot: every stage)."""
    import networkx as nx
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=root, capture_output=True,
                      check=False).returncode != 0:
        return None
    try:
        with Repo(str(root)) as repo, repo.lock:
            graph = repo.index.graph
            stale = [stage for stage in planned_stages(repo, None) if stage.changed()]
            reached = set(stale).union(*(nx.ancestors(graph, stage) for stage in stale))
            return {stage.addressing for stage in reached}
    except DvcException as error:
        raise StageError(f"dvc: {dvc_reason(error)}") from None


def dvc_reason(error: BaseException) -> str:
    """A DVC error and its causes in one line: `failed to reproduce 'x': failed to run: ...`."""
    parts: list[str] = []
    while error is not None:
        text = str(error).strip()
        if text and text not in parts:
            parts.append(text)
        error = error.__cause__ or error.__context__
    return ": ".join(parts)
