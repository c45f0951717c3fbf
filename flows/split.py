"""The `split` stage as a Prefect flow."""

from flows import stage_flow
from stages import split

split_flow = stage_flow(split)
