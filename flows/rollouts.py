"""The `rollouts` stage as a Prefect flow, one run per checkpoint."""

from __future__ import annotations

from typing import Any

from prefect import flow

from stages import rollouts


@flow(name="rollouts", description=rollouts.__doc__, flow_run_name="rollouts:{checkpoint}")
def rollouts_flow(checkpoint: str) -> dict[str, Any]:
    return rollouts.run(checkpoint)
