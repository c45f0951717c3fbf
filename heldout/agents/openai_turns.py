"""Multi-turn episodes for `agent: openai` (`protocol: tools` or `protocol: text`).

Each `Session.act` is one chat request, the whole conversation so far, and its reply is one
Action. Every request asks for `max_tokens` = the harness's max_tokens, or what is left of the
episode's token budget if less (at least 1: a request for nothing is refused by servers, and
the one token it may spend ends the episode as `max_tokens`); its `seed` is the turn's
(observation.seed), so two checkpoints draw the same random numbers at every turn of the same
episode; temperature and top_p are the harness's. Each request must be done within what is
left of the episode's wall time (heldout.agents.openai_http).

`tools`: native tool calling. The request carries the episode's tools; the reply's
`message.tool_calls[0]` is the action (its `function.arguments` a JSON object as a string), and
its result goes back as a `tool` message for that call's id. Only the first tool call of a
reply is run: every other call of it is answered "only one tool call per turn is run; this one
was not". The assistant message is kept in the conversation as the server sent it (a call
without an id is given one, `call_<turn>_<index>`, so its answer can name it). Arguments that
are not JSON, or not a JSON object, are an Action with a `problem`: the model is told and the
episode goes on. A reply without a tool call is an Action with tool None; what the episode says
to it goes back as a user message.

`text`: for servers without tool calling; the protocol is heldout.agents.openai_text's. The
first message explains it before the task; every observation goes back as a user message.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from heldout.agents.openai_http import (
    Sleep,
    Transport,
    Usage,
    excerpt,
    finish_reason_of,
    read_usage,
)
from heldout.agents.openai_settings import OpenAISettings
from heldout.agents.openai_text import REMINDER, read_text_action, text_instruction
from heldout.agents.protocol import Action, AgentContext, EpisodeBrief, Observation
from heldout.errors import AgentError
from heldout.tasks.record import Task

NOT_RUN = "Only one tool call per turn is run; this one was not."


class OpenAITurnsAgent:
    """The `openai` agent with `protocol: tools` or `text`: one Transport (its client, under
    the endpoint's adaptive limit) shared by every session."""

    def __init__(self, settings: OpenAISettings, context: AgentContext,
                 sleep: Sleep = asyncio.sleep):
        self._settings = settings
        self._context = context
        self._transport = Transport(settings, sleep)

    def begin(self, task: Task, sample: int, seed: int, brief: EpisodeBrief) -> _Session:
        kind = ToolsSession if self._settings.protocol == "tools" else TextSession
        return kind(self._settings, self._context, self._transport, task, seed, brief)

    def close(self) -> None:
        self._transport.close()


class _Session:
    """One episode's conversation; `close` releases nothing shared."""

    def __init__(self, settings: OpenAISettings, context: AgentContext, transport: Transport,
                 task: Task, seed: int, brief: EpisodeBrief):
        self._settings, self._context, self._transport = settings, context, transport
        self._brief, self._seed = brief, seed
        self._opening = context.template.format(prompt=task.prompt)
        system = settings.system_prompt
        self.messages: list[dict[str, Any]] = (
            [{"role": "system", "content": system}] if system is not None else [])
        self._turn = 0
        self._pending: list[str] = []  # the ids of the tool calls the next observation answers

    def act(self, observation: Observation | None, deadline_s: float) -> Action:
        return self._reply(self._transport.post_blocking(self._request(observation), deadline_s))

    async def act_async(self, observation: Observation | None, deadline_s: float) -> Action:
        """`act`, awaited on the event loop."""
        return self._reply(await self._transport.post(self._request(observation), deadline_s))

    def _request(self, observation: Observation | None) -> dict[str, Any]:
        """The next request: the conversation so far, with this observation's answer."""
        self._turn += 1
        if self._turn == 1:
            text = observation.text if observation is not None else self._opening
            self.messages.append({"role": "user", "content": self._first_message(text)})
        elif observation is not None:
            self._answer(observation)
        remaining = observation.remaining if observation is not None else self._brief.budgets
        tokens_left = remaining.get("tokens", self._context.max_tokens)
        return {
            "model": self._settings.model,
            "messages": self.messages,
            "temperature": self._context.temperature,
            "top_p": self._context.top_p,
            "max_tokens": max(1, int(min(self._context.max_tokens, tokens_left))),
            "seed": observation.seed if observation is not None else self._seed,
            **self._extra_body(),
        }

    def _reply(self, reply: Any) -> Action:
        try:
            choice = reply["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError(f"the message content is {type(content).__name__}")
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            raise AgentError(
                f"POST {self._transport.url} answered JSON that is not a chat completion "
                f"({type(error).__name__}: {error}): {excerpt(str(reply))}") from None
        usage = read_usage(reply, self._settings)
        return self._action(message, content, finish_reason_of(choice, message), usage)

    def close(self) -> None:
        pass

    def _first_message(self, text: str) -> str:
        return text

    def _extra_body(self) -> dict[str, Any]:
        return {}

    def _answer(self, observation: Observation) -> None:
        self.messages.append({"role": "user", "content": observation.text})

    def _action(self, message: dict[str, Any], content: str, finish: str, usage: Usage) -> Action:
        raise NotImplementedError


class ToolsSession(_Session):
    """`protocol: tools`: native tool calling."""

    def _extra_body(self) -> dict[str, Any]:
        return {"tools": [tool.as_openai() for tool in self._brief.tools]}

    def _answer(self, observation: Observation) -> None:
        if not self._pending:
            super()._answer(observation)
            return
        first, *others = self._pending
        self.messages.append({"role": "tool", "tool_call_id": first, "content": observation.text})
        self.messages += [{"role": "tool", "tool_call_id": other, "content": NOT_RUN}
                          for other in others]

    def _action(self, message: dict[str, Any], content: str, finish: str, usage: Usage) -> Action:
        counts = {"message": content, "finish_reason": finish, "tokens_in": usage.tokens_in,
                  "tokens_out": usage.tokens_out, "cost_usd": usage.cost_usd}
        calls = message.get("tool_calls") or []
        self._pending = []
        if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
            self.messages.append({"role": "assistant", "content": content})
            return Action(None, problem="The reply's tool_calls were not a list of tool calls; "
                          "call one tool per turn.", **counts)
        kept = copy.deepcopy(message)
        for index, call in enumerate(kept.get("tool_calls") or []):
            if not isinstance(call.get("id"), str) or not call["id"]:
                call["id"] = f"call_{self._turn}_{index}"
            self._pending.append(call["id"])
        self.messages.append(kept)
        if not calls:
            return Action(None, **counts)
        function = calls[0].get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            return Action(None, problem="The tool call names no function; call one of the "
                          "tools by its name.", call_id=self._pending[0], **counts)
        arguments, problem = _arguments(name, function.get("arguments"))
        return Action(name, arguments, problem=problem, call_id=self._pending[0], **counts)


def _arguments(name: str, raw: Any) -> tuple[dict[str, Any], str]:
    """The arguments of a tool call (a JSON object, sent as a string), or what is wrong."""
    if isinstance(raw, dict):  # some servers send the object itself
        return raw, ""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, ""
    if not isinstance(raw, str):
        return {}, (f"The arguments of {name[:100]} must be a JSON object as a string, not "
                    f"{type(raw).__name__}; the call was not run.")
    try:
        value = json.loads(raw)
    except ValueError as error:
        return {}, (f"The arguments of {name[:100]} are not JSON ({error}): "
                    f"{excerpt(raw, 200)}; the call was not run.")
    if not isinstance(value, dict):
        return {}, (f"The arguments of {name[:100]} must be a JSON object, not "
                    f"{type(value).__name__}; the call was not run.")
    return value, ""


class TextSession(_Session):
    """`protocol: text`: the action is a line `ACTION: <tool>` after a fenced python block."""

    def _first_message(self, text: str) -> str:
        return text_instruction(self._brief.tools) + text

    def _answer(self, observation: Observation) -> None:
        text = observation.text
        if observation.tool is None or observation.data.get("error") == "malformed call":
            text = f"{text}\n{REMINDER}"
        self.messages.append({"role": "user", "content": text})

    def _action(self, message: dict[str, Any], content: str, finish: str, usage: Usage) -> Action:
        self.messages.append({"role": "assistant", "content": content})
        tool, arguments, problem = read_text_action(content)
        return Action(tool, arguments, message=content, finish_reason=finish,
                      tokens_in=usage.tokens_in, tokens_out=usage.tokens_out,
                      cost_usd=usage.cost_usd, problem=problem)
