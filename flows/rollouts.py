"""The `rollouts` stage as a Prefect flow, one run per checkpoint."""

from flows import stage_flow
from stages import rollouts

rollouts_flow = stage_flow(rollouts, flow_run_name="rollouts:{checkpoint}")
