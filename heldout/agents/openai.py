"""`openai`: any OpenAI-compatible server (vLLM, TGI, SGLang, llama.cpp, Ollama) over plain HTTP.

The rollout stage calls `complete` from a thread pool, so one agent holds one shared client and a
semaphore that caps the requests in flight. What a busy server does (429, 5xx, dropped
connections, timeouts) is retried with backoff; anything else it answers is an AgentError that
quotes the answer, because the rollout records that message as the episode's error.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx
from pydantic import (
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    ValidationInfo,
    field_validator,
)

from heldout.agents.protocol import AgentContext, AgentSettings, Completion
from heldout.errors import AgentError
from heldout.tasks.record import NonBlank, Task

_ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FENCE = re.compile(r"[ \t]*```[ \t]*([^\s`]*)")
_CLOSING_FENCE = re.compile(r"[ \t]*```[ \t]*$")
_PYTHON_TAGS = {"python", "python3", "py"}
_HINTS = {
    401: "check api_key_env and the key it holds",
    403: "check api_key_env and the key it holds",
    404: "check base_url (it ends at the API version, e.g. http://localhost:8000/v1) and model",
}


class OpenAISettings(AgentSettings):
    """`params.checkpoints.<name>` for `agent: openai`."""

    base_url: str
    model: NonBlank
    api_key_env: str | None = None
    endpoint: Literal["chat", "completions"] = "chat"
    concurrency: PositiveInt = 8
    request_timeout_s: PositiveFloat = 300.0
    max_retries: NonNegativeInt = 5
    backoff_base_s: NonNegativeFloat = 1.0
    backoff_max_s: NonNegativeFloat = 60.0
    system_prompt: str | None = None

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


class _Transient(Exception):
    """A failure worth another attempt; `retry_after` is the wait the server asked for."""

    def __init__(self, answer: str, retry_after: float | None = None):
        super().__init__(answer)
        self.retry_after = retry_after


class OpenAIAgent:
    def __init__(
        self,
        settings: OpenAISettings,
        context: AgentContext,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self._settings = settings
        self._context = context
        self._sleep = sleep
        path = "chat/completions" if settings.endpoint == "chat" else "completions"
        self._url = f"{settings.base_url}/{path}"
        headers = {}
        if settings.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ[settings.api_key_env]}"
        self._client = httpx.Client(
            headers=headers,
            timeout=settings.request_timeout_s,
            limits=httpx.Limits(
                max_connections=settings.concurrency,
                max_keepalive_connections=settings.concurrency,
            ),
        )
        self._slots = threading.BoundedSemaphore(settings.concurrency)
        # A private generator: jitter drawn from the global one would shift the random numbers
        # of anything else in the process that seeded it.
        self._jitter = random.Random()

    def complete(self, task: Task, sample: int, seed: int) -> Completion:
        prompt = self._context.template.format(prompt=task.prompt)
        reply = self._post(self._request_body(prompt, seed))
        completion = self._read(reply)
        if self._settings.endpoint == "completions" and _leaves_fence_open(prompt):
            code = _until_closing_fence(completion.text)
        else:
            code = extract_code(completion.text)
        return replace(completion, text=code)

    def close(self) -> None:
        self._client.close()

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

    def _post(self, body: dict[str, Any]) -> Any:
        attempts = self._settings.max_retries + 1
        for attempt in range(attempts):
            try:
                return self._post_once(body)
            except _Transient as failure:
                last_failure = failure
                if attempt + 1 < attempts:
                    self._sleep(self._backoff(attempt, failure.retry_after))
        raise AgentError(
            f"POST {self._url}: no usable answer in {attempts} attempts; the last: {last_failure}"
        )

    def _post_once(self, body: dict[str, Any]) -> Any:
        with self._slots:
            try:
                response = self._client.post(self._url, json=body)
            except httpx.TimeoutException as error:
                raise _Transient(
                    f"no answer within {self._settings.request_timeout_s:g} s "
                    f"({type(error).__name__})"
                ) from error
            except httpx.TransportError as error:
                raise _Transient(f"connection failed ({type(error).__name__}: {error})") from error
        status = response.status_code
        if status in (408, 429) or status >= 500:
            retry_after = _retry_after(response, self._settings.backoff_max_s)
            raise _Transient(_describe(response), retry_after)
        if not response.is_success:
            hint = _HINTS.get(status, "the server refused the request itself, so it is not retried")
            raise AgentError(f"POST {self._url} answered {_describe(response)}; {hint}")
        try:
            return response.json()
        except ValueError:
            raise AgentError(
                f"POST {self._url} answered HTTP {status} with malformed JSON: "
                f"{_excerpt(response.text)}"
            ) from None

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        ceiling = min(self._settings.backoff_max_s, self._settings.backoff_base_s * 2**attempt)
        # Threads that failed together must not all come back together.
        return self._jitter.uniform(ceiling / 2, ceiling)

    def _read(self, reply: Any) -> Completion:
        """The reply's raw text, finish reason and token counts."""
        chat = self._settings.endpoint == "chat"
        try:
            choice = reply["choices"][0]
            message = choice["message"] if chat else {}
            text = (message.get("content") or "") if chat else choice["text"]
            usage = reply.get("usage") or {}
            tokens_in = int(usage.get("prompt_tokens") or 0)
            tokens_out = int(usage.get("completion_tokens") or 0)
            if not isinstance(text, str):
                raise TypeError(f"the completion text is {type(text).__name__}, not a string")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            raise AgentError(
                f"POST {self._url} answered JSON that is not a {self._settings.endpoint} "
                f"completion ({type(error).__name__}: {error}): {_excerpt(str(reply))}"
            ) from None
        finish = choice.get("finish_reason")
        if finish == "content_filter" or message.get("refusal"):
            finish_reason = "refused"
        elif finish == "length":
            finish_reason = "length"
        else:
            finish_reason = "stop"
        return Completion(
            text=text, finish_reason=finish_reason, tokens_in=tokens_in, tokens_out=tokens_out
        )


