"""The `sensitivity` stage (the harness sweep, val only) as a Prefect flow, its episodes
fanned out."""

from prefect import flow

from flows.fanout import on_params_task_runner, on_task_runner
from stages import sensitivity


@flow(name="sensitivity", description=sensitivity.__doc__)
def _sensitivity() -> dict:
    return sensitivity.run(execute=on_task_runner)


sensitivity_flow = on_params_task_runner(_sensitivity)
