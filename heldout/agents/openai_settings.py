"""`params.checkpoints.<name>` for `agent: openai` (heldout.agents.openai)."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
)

from heldout.agents.protocol import AgentSettings
from heldout.environment import TEST_KEY_ENV
from heldout.plugins import gone
from heldout.tasks.record import NonBlank

_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class OpenAISettings(AgentSettings):
    """`params.checkpoints.<name>` for `agent: openai`.

    `protocol` says how an episode talks to the model: `completion`, one request whose reply is
    submitted; `tools`, a multi-turn episode over native tool calling; `text`, a multi-turn
    episode for servers without tool calling, where each reply names its action in a line
    `ACTION: <tool>` (heldout.agents.openai_text). `price_in_per_mtok` and `price_out_per_mtok`
    (USD per million prompt / completion tokens) price a request whose server reports no
    `usage.cost`; without them such a request costs 0. `max_in_flight` is the most requests
    sent to this endpoint at once: a ceiling, under which an adaptive limit finds what the
    server takes (heldout.agents.endpoint_limit); it changes no number, so it is no part of
    the checkpoint's identity."""

    base_url: str
    model: NonBlank
    api_key_env: str | None = None
    endpoint: Literal["chat", "completions"] = "chat"
    max_in_flight: PositiveInt = 256
    request_timeout_s: PositiveFloat = 300.0
    max_retries: NonNegativeInt = 5
    backoff_base_s: NonNegativeFloat = 1.0
    backoff_max_s: NonNegativeFloat = 60.0
    system_prompt: str | None = None
    protocol: Literal["completion", "tools", "text"] = "completion"
    price_in_per_mtok: NonNegativeFloat | None = None
    price_out_per_mtok: NonNegativeFloat | None = None

    concurrency: gone("is now max_in_flight: the most requests this endpoint is sent at once "
                      "(an adaptive limit stays below it; `heldout probe` measures the "
                      "server)") = None

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://, e.g. http://localhost:8000/v1")
        return value.rstrip("/")

    @field_validator("api_key_env")
    @classmethod
    def _names_a_set_variable(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not _ENVIRONMENT_NAME.fullmatch(value):
            # The value is not repeated: it may be the key itself, pasted where its name belongs.
            raise ValueError(
                "must be the name of an environment variable (letters, digits, _) that holds "
                "the API key, never the key itself"
            )
        if value == TEST_KEY_ENV:
            # A test key sent as a bearer token leaves for whatever base_url names.
            raise ValueError(f"{value} holds the test key, which never leaves heldout: name "
                             "the variable that holds this endpoint's own API key")
        if not os.environ.get(value):
            raise ValueError(
                f"the environment variable {value} is not set or empty; export the API key "
                "under that name, or drop api_key_env for a server that needs no key"
            )
        return value

    @field_validator("backoff_max_s")
    @classmethod
    def _not_below_base(cls, value: float, info: ValidationInfo) -> float:
        if value < info.data.get("backoff_base_s", 0.0):
            raise ValueError("must be at least backoff_base_s")
        return value

    @field_validator("system_prompt")
    @classmethod
    def _chat_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("endpoint") == "completions":
            raise ValueError("needs endpoint: chat; the completions endpoint has no system role")
        return value

    @field_validator("protocol")
    @classmethod
    def _turns_need_chat(cls, value: str, info: ValidationInfo) -> str:
        if value != "completion" and info.data.get("endpoint") == "completions":
            raise ValueError(
                f"{value} needs endpoint: chat; the completions endpoint has no conversation "
                "(use protocol: completion with it)"
            )
        return value
