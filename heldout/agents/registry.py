"""Agent kinds by name: `params.checkpoints.<name>` is `{agent: <kind>, ...settings}`, and
`make_agent` validates the settings against the kind's own model, so a typo names the
checkpoint and the field.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import ValidationError

from heldout.agents.protocol import Agent, AgentContext
from heldout.errors import ParamsError

# kind -> "module:factory"; a factory takes (settings dict, AgentContext) and returns an Agent.
AGENT_KINDS = {
    "demo": "heldout.agents.demo:make",
    "oracle": "heldout.agents.canaries:make_oracle",
    "blind": "heldout.agents.canaries:make_blind",
    "openai": "heldout.agents.openai:make",
    "command": "heldout.agents.command:make",
    "python": "heldout.agents.python:make",
    "replay": "heldout.agents.replay:make",
}


def make_agent(name: str, settings: dict[str, Any], context: AgentContext) -> Agent:
    """The agent for checkpoint `name` from its params entry."""
    kind = settings.get("agent")
    if kind not in AGENT_KINDS:
        raise ParamsError(
            f"params.yaml: checkpoints.{name}.agent: {kind!r} is not an agent kind; "
            f"choose one of {', '.join(AGENT_KINDS)}"
        )
    module_name, factory = AGENT_KINDS[kind].split(":")
    module = importlib.import_module(module_name)
    rest = {key: value for key, value in settings.items() if key != "agent"}
    try:
        return getattr(module, factory)(rest, context)
    except ValidationError as error:
        lines = [
            f"params.yaml: checkpoints.{name}.{'.'.join(map(str, d['loc']))}: {d['msg']}"
            for d in error.errors()
        ]
        raise ParamsError("\n".join(lines)) from None
