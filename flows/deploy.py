"""The `nightly` deployment: the pipeline flow on the cron schedule of params.orchestration.

`heldout serve` serves it from this machine with `flow.serve`'s runner: at each tick the runner
starts the pipeline flow in a process of its own, DVC finds what changed since the last night
(a new checkpoint in params.yaml, new tasks) and runs only that. Schedules need a real Prefect
server (a temporary one never fires them, NOTES.md), so serving without one is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flows.orchestration import OrchestrationConfig
from heldout.errors import StageError
from stages.common import read_params, section

DEPLOYMENT = "nightly"


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
    if not os.environ.get("PREFECT_API_URL"):
        raise StageError(
            "a schedule needs a Prefect server: start one (`make prefect-server`, or "
            "`prefect server start`) and export PREFECT_API_URL=http://127.0.0.1:4200/api"
        )
    from prefect import serve

    os.chdir(root)  # the runner starts each flow run from here, by the flow's file path
    serve(nightly_deployment(root))
