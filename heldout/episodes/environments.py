"""Environments: what an episode's agent acts on, one kind per task kind.

An environment holds the episode's state (for `python-function`: the programs the agent wrote),
offers the tools the harness lists and answers each call with what a developer would see. It
never scores: the hidden tests judge only what the loop (heldout.episodes.loop) hands the judge
when the episode has ended. A task kind that needs more tools brings an environment of its own
with them (`repository`: heldout.episodes.repository_environment, with `read_file`, `edit`,
`run`...); the loop and the agents do not change. `python-program` offers the same two tools
on whole programs, and a public run there lists each failed case (input, expected output, the
program's output).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from heldout.agents.protocol import ToolSpec
from heldout.canonical import safe_strings, safe_text
from heldout.episodes.budgets import ExecLimits
from heldout.episodes.feedback import describe_public_run, feedback_tests
from heldout.episodes.judge import score
from heldout.episodes.repository_environment import RepositoryEnvironment
from heldout.episodes.tool_result import ToolResult
from heldout.errors import SandboxError
from heldout.sandbox.protocol import Sandbox
from heldout.tasks import python_program
from heldout.tasks.record import Task

_CODE = {"type": "object", "properties": {"code": {
    "type": "string", "description": "the function's body, or a whole program that defines it"}},
    "required": ["code"], "additionalProperties": False}

TOOL_SPECS = {
    "run_public_tests": ToolSpec(
        "run_public_tests",
        "Run the task's public tests against this code; returns which asserts failed, the "
        "exception and the program's output. Does not end the episode.", _CODE),
    "submit": ToolSpec(
        "submit", "Submit this code as the final answer; ends the episode.", _CODE),
}

_PROGRAM = {"type": "object", "properties": {"code": {
    "type": "string",
    "description": "the whole program: it reads the input on stdin and prints the answer"}},
    "required": ["code"], "additionalProperties": False}

PROGRAM_TOOL_SPECS = {
    "run_public_tests": ToolSpec(
        "run_public_tests",
        "Run this program on each of the task's public test cases (the case's input on stdin); "
        "returns each failed case's input, expected output and the program's output. Does not "
        "end the episode.", _PROGRAM),
    "submit": ToolSpec(
        "submit", "Submit this program as the final answer; ends the episode.", _PROGRAM),
}


class Environment(Protocol):
    tools: tuple[ToolSpec, ...]

    def opening(self) -> str:
        """What the agent reads before its first turn."""
        ...

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one of `tools` (the loop has checked the name)."""
        ...

    @property
    def last_program(self) -> str | None:
        """The last program the agent gave any tool, or None."""
        ...


@dataclass
class PythonFunctionEnvironment:
    """A `python-function` task: the agent writes the function's body (or a whole program),
    tries it on the public tests as often as its budgets allow, and submits one."""

    task: Task
    sandbox: Sandbox
    limits: ExecLimits
    template: str
    tool_names: tuple[str, ...]
    last_program: str | None = field(default=None, init=False)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return tuple(TOOL_SPECS[name] for name in self.tool_names)

    def opening(self) -> str:
        return self.template.format(prompt=self.task.prompt)

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        code = arguments.get("code")
        if not isinstance(code, str) or set(arguments) != {"code"}:
            return ToolResult(f"{tool} takes one argument, code (a string); got "
                              f"{sorted(arguments)}", {"error": "bad arguments"})
        # What a model writes may hold lone surrogates: the sandbox's pipes take UTF-8 only.
        code = safe_text(code)
        self.last_program = code
        if tool == "submit":
            return ToolResult("Submitted.", {"submitted": True}, submitted=code)
        # What a public run says quotes the program (its output, what it returned, in the
        # judge's reason): made safe before the agent, a pipe or a row sees it.
        result = self._run_public_tests(code)
        return ToolResult(safe_text(result.text), safe_strings(result.data))

    def _run_public_tests(self, code: str) -> ToolResult:
        if not self.task.public_tests:
            return ToolResult("This task has no public tests.", {"passed": None})
        public = self.task.model_copy(update={"tests": feedback_tests(self.task.public_tests)})
        result = score(public, code, self.sandbox, timeout_s=self.limits.timeout_s,
                       memory_mb=self.limits.memory_mb)
        lines = result.stderr_tail.strip().splitlines()
        reason = lines[-1] if lines else ""
        text = describe_public_run(result.passed, result.status, reason, result.stdout_tail)
        return ToolResult(text, {"passed": result.passed, "status": result.status,
                                 "reason": reason[:1000]})


