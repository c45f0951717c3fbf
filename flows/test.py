"""The `test` stage as a Prefect flow."""

from flows import stage_flow
from stages import test

test_flow = stage_flow(test)
