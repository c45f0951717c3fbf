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
from heldout.tasks.record import iso_date_problem

# A factory takes (validated settings, AgentContext) and returns an Agent.
AGENT_KINDS = Registry("agent kind", [
    Plugin("demo", "heldout.agents.demo_policies:make", "DemoSettings"),
    Plugin("oracle", "heldout.agents.canaries:make_oracle", "AgentSettings"),
    Plugin("blind", "heldout.agents.canaries:make_blind", "AgentSettings"),
    Plugin("stacker", "heldout.agents.canaries:make_stacker", "StackerSettings"),
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
    rest = kind_settings(settings)
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


# Settings about the checkpoint, not how its agent behaves, read by no agent kind: `data_cutoff`
# (YYYY-MM-DD, the last day of its training data), which the report's by_date section splits
# the test tasks by. Its agent never sees it and its episodes do not depend on it, so it is
# left out of the kind's settings and of its episodes' identity (the resume cache's keys, the
# access key's settings digests): setting it runs no episode again. The test access still
# reads it (the whole checkpoint entry is in the access's identity, heldout.custody.identity)
# and records it in access.json: the cutoff a report splits by is the one of the access.
CHECKPOINT_SETTINGS = ("data_cutoff",)


def kind_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's params entry as its agent kind's model takes it: less `agent` and the
    CHECKPOINT_SETTINGS."""
    return {key: value for key, value in settings.items()
            if key != "agent" and key not in CHECKPOINT_SETTINGS}


def data_cutoff_problem(settings: dict[str, Any]) -> str | None:
    """Why a checkpoint's `data_cutoff` is not a date YYYY-MM-DD, or None (also when unset)."""
    value = settings.get("data_cutoff")
    if value is None:
        return None
    if not isinstance(value, str):
        # YAML reads an unquoted 2024-06-01 as a date: quoting it keeps it the text it is.
        return (f"must be a date written YYYY-MM-DD in quotes (\"2024-06-01\"), got "
                f"{value!r}")
    return iso_date_problem(value)


def identity_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's settings less the operational ones and the CHECKPOINT_SETTINGS: what its
    episodes' identity rests on."""
    return {key: value for key, value in settings.items()
            if key not in OPERATIONAL_SETTINGS and key not in CHECKPOINT_SETTINGS}
