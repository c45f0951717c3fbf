"""An example step agent for heldout's `python` kind (`protocol: steps`): a generator function.
Plug it in (params.yaml; the project root must be importable, e.g. `PYTHONPATH=.`):

    checkpoints:
      my_agent:
        agent: python
        protocol: steps
        function: examples.python_step_agent:agent
        options: {revise: true}

It is called with the task message (a dict, as a command agent reads it) and `options` as
keyword arguments; each `yield` gives heldout an action (a dict) and returns the observation
(a dict) of it. A submit ends the episode: heldout closes the generator there. Returning
without a submit is an error. The policy is examples/step_agent.py's, in this form.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from examples.step_agent import draft, offers, revision

Observation = dict[str, Any]


def agent(task: dict[str, Any], revise: bool = True) -> Generator[dict, Observation, None]:
    view = task["task"]
    turns = task["budgets"].get("turns", 9)
    body = draft(view)
    if offers(task, "run_public_tests") and turns >= 2:
        observation = yield {"tool": "run_public_tests", "arguments": {"code": body},
                             "message": "the draft, from the docstring"}
        if revise and observation["data"].get("passed") is False:
            revised = revision(view, body)
            if revised != body and observation["remaining"].get("turns", 9) >= 2:
                body = revised
                yield {"tool": "run_public_tests", "arguments": {"code": body},
                       "message": "revised: the public examples"}
    yield {"tool": "submit", "arguments": {"code": body}, "message": "final"}
