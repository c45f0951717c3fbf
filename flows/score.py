"""The `score` stage as a Prefect flow."""

from flows import stage_flow
from stages import score

score_flow = stage_flow(score)
