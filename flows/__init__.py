"""Prefect flows over the stages: `flows.<stage>` holds `<stage>_flow`, which `heldout stage`
finds by that name, so adding a stage needs no registry edit."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

# The pipeline flow run's id, which the stage processes it starts tag their flow runs with.
PIPELINE_RUN_ENV = "HELDOUT_PIPELINE_RUN"
# Where a stage process under the pipeline leaves its user error for the pipeline to print once,
# last (cli/main.py `main`, flows/pipeline.py); unset, it prints the error itself.
ERROR_FILE_ENV = "HELDOUT_ERROR_FILE"


def stage_flow(stage: ModuleType, **options: Any) -> Any:
    """The stage module's `run` as a Prefect flow named after the stage."""
    from prefect import flow

    name = stage.__name__.rsplit(".", 1)[-1]
    return flow(name=name, description=stage.__doc__, **options)(stage.run)


def run_stage_flow(name: str, pipeline_run: str | None, **arguments: Any) -> None:
    """Stage NAME's flow (`flows.NAME.NAME_flow`), its run tagged with the pipeline run that
    started it, if any."""
    from prefect import tags

    flow = getattr(importlib.import_module(f"flows.{name}"), f"{name}_flow")
    with tags(*([f"pipeline:{pipeline_run}"] if pipeline_run else [])):
        flow(**arguments)
