"""`params.orchestration`: where episodes run and when the nightly evaluation starts.

None of it changes a number: the rollout files are the same on threads and on a Dask cluster,
so no DVC stage lists this section and changing it re-runs nothing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class OrchestrationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    task_runner: Literal["threads", "dask"] = Field(
        default="threads",
        description="threads: chunks on threads of the stage's process, their episodes on its "
        "event loop; dask: the cluster at dask_address, or a local cluster of dask_workers "
        "processes",
    )
    dask_address: str = Field(default="", description="a scheduler, e.g. tcp://10.0.0.5:8786")
    dask_workers: int = Field(default=2, ge=1, description="processes of the local cluster")
    nightly_cron: str = Field(default="0 2 * * *", min_length=9)
    nightly_timezone: str = Field(default="UTC", min_length=1)
