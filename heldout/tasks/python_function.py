"""The `python-function` task kind: the prompt is a function's signature and docstring, the
completion its body, the hidden tests Python that raises if the function is wrong.

The program is judged (heldout/sandbox/roles.py): the candidate process runs the prompt and the
completion and answers calls; the judge process, out of the candidate's reach, defines the
prompt's helpers from the trusted prompt, binds the entry point to a proxy of the candidate's
function and runs the tests. The tests never enter the candidate's process.
"""

from __future__ import annotations

import json

from heldout.sandbox.protocol import Program
from heldout.tasks.kinds import TaskKind
from heldout.tasks.record import Task

# 2: the two-process judge (the tests left the judged process); 1 was the completion marker.
SCORER_VERSION = "python-function/2"


def build_program(task: Task, completion: str) -> Program:
    judge = json.dumps({"prompt": task.prompt, "tests": task.tests,
                        "entry_point": task.entry_point})
    image = task.runtime.image if task.runtime else None
    return Program(source=task.prompt + completion + "\n", judge=judge, group=task.id,
                   image=image)


KIND = TaskKind(scorer_version=SCORER_VERSION, build_program=build_program)
