"""Tiny offline verifiers v1 taskset (+ in-process harness) for fixture generation.

Taskset id: ``arith-fixture`` (verifiers imports it as module ``arith_fixture``; put
this file's directory on PYTHONPATH). Exports via ``__all__``:

* ``ArithTaskset`` - 8 arithmetic questions, each with an ``answer`` and a
  ``family`` (add / sub / mul / div) on the task data.
* ``ArithHarness`` - a minimal harness that runs IN-PROCESS (no uv / no sandbox):
  one chat-completions call through verifiers' interception ``endpoint`` with the
  rollout ``secret``, no SDK retries. Because the taskset module exports a Harness
  subclass, verifiers picks it as the taskset's default harness (harness id
  ``arith-fixture``). The built-in ``null``/``bash`` harnesses would need ``uv`` to
  build a PEP 723 script environment from the network, which is unavailable here.

Scoring: reward ``correct`` (1.0 if the last integer in the reply equals the answer,
else 0.0, weight 1.0) and metric ``parsed`` (1.0 if the reply contains an integer).
"""

from __future__ import annotations

import re

import httpx

import verifiers.v1 as vf
from verifiers.v1.types import content_text

__all__ = ["ArithTaskset", "ArithHarness"]

# (question, answer, family) - 8 examples, 4 families (2 each). Kept at 8 (not 10)
# so the three fixture runs' traces.jsonl stay under 200 KB together (~3.2 KB/record).
QUESTIONS: list[tuple[str, int, str]] = [
    ("What is 12 + 7?", 19, "add"),
    ("What is 45 + 38?", 83, "add"),
    ("What is 50 - 17?", 33, "sub"),
    ("What is 91 - 46?", 45, "sub"),
    ("What is 6 * 7?", 42, "mul"),
    ("What is 13 * 12?", 156, "mul"),
    ("What is 144 / 12?", 12, "div"),
    ("What is 81 / 9?", 9, "div"),
]

INT_RE = re.compile(r"-?\d+")


class ArithData(vf.TaskData):
    answer: int
    """Reference answer."""
    family: str
    """Question family: add / sub / mul / div."""


class ArithTask(vf.Task[ArithData]):
    NEEDS_CONTAINER = False

    @staticmethod
    def _reply(trace: vf.Trace) -> str:
        for message in reversed(trace.messages):
            if getattr(message, "role", None) == "assistant":
                return content_text(message.content)
        return ""

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        found = INT_RE.findall(self._reply(trace))
        return 1.0 if found and int(found[-1]) == self.data.answer else 0.0

    @vf.metric
    async def parsed(self, trace: vf.Trace) -> float:
        return 1.0 if INT_RE.search(self._reply(trace)) else 0.0


class ArithConfig(vf.TasksetConfig):
    num_tasks: int = 8
    """How many of the 8 questions to build."""


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self) -> list[ArithTask]:
        return [
            ArithTask(
                ArithData(
                    id=f"arith-{i:03d}",
                    name=f"{family}-{i}",
                    prompt=question,
                    answer=answer,
                    family=family,
                ),
                self.config.task,
            )
            for i, (question, answer, family) in enumerate(
                QUESTIONS[: self.config.num_tasks]
            )
        ]


class ArithHarnessConfig(vf.HarnessConfig):
    id: str = "arith-fixture"


class ArithHarness(vf.Harness[ArithHarnessConfig]):
    """One model call, in-process, through the interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False
    SUPPORTS_RESUME = True

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            for m in prompt or []:
                messages.append({"role": m.role, "content": content_text(m.content)})
        async with httpx.AsyncClient(timeout=60) as client:
            resp = await client.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                headers={"Authorization": f"Bearer {secret}"},
                json={"model": ctx.model, "messages": messages},
            )
        if resp.status_code >= 400:
            # Non-zero exit: verifiers re-raises the interception's stashed
            # ProviderError as the rollout's error (not a HarnessError).
            return vf.ProgramResult(
                exit_code=1, stdout="", stderr=f"HTTP {resp.status_code}: {resp.text}"
            )
        return vf.ProgramResult(exit_code=0, stdout=resp.text, stderr="")