def make(settings: OpenAISettings, context: AgentContext) -> OpenAIAgent:
    # Unless the checkpoint says otherwise, one request may take the harness's agent budget.
    if "request_timeout_s" not in settings.model_fields_set:
        settings = settings.model_copy(update={"request_timeout_s": context.timeout_s})
    return OpenAIAgent(settings, context)


def extract_code(reply: str) -> str:
    """The first ```python block of a reply, else its first bare ``` block, else the reply as it
    is. A block left open (a reply cut by max_tokens) runs to the end of the reply."""
    blocks = _fenced_blocks(reply)
    for tags in (_PYTHON_TAGS, {""}):
        for tag, code in blocks:
            if tag in tags:
                return code
    return reply


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag in lower case, code) of each fenced block, in order."""
    blocks: list[tuple[str, str]] = []
    tag: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        if tag is None:
            opening = _FENCE.match(line)
            if opening:
                tag, lines = opening.group(1).lower(), []
        elif _CLOSING_FENCE.match(line):
            blocks.append((tag, "".join(f"{code}\n" for code in lines)))
            tag = None
        else:
            lines.append(line)
    if tag is not None:
        blocks.append((tag, "".join(f"{code}\n" for code in lines)))
    return blocks


def _leaves_fence_open(prompt: str) -> bool:
    return sum(1 for line in prompt.splitlines() if _FENCE.match(line)) % 2 == 1


def _until_closing_fence(reply: str) -> str:
    """A completion that continues a prompt's open code block: the code ends where the block
    does, and what follows it is prose."""
    lines = reply.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if _CLOSING_FENCE.match(line):
            return "".join(lines[:number])
    return reply


def _retry_after(response: httpx.Response, cap: float) -> float | None:
    """Seconds the server asked us to wait (Retry-After on 429 and 503), at most `cap`."""
    value = response.headers.get("Retry-After", "").strip()
    if response.status_code not in (429, 503) or not value:
        return None
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), cap)


def _describe(response: httpx.Response) -> str:
    return f"HTTP {response.status_code}: {_excerpt(response.text)}"


def _excerpt(text: str, limit: int = 500) -> str:
    flat = " ".join(text.split())
    if not flat:
        return "(empty body)"
    return flat if len(flat) <= limit else f"{flat[:limit]}..."
