"""The `test` stage as a Prefect flow, the test split's episodes fanned out."""

from prefect import flow

from flows.fanout import on_params_task_runner, on_task_runner
from stages import test


@flow(name="test", description=test.__doc__)
def _test() -> dict:
    return test.run(execute=on_task_runner)


test_flow = on_params_task_runner(_test)
