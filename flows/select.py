"""The `select` stage as a Prefect flow."""

from flows import stage_flow
from stages import select

select_flow = stage_flow(select)
