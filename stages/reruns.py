"""`params.reruns`: how the test access runs both arms, in a module of its own so that the
report stage and `heldout plan` read it without the test stage's code."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from heldout.episodes.harness import Harness
from heldout.statistics.power import MIN_RUNS, too_few_runs


class RerunsConfig(BaseModel):
    """`params.reruns`: the run-level drift the verdict carries, measured inside the test
    access by running both arms `runs` times in all (their own episodes first, then under new
    seeds, run r of the two under the same seeds); the verdict compares the runs pooled.
    `episodes`: per task in each of those runs (0: the harness's n): more runs of fewer
    episodes buy more power per episode and a smaller critical value for the drift
    (docs/statistics.md, "The cost of runs")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: int = 12
    episodes: int = Field(default=2, ge=0)

    def harness(self, harness: Harness) -> Harness:
        """The harness each test run rolls out under: the params' own, at `episodes` per
        task."""
        return harness.model_copy(update={"n": self.episodes}) if self.episodes else harness

    @model_validator(mode="before")
    @classmethod
    def _no_arm(cls, data: Any) -> Any:
        if isinstance(data, dict) and "arm" in data:
            raise ValueError("reruns.arm is gone: both arms are rerun, run by run under the "
                             "same seeds (docs/statistics.md, run-level drift); remove it")
        return data

    @field_validator("runs")
    @classmethod
    def _enough(cls, runs: int) -> int:
        if runs < MIN_RUNS:
            raise ValueError(f"at least {MIN_RUNS}: " + (too_few_runs(runs) or (
                "with one run of each arm the test access runs the base's episodes and then "
                "the candidate's, and drift between those times is not controlled, so the "
                "verdict could only be \"not decidable: the arms ran at different times\"")))
        return runs
