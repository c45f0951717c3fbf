"""The `score` stage as a Prefect flow, its canaries' episodes fanned out like the rollouts'."""

from prefect import flow

from flows.fanout import on_params_task_runner, on_task_runner
from stages import score


@flow(name="score", description=score.__doc__)
def _score() -> dict:
    return score.run(execute=on_task_runner)


score_flow = on_params_task_runner(_score)