@dataclass
class PythonProgramEnvironment(PythonFunctionEnvironment):
    """A `python-program` task: the agent writes a whole program (stdin to stdout), runs it on
    the public cases as often as its budgets allow, and submits one. A public run lists each
    failed case with its input, the expected output and the program's output, truncated."""

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        return tuple(PROGRAM_TOOL_SPECS[name] for name in self.tool_names)

    def _run_public_tests(self, code: str) -> ToolResult:
        if not self.task.public_tests:
            return ToolResult("This task has no public tests.", {"passed": None})
        public = self.task.model_copy(update={"tests": self.task.public_tests})
        program = python_program.build_program(public, code, reveal=True)
        result = self.sandbox.run(program, timeout_s=self.limits.timeout_s,
                                  memory_mb=self.limits.memory_mb)
        lines = result.stderr_tail.strip().splitlines()
        reason = lines[-1].removeprefix(JUDGE_PREFIX) if lines else ""
        failed = _failed_cases(reason) if not result.passed else None
        data: dict[str, Any] = {"passed": result.passed, "status": result.status}
        if failed is None:
            text = describe_public_run(result.passed, result.status, reason, result.stdout_tail)
            data["reason"] = reason[:1000]
        else:
            text = describe_failed_cases(failed, result.status)
            data["failed_cases"] = [case["case"] for case in failed["cases"]]
        return ToolResult(text, data)


JUDGE_PREFIX = "[heldout judge] "
SHOWN_CHARS = 160  # of each input, expected output and output in a public run's text


def _failed_cases(reason: str) -> dict[str, Any] | None:
    """The judge's JSON account of the failed public cases (python_program.judge_cases), or
    None when the reason is not one (the judge timed out, the sandbox failed)."""
    try:
        failed = json.loads(reason)
    except ValueError:
        return None
    shaped = isinstance(failed, dict) and isinstance(failed.get("cases"), list) and all(
        isinstance(case, dict) for case in failed["cases"])
    return failed if shaped else None


def describe_failed_cases(failed: dict[str, Any], status: str) -> str:
    """The observation text of a public run of a program that failed some cases."""
    def shown(text: object) -> str:
        if not isinstance(text, str):
            return "(no output)"
        return repr(text[:SHOWN_CHARS]) + (" ..." if len(text) > SHOWN_CHARS else "")

    lines = [f"{failed.get('failed')} of {failed.get('total')} public test cases failed"
             + (" (a case timed out)" if status == "timeout" else "") + "."]
    for case in failed["cases"]:
        lines += [f"Case {case.get('case')}: {case.get('why')}",
                  f"  input:    {shown(case.get('input'))}",
                  f"  expected: {shown(case.get('expected'))}",
                  f"  got:      {shown(case.get('got'))}"]
    hidden = int(failed.get("failed") or 0) - len(failed["cases"])
    if hidden > 0:
        lines.append(f"... and {hidden} more failed cases.")
    if failed.get("run") != failed.get("total"):
        lines.append(f"Cases after case {failed.get('run')} were not run.")
    return "\n".join(lines)


EnvironmentFactory = Callable[[Task, Sandbox, ExecLimits, str, tuple[str, ...]], Environment]
ENVIRONMENTS: dict[str, EnvironmentFactory] = {
    "python-function": PythonFunctionEnvironment,
    "python-program": PythonProgramEnvironment,
    "repository": RepositoryEnvironment,
}


def make_environment(task: Task, sandbox: Sandbox, limits: ExecLimits, template: str,
                     tools: tuple[str, ...]) -> Environment:
    if task.kind not in ENVIRONMENTS:
        raise SandboxError(f"task {task.id}: no environment for kind {task.kind!r}")
    return ENVIRONMENTS[task.kind](task, sandbox, limits, template, tools)
