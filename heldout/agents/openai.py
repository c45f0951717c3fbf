"""`openai`: any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, Ollama) over plain HTTP.

`protocol: completion` (the default) is a single-shot agent: one request per episode, whose
reply's code is submitted. `protocol: tools` and `protocol: text` are multi-turn agents that
call the episode's tools, natively or through a line `ACTION: <tool>` in the reply
(heldout.agents.openai_turns); `make` returns a different class for them, since the episode
loop tells the two shapes apart by whether the agent has `begin`.

The rollout awaits the agent's coroutines (`complete_async`, a session's `act_async`) on the
process's event loop, hundreds of episodes at once; one agent holds one shared client, and the
endpoint's adaptive limit caps the requests in flight (heldout.agents.openai_http,
heldout.agents.endpoint_limit). The blocking `complete` and `act` make the same calls from any
other thread. What a busy server
does (429, 5xx, dropped connections, timeouts) is retried with backoff; anything else it answers
is an AgentError that quotes the answer, because the rollout records that message as the
episode's error. Each request must be done, whole, within `request_timeout_s`, and every
episode within its wall time (`agent_timeout_s`): the loop gives the single-shot agent what is
left of it, as it gives each turn of a multi-turn one, and no request, retry or backoff goes
past it.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from heldout.agents.openai_http import (
    Sleep,
    Transport,
    excerpt,
    finish_reason_of,
    read_usage,
)
from heldout.agents.openai_settings import OpenAISettings
from heldout.agents.openai_text import extract_code, leaves_fence_open, until_closing_fence
from heldout.agents.openai_turns import OpenAITurnsAgent
from heldout.agents.protocol import AgentContext, Completion
from heldout.errors import AgentError
from heldout.tasks.record import Task

__all__ = ["OpenAIAgent", "OpenAISettings", "OpenAITurnsAgent", "extract_code", "make"]


class OpenAIAgent:
    """`protocol: completion`: one request per episode (no `begin`: the loop submits what
    `complete` returns)."""

    def __init__(
        self,
        settings: OpenAISettings,
        context: AgentContext,
        sleep: Sleep = asyncio.sleep,
    ):
        self._settings = settings
        self._context = context
        self._transport = Transport(settings, sleep)

    def complete(self, task: Task, sample: int, seed: int,
                 deadline_s: float = math.inf) -> Completion:
        """The completion, within `deadline_s` (the episode's wall time left, from the loop):
        the request, its retries and their backoff all end by then, whatever
        `request_timeout_s` and `max_retries` say."""
        prompt = self._context.template.format(prompt=task.prompt)
        reply = self._transport.post_blocking(self._request_body(prompt, seed), deadline_s)
        return self._completion(prompt, reply)

    async def complete_async(self, task: Task, sample: int, seed: int,
                             deadline_s: float = math.inf) -> Completion:
        """`complete`, awaited on the event loop."""
        prompt = self._context.template.format(prompt=task.prompt)
        reply = await self._transport.post(self._request_body(prompt, seed), deadline_s)
        return self._completion(prompt, reply)

    def _completion(self, prompt: str, reply: Any) -> Completion:
        text, finish_reason = self._read(reply)
        if self._settings.endpoint == "completions" and leaves_fence_open(prompt):
            code = until_closing_fence(text)
        else:
            code = extract_code(text)
        usage = read_usage(reply, self._settings)
        return Completion(text=code, finish_reason=finish_reason, tokens_in=usage.tokens_in,
                          tokens_out=usage.tokens_out, cost_usd=usage.cost_usd)

    def close(self) -> None:
        self._transport.close()

    def _request_body(self, prompt: str, seed: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._settings.model,
            "temperature": self._context.temperature,
            "top_p": self._context.top_p,
            "max_tokens": self._context.max_tokens,
            "seed": seed,
        }
        if self._settings.endpoint == "completions":
            body["prompt"] = prompt
            return body
        system = self._settings.system_prompt
        body["messages"] = [
            *([{"role": "system", "content": system}] if system is not None else []),
            {"role": "user", "content": prompt},
        ]
        return body

    def _read(self, reply: Any) -> tuple[str, str]:
        """The reply's raw text and finish reason."""
        chat = self._settings.endpoint == "chat"
        try:
            choice = reply["choices"][0]
            message = choice["message"] if chat else {}
            text = (message.get("content") or "") if chat else choice["text"]
            if not isinstance(text, str):
                raise TypeError(f"the completion text is {type(text).__name__}, not a string")
            return text, finish_reason_of(choice, message)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise AgentError(
                f"POST {self._transport.url} answered JSON that is not a "
                f"{self._settings.endpoint} completion ({type(error).__name__}: {error}): "
                f"{excerpt(str(reply))}"
            ) from None


def make(settings: OpenAISettings, context: AgentContext) -> OpenAIAgent | OpenAITurnsAgent:
    # Unless the checkpoint says otherwise, one request may take the harness's agent budget.
    if "request_timeout_s" not in settings.model_fields_set:
        settings = settings.model_copy(update={"request_timeout_s": context.timeout_s})
    if settings.protocol == "completion":
        return OpenAIAgent(settings, context)
    return OpenAITurnsAgent(settings, context)
