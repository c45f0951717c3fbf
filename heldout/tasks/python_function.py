"""The `python-function` task kind: the prompt is a function's signature and docstring, the
completion its body, the hidden tests Python that raises if the function is wrong.

The program is the scorer's prelude (heldout/sandbox/prelude.py) with the solution (prompt +
completion) and the tests in place of its placeholders, as string literals.
"""

from __future__ import annotations

from pathlib import Path

from heldout.sandbox import prelude
from heldout.sandbox.protocol import Program
from heldout.tasks.kinds import TaskKind
from heldout.tasks.record import Task

SCORER_VERSION = "python-function/1"

_PRELUDE = Path(prelude.__file__).read_text(encoding="utf-8")
# The one line of the prelude that receives the program's text (prelude.py).
_PLACEHOLDERS = "solution, tests = HELDOUT_SOLUTION, HELDOUT_TESTS"
assert _PRELUDE.count(_PLACEHOLDERS) == 1


def build_program(task: Task, completion: str, nonce: str) -> Program:
    solution = task.prompt + completion + "\n"
    # str.replace is one pass: text inside the literals is never read as a placeholder.
    source = _PRELUDE.replace(_PLACEHOLDERS, f"solution, tests = {solution!r}, {task.tests!r}")
    image = task.runtime.image if task.runtime else None
    return Program(source=source + "\n_heldout_main()\n", stdin=nonce, group=task.id, image=image)


KIND = TaskKind(scorer_version=SCORER_VERSION, build_program=build_program)
