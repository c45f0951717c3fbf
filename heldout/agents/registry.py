"""Agent kinds by name: `params.checkpoints.<name>` is `{agent: <kind>, ...settings}`, and
`make_agent` validates the settings against the kind's own model, so a typo names the
checkpoint and the field.
"""

from __future__ import annotations

import contextlib
from typing import Any

from heldout.agents.protocol import Agent, AgentContext
from heldout.errors import ParamsError
from heldout.plugins import InvalidSettings, Plugin, Registry

# A factory takes (validated settings, AgentContext) and returns an Agent.
AGENT_KINDS = Registry("agent kind", [
    Plugin("demo", "heldout.agents.demo_policies:make", "DemoSettings"),
    Plugin("oracle", "heldout.agents.canaries:make_oracle", "AgentSettings"),
    Plugin("blind", "heldout.agents.canaries:make_blind", "AgentSettings"),
    Plugin("openai", "heldout.agents.openai:make", "OpenAISettings"),
    Plugin("command", "heldout.agents.command:make", "CommandSettings"),
    Plugin("python", "heldout.agents.python:make", "PythonSettings"),
    Plugin("replay", "heldout.agents.replay:make", "ReplaySettings"),
])


def make_agent(name: str, settings: dict[str, Any], context: AgentContext) -> Agent:
    """The agent for checkpoint `name` from its params entry."""
    kind = settings.get("agent")
    if kind not in AGENT_KINDS:
        raise ParamsError(
            f"params.yaml: checkpoints.{name}.agent: {kind!r} is not an agent kind; "
            f"choose one of {', '.join(AGENT_KINDS)}"
        )
    rest = {key: value for key, value in settings.items() if key != "agent"}
    try:
        return AGENT_KINDS.create(kind, rest, context)
    except InvalidSettings as error:
        raise ParamsError(error.render(f"params.yaml: checkpoints.{name}.")) from None


def close_agent(agent: Agent) -> None:
    """Release what an agent holds (an endpoint's connections), if it holds anything."""
    close = getattr(agent, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # an agent that cannot close is done anyway
            close()


# Settings that say how fast a checkpoint is asked, never what it answers: they are left out of
# everything that names its episodes (the resume cache's keys, the test access's identity).
OPERATIONAL_SETTINGS = ("max_in_flight",)


def identity_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's settings less the operational ones: what its episodes' identity rests on."""
    return {key: value for key, value in settings.items() if key not in OPERATIONAL_SETTINGS}
