"""The `decontaminate` stage as a Prefect flow."""

from flows import stage_flow
from stages import decontaminate

decontaminate_flow = stage_flow(decontaminate)
