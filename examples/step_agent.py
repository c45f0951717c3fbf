#!/usr/bin/env python3
"""An example step agent for heldout's `command` kind (`protocol: steps`): JSON Lines on
stdin and stdout, standard library only. Plug it in (params.yaml, run from the project root):

    checkpoints:
      my_agent: {agent: command, protocol: steps, command: [python, examples/step_agent.py]}

with `harness.max_turns` of 3 or more, so it has turns to test and revise.

Its policy (examples/python_step_agent.py is the same policy as a Python generator):
1. a draft: `return <expr>` when the docstring says "Return <expr>." of the parameters,
   else `pass`;
2. run the public tests on the draft; if they pass, or the task has none, submit it;
3. else revise once: answer each public example it can read (`assert f(...) == value`), then
   fall back to the draft; run the public tests on the revision and submit it.
The revision passes the public tests by memorising them, so a hidden test it has not seen
still fails: the overfitting that heldout's public-versus-hidden alarm is there to catch.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import sys
from typing import Any

RETURN = re.compile(r"^\s*Return (.+?)\.?\s*$")


def signature(view: dict[str, Any]) -> tuple[str, list[str], str] | None:
    """The body's indentation, the parameters and the docstring of the task's function."""
    for source in (view["prompt"], view["prompt"] + "\n    pass\n"):
        try:
            module = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef) and node.name == view["entry_point"]:
                params = [a.arg for a in node.args.posonlyargs + node.args.args]
                return " " * (node.col_offset + 4), params, ast.get_docstring(node) or ""
    return None


def draft(view: dict[str, Any]) -> str:
    """`return <expr>` from a "Return <expr>." line of the docstring, else `pass`."""
    found = signature(view)
    indent = found[0] if found else "    "
    if found:
        _, params, docstring = found
        for line in docstring.splitlines():
            match = RETURN.match(line)
            if not match:
                continue
            try:
                expression = ast.parse(match.group(1), mode="eval")
            except SyntaxError:
                continue
            names = {n.id for n in ast.walk(expression) if isinstance(n, ast.Name)}
            if names <= set(params) | set(dir(builtins)):
                return f"{indent}return {match.group(1)}\n"
    return f"{indent}pass\n"


def public_examples(view: dict[str, Any]) -> list[tuple[tuple, Any]]:
    """(arguments, expected) of each public `assert f(literal, ...) == literal`."""
    try:
        module = ast.parse(view.get("public_tests") or "")
    except SyntaxError:
        return []
    examples = []
    for node in module.body:
        test = node.test if isinstance(node, ast.Assert) else None
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq) and isinstance(test.left, ast.Call)
                and isinstance(test.left.func, ast.Name)
                and test.left.func.id == view["entry_point"] and not test.left.keywords):
            continue
        try:
            arguments = tuple(ast.literal_eval(a) for a in test.left.args)
            examples.append((arguments, ast.literal_eval(test.comparators[0])))
        except ValueError:
            continue
    return examples


def revision(view: dict[str, Any], body: str) -> str:
    """The public examples answered one by one, then `body` for everything else."""
    found = signature(view)
    if not found:
        return body
    indent, params, _ = found
    given = f"({params[0]},)" if len(params) == 1 else f"({', '.join(params)})"
    lines = []
    for arguments, expected in public_examples(view):
        if len(arguments) == len(params) and params:
            lines += [f"{indent}if {given} == {arguments!r}:",
                      f"{indent}    return {expected!r}"]
    return "\n".join(lines) + "\n" + body if lines else body


def offers(task: dict[str, Any], tool: str) -> bool:
    return any(spec["name"] == tool for spec in task["tools"])


# --- the protocol: one JSON object per line, in and out ------------------------------------


def read() -> dict[str, Any]:
    """The next message from heldout. On "end", or when stdin closes (heldout ended the
    episode, or was killed), the agent has nothing left to do: it exits."""
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    message = json.loads(line)
    if message["type"] == "end":
        sys.exit(0)
    return message


def call(tool: str, code: str, why: str) -> dict[str, Any]:
    """One turn: the action on stdout (flushed), then the observation heldout answers with."""
    action = {"tool": tool, "arguments": {"code": code}, "message": why}
    sys.stdout.write(json.dumps(action) + "\n")
    sys.stdout.flush()
    return read()


def main() -> None:
    task = read()                      # {"type": "task", "task": {...}, "tools", "budgets"}
    view = task["task"]
    observation = read()               # turn 1: the prompt under the harness template
    print(f"episode {view['id']} sample {view['sample']}", file=sys.stderr)  # logs: stderr
    body = draft(view)
    # Test only with a turn to spare for the submit (a budget's end scores nothing).
    if offers(task, "run_public_tests") and observation["remaining"].get("turns", 9) >= 2:
        observation = call("run_public_tests", body, "the draft, from the docstring")
        if observation["data"].get("passed") is False:
            revised = revision(view, body)
            if revised != body and observation["remaining"].get("turns", 9) >= 2:
                body = revised
                observation = call("run_public_tests", body, "revised: the public examples")
    call("submit", body, "final")      # no observation follows a submit: the next line is end


if __name__ == "__main__":
    main()
