"""params.yaml as the flows see it: every section and its model, the whole file checked at once
(stages/params_check.py, which may import neither the test stage's models nor the flows'), and
whether a stage needs Prefect to run as params.orchestration says."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel


def params_sections() -> dict[str, type[BaseModel]]:
    """Every section of params.yaml and its model: the stages' and the flows' (orchestration)."""
    from flows.orchestration import OrchestrationConfig
    from heldout.custody.access_params import TestConfig
    from stages.params_check import stage_sections
    from stages.reruns import RerunsConfig
    from stages.traces import TracingConfig

    return {**stage_sections(), "test": TestConfig, "reruns": RerunsConfig,
            "tracing": TracingConfig, "orchestration": OrchestrationConfig}


def check_params_file(root: Path) -> None:
    """All of params.yaml at once, before any stage runs: one ParamsError listing every
    problem."""
    from stages.params_check import check_params, read_params

    check_params(read_params(root), params_sections(), root)


def prefect_wanted(root: Path) -> bool:
    """Whether `heldout stage` runs its stage as a Prefect flow: when there is a Prefect API to
    report to (the pipeline's, or PREFECT_API_URL), or when params.orchestration names the Dask
    task runner, which is Prefect's."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    from flows.orchestration import OrchestrationConfig
    from stages.params_check import read_params, section

    return section(read_params(root), "orchestration", OrchestrationConfig).task_runner == "dask"
