"""The `report` stage as a Prefect flow."""

from flows import stage_flow
from stages import report

report_flow = stage_flow(report)
