"""The `rollouts` stage as a Prefect flow, one run per checkpoint, its episodes fanned out."""

from prefect import flow

from flows.fanout import on_params_task_runner, on_task_runner
from stages import rollouts


@flow(name="rollouts", flow_run_name="rollouts:{checkpoint}", description=rollouts.__doc__)
def _rollouts(checkpoint: str) -> dict:
    return rollouts.run(checkpoint, execute=on_task_runner)


rollouts_flow = on_params_task_runner(_rollouts)
