"""The `nightly` deployment: the pipeline flow on the cron schedule of params.orchestration.

`heldout serve` serves it from this machine with `flow.serve`'s runner: at each tick the runner
starts the pipeline flow in a process of its own, DVC finds what changed since the last night
(a new checkpoint in params.yaml, new tasks) and runs only that. Schedules need a real Prefect
server (a temporary one never fires them, NOTES.md), so serving without one is refused.

`heldout deploy --pool NAME` sends it to a work pool instead, pinned to one commit: Prefect's
`flow.from_source` of the git remote at HEAD's sha (GitRepository with `commit_sha`: the worker
clones and checks out exactly that), or of a clone of HEAD in a folder of its own
(`--source PATH`). The run gets the commit as its `commit` parameter and a `commit:<sha>` tag,
and refuses to start in a folder that holds anything else (flows/pinned.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flows.orchestration import OrchestrationConfig
from heldout.errors import StageError
from stages.common import read_params, section

DEPLOYMENT = "nightly"
ENTRYPOINT = "flows/pipeline.py:pipeline_flow"
# Handed to the runs from the deployer's shell when it set them: where the runs are recorded.
FORWARDED_ENV = ("MLFLOW_TRACKING_URI",)


def nightly_deployment(root: Path) -> Any:
    from prefect.schedules import Cron

    from flows.pipeline import pipeline_flow

    config = section(read_params(root), "orchestration", OrchestrationConfig)
    return pipeline_flow.to_deployment(
        name=DEPLOYMENT,
        schedules=[Cron(config.nightly_cron, timezone=config.nightly_timezone)],
        parameters={"root": str(root)},
        # A night that overruns must not overlap the next: both would want DVC's repo lock.
        concurrency_limit=1,
        tags=["heldout", DEPLOYMENT],
        description=f"heldout pipeline of {root}, {config.nightly_cron} "
                    f"({config.nightly_timezone})",
    )


def serve_nightly(root: Path) -> None:
    _need_server("a schedule")
    from prefect import serve

    os.chdir(root)  # the runner starts each flow run from here, by the flow's file path
    serve(nightly_deployment(root))


def deploy_to_pool(root: Path, pool: str, *, source: Path | None = None, remote: str = "origin",
                   work_dir: str | None = None,
                   forwarded: dict[str, str] | None = None) -> list[str]:
    """Deploy the pipeline flow to a work pool at HEAD's commit; what was deployed, in lines
    for the terminal."""
    from flows import pinned

    _need_server("deploying")
    pinned.repository_top(root)
    commit = pinned.head_commit(root)
    not_deployed = pinned.uncommitted(root)
    if source is None:
        from prefect.runner.storage import GitRepository

        where = pinned.remote_url(root, remote, commit)
        storage = GitRepository(url=where, commit_sha=commit, pull_interval=None)
    else:
        storage = where = str(pinned.pinned_copy(root, source, commit))
    config = section(read_params(root), "orchestration", OrchestrationConfig)
    job_variables: dict[str, Any] = {}
    if forwarded:
        job_variables["env"] = dict(forwarded)
    if work_dir:
        job_variables["working_dir"] = work_dir
    _deploy(storage, pool, commit, config, job_variables, where)
    name = f"pipeline/{DEPLOYMENT}"
    return [
        f"deployed {name} to work pool {pool}: commit {commit} of {where}, "
        f"{config.nightly_cron} ({config.nightly_timezone}), one run at a time",
        *([f"its runs get {', '.join(sorted(forwarded))} from this shell"] if forwarded else []),
        *([f"not deployed (uncommitted): {', '.join(not_deployed)}"] if not_deployed else []),
        f"start a worker: prefect worker start --pool {pool} --type process; "
        f"run it now: prefect deployment run {name}",
    ]


def _deploy(storage: Any, pool: str, commit: str, config: OrchestrationConfig,
            job_variables: dict[str, Any], where: str) -> Any:
    from prefect import flow
    from prefect.exceptions import ObjectNotFound
    from prefect.schedules import Cron

    _need_pool(pool)
    pipeline = flow.from_source(source=storage, entrypoint=ENTRYPOINT)
    try:
        return pipeline.deploy(
            name=DEPLOYMENT,
            work_pool_name=pool,
            build=False,
            push=False,
            job_variables=job_variables,
            schedules=[Cron(config.nightly_cron, timezone=config.nightly_timezone)],
            # The run checks it holds this commit before it runs anything (flows/pinned.py).
            parameters={"commit": commit},
            # A night that overruns must not overlap the next: both would want DVC's repo lock.
            concurrency_limit=1,
            tags=["heldout", DEPLOYMENT, f"commit:{commit}"],
            version=commit[:12],
            description=f"heldout pipeline at commit {commit} of {where}, "
                        f"{config.nightly_cron} ({config.nightly_timezone})",
            print_next_steps=False,
        )
    except ObjectNotFound:  # the pool went between the check and the deploy
        raise StageError(_no_pool(pool)) from None


def _need_server(doing: str) -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise StageError(
            f"{doing} needs a Prefect server: start one (`make prefect-server`, or "
            "`prefect server start`) and export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )


def _need_pool(pool: str) -> None:
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            raise StageError(_no_pool(pool)) from None


def _no_pool(pool: str) -> str:
    return (f"no work pool '{pool}' on {os.environ.get('PREFECT_API_URL')}: create it with "
            f"`prefect work-pool create {pool} --type process`")
