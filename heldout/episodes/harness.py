"""The harness: everything about an evaluation except the weights, pinned by its fingerprint.

Two numbers are comparable only if they were produced under the same fingerprint: the same
prompt template, sampling, budgets, samples per task, sandbox and scorer.
"""

from __future__ import annotations

import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from heldout.canonical import content_digest
from heldout.sandbox.config import SandboxConfig
from heldout.tasks.kinds import DEFAULT_KIND, task_kind

# How an evaluation is executed, not what it measures: left out of the fingerprint. Only
# `workers` is: it sets how many programs run at once, and nothing any one program is given
# (its source, inputs, limits, container), and each verdict is its own judge's alone, so the
# same programs get the same verdicts, sooner. (How loaded the machine is changes no verdict
# either: a program's time limit is CPU time, and only a load beyond `wall_factor` could bring a
# program that computes to the wall-clock backstop.) Every other sandbox setting can change a
# score and is in: `backend` and `image` (what a program runs on and with), `memory_mb`, `cpus`
# and `wall_factor` (its limits), `network`, and `container_per`:
# under "task" a task's samples run one after another in one container, under "program" each
# in a fresh one, so whatever one program could leave behind for the next is there or not.
EXECUTION_ONLY = {"sandbox": {"workers"}}
# The tools an episode may offer (heldout.episodes.environments says what each does).
ToolName = Literal["run_public_tests", "submit"]


class Harness(BaseModel):
    """`params.harness`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: str = Field(
        default="{prompt}", description="what an LLM agent is sent; {prompt} is the task prompt"
    )
    temperature: float = Field(default=0.8, ge=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    max_tokens: int = Field(default=512, ge=1, description="tokens generated per episode")
    max_turns: int = Field(default=1, ge=1, description="model calls per episode")
    max_tool_calls: int = Field(default=8, ge=1, description="tool calls per episode")
    max_cost_usd: float | None = Field(
        default=None, gt=0, description="per episode, where the endpoint reports cost")
    tools: tuple[ToolName, ...] = Field(
        default=("run_public_tests", "submit"),
        description="the tools an episode offers; `submit` must be one of them")
    on_budget: Literal["fail", "score_last"] = Field(
        default="fail",
        description="an episode a budget ends: a failure, or its last program scored")
    # A reply cut off at max_tokens ends where the budget did, not where the model did: its
    # program is judged (for the record and the alarm) but counts as a pass only with "score".
    on_truncation: Literal["fail", "score"] = Field(
        default="fail",
        description="a reply cut at max_tokens: a failure, or its program scored as it stands")
    timeout_s: float = Field(
        default=10.0, gt=0,
        description="CPU seconds per program, in the sandbox (sandbox.wall_factor times as "
                    "many of wall clock at most)")
    agent_timeout_s: float = Field(default=120.0, gt=0, description="per episode, wall time")
    n: int = Field(default=10, ge=1, description="episodes per task")
    seed: int = 0
    retries: int = Field(default=1, ge=0, description="re-runs of an episode that errored")
    sandbox: SandboxConfig = SandboxConfig()
    scorer_version: str = task_kind(DEFAULT_KIND).scorer_version

    @field_validator("tools")
    @classmethod
    def _tools_end_in_a_submit(cls, tools: tuple[str, ...]) -> tuple[str, ...]:
        if "submit" not in tools:
            raise ValueError("must include submit: an episode without it can never end well")
        if len(set(tools)) != len(tools):
            raise ValueError("names a tool twice")
        return tools

    @field_validator("template")
    @classmethod
    def _template_names_only_the_prompt(cls, template: str) -> str:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
        if fields != {"prompt"}:
            raise ValueError(f"must contain {{prompt}} and no other field (found {fields or '{}'})")
        return template

    def fingerprint(self) -> str:
        return content_digest(self.model_dump(mode="json", exclude=EXECUTION_ONLY))

    def short_fingerprint(self) -> str:
        return self.fingerprint()[:12]

