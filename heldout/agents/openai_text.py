"""Reading code and actions out of a model's text.

`extract_code` takes the program out of a single-shot reply. The `text` protocol (a multi-turn
episode with a server that has no tool calling) asks the model, in its first message, to end
every reply with its code in a fenced python block followed by a line that names the action:

    ```python
    def add(a, b):
        return a + b
    ```
    ACTION: run_public_tests

The last `ACTION: <tool>` line outside a code block counts (case and markdown emphasis around
it are ignored, the tool's name is read in lower case), with the last python (or untagged)
block before it as the tool's `code`. A reply without such a line calls no tool; a line whose
tool gets no block is a call that could not be read (the model is told why).
"""

from __future__ import annotations

import re
from typing import Any

from heldout.agents.protocol import ToolSpec

_FENCE = re.compile(r"[ \t]*```[ \t]*([^\s`]*)")
_CLOSING_FENCE = re.compile(r"[ \t]*```[ \t]*$")
_PYTHON_TAGS = {"python", "python3", "py"}
_ACTION_LINE = re.compile(r"[\s*`]*ACTION[\s*`]*:[\s*`]*([A-Za-z_][A-Za-z0-9_]*)[\s*`.]*",
                          re.IGNORECASE)

TEXT_PROTOCOL = """\
You work in turns. End every reply with your code in one fenced python block, followed by one \
line that names the action to take with it, like this:

```python
<the function's body, or a whole program that defines it>
```
ACTION: <one of the actions below>

The actions:
{actions}

Only the last ACTION line of a reply counts, with the last python block before it. After each \
action you are told its result. A reply without an ACTION line does nothing.

The task:

"""
REMINDER = "(End your reply with a fenced python block and a line `ACTION: <action>`.)"


def text_instruction(tools: tuple[ToolSpec, ...]) -> str:
    """What the first message of a `text` episode says before the task."""
    actions = "\n".join(f"- {tool.name}: {tool.description}" for tool in tools)
    return TEXT_PROTOCOL.format(actions=actions)


def read_text_action(reply: str) -> tuple[str | None, dict[str, Any], str]:
    """(tool, arguments, problem) of a `text` reply; tool None when it names no action."""
    blocks, actions = _walk(reply)
    if not actions:
        return None, {}, ""
    line, tool = actions[-1]
    code = next((code for end, tag, code in reversed(blocks)
                 if end < line and (tag in _PYTHON_TAGS or tag == "")), None)
    if code is None:
        return tool, {}, (f"ACTION: {tool} was not run: it needs the code in a fenced python "
                          "block (```python ... ```) before the ACTION line, and there was none.")
    return tool, {"code": code}, ""


def extract_code(reply: str) -> str:
    """The first ```python block of a reply, else its first bare ``` block, else the reply as it
    is. A block left open (a reply cut by max_tokens) runs to the end of the reply."""
    blocks = _walk(reply)[0]
    for tags in (_PYTHON_TAGS, {""}):
        for _end, tag, code in blocks:
            if tag in tags:
                return code
    return reply


def _walk(text: str) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """The fenced blocks of `text`, each (number of its last line, language tag in lower case,
    code), in order; and its ACTION lines outside the blocks, each (line number, tool)."""
    blocks: list[tuple[int, str, str]] = []
    actions: list[tuple[int, str]] = []
    tag: str | None = None
    lines: list[str] = []
    number = -1
    for number, line in enumerate(text.splitlines()):
        if tag is None:
            opening = _FENCE.match(line)
            action = _ACTION_LINE.fullmatch(line)
            if opening:
                tag, lines = opening.group(1).lower(), []
            elif action:
                actions.append((number, action.group(1).lower()))
        elif _CLOSING_FENCE.match(line):
            blocks.append((number, tag, "".join(f"{code}\n" for code in lines)))
            tag = None
        else:
            lines.append(line)
    if tag is not None:
        blocks.append((number, tag, "".join(f"{code}\n" for code in lines)))
    return blocks, actions


def leaves_fence_open(prompt: str) -> bool:
    return sum(1 for line in prompt.splitlines() if _FENCE.match(line)) % 2 == 1


def until_closing_fence(reply: str) -> str:
    """A completion that continues a prompt's open code block: the code ends where the block
    does, and what follows it is prose."""
    lines = reply.splitlines(keepends=True)
    for number, line in enumerate(lines):
        if _CLOSING_FENCE.match(line):
            return "".join(lines[:number])
    return reply
