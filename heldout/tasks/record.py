"""The task record: one evaluation item, its canonical form and its content hash.

A task cannot break a later stage (docs/stages.md, "Inputs that cannot break a stage"): its
text is valid Unicode (no lone surrogate), its id and group are safe as file names and MLflow
tags (no control or format character, no `..` part, no leading `/`), a python-function task's
entry point is a Python identifier, its runtime limits are within sane ranges, and its metadata
is plain JSON data: finite numbers, at most MAX_DEPTH levels deep with the record.
"""

from __future__ import annotations

import keyword
import math
import re
import unicodedata
from datetime import date
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationInfo,
    field_validator,
    model_validator,
)

from heldout.canonical import content_digest, is_safe_text
from heldout.tasks.kinds import DEFAULT_KIND, TASK_KINDS

# How deeply a task record may nest, as JSON (the record itself is the first level).
MAX_DEPTH = 64
TIMEOUT_S = (0.0, 3600.0)  # more than the first, at most the second
MEMORY_MB = (16, 65536)  # inclusive
# Unicode categories an id or group must not hold: control, format (bidi overrides, zero
# width), surrogate, line and paragraph separators.
_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_NAME_REASON = "ids and groups become file names and MLflow tags"


def text_problem(value: str) -> str | None:
    """Why a string is not text (a lone surrogate, which no UTF-8 file can hold), or None."""
    if is_safe_text(value):
        return None
    index = next(i for i, char in enumerate(value) if 0xD800 <= ord(char) <= 0xDFFF)
    return (f"holds a lone surrogate {value[index]!r} at position {index + 1}, which is not "
            "text (an unpaired \\u escape)")


def _valid_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


def _safe_name(value: str) -> str:
    """An id or group: safe as a file name's parts and as an MLflow tag."""
    for index, char in enumerate(value):
        if unicodedata.category(char) in _UNSAFE_CATEGORIES:
            raise ValueError(f"must not contain control characters, found {char!r} at "
                             f"position {index + 1}; {_NAME_REASON}")
    if value.startswith(("/", "\\")):
        raise ValueError(f"must not start with '/' or '\\'; {_NAME_REASON}")
    if ".." in value.replace("\\", "/").split("/"):
        raise ValueError(f"must not have a '..' path part; {_NAME_REASON}")
    return value


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def iso_date_problem(value: str) -> str | None:
    """Why a string is not a calendar date written YYYY-MM-DD, or None."""
    if not _ISO_DATE.fullmatch(value):
        return f"must be a date written YYYY-MM-DD, got {value!r}"
    try:
        date.fromisoformat(value)
    except ValueError as error:
        return f"{value!r} is no calendar date ({error})"
    return None


def _iso_date(value: str) -> str:
    problem = iso_date_problem(value)
    if problem:
        raise ValueError(problem)
    return value


Text = Annotated[str, AfterValidator(_valid_text)]
IsoDate = Annotated[str, AfterValidator(_iso_date)]
NonBlank = Annotated[str, AfterValidator(_not_blank), AfterValidator(_valid_text)]
TaskName = Annotated[NonBlank, AfterValidator(_safe_name)]


def _timeout(value: float | None) -> float | None:
    low, high = TIMEOUT_S
    if value is not None and not low < value <= high:  # False for NaN too
        raise ValueError(f"must be more than {low:g} and at most {high:g} seconds, "
                         f"got {value!r}")
    return value


def _memory(value: int | None) -> int | None:
    low, high = MEMORY_MB
    if value is not None and not low <= value <= high:
        raise ValueError(f"must be between {low} and {high} (MB), got {value!r}")
    return value


def plain_data_problem(value: Any, depth: int) -> str | None:
    """Why a value is not plain JSON data (a non-finite number, a lone surrogate, nesting past
    MAX_DEPTH counting `depth` levels above it), or None. Walks without recursion."""
    stack = [(value, depth + 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"holds the non-finite number {item!r}; numbers must be finite"
        if isinstance(item, str) and text_problem(item):
            return text_problem(item)
        if isinstance(item, dict | list | tuple):
            if level > MAX_DEPTH:
                return f"is nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if isinstance(key, str) and text_problem(key):
                        return f"a field name {text_problem(key)}"
                    stack.append((inner, level + 1))
            else:
                stack.extend((inner, level + 1) for inner in item)
    return None


class TaskRuntime(BaseModel):
    """Per-task overrides of the harness's sandbox settings."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    image: NonBlank | None = None
    timeout_s: Annotated[float | None, AfterValidator(_timeout)] = None
    memory_mb: Annotated[int | None, AfterValidator(_memory)] = None


class Task(BaseModel):
    """One evaluation item. `tests` are hidden from agents and are what scores them."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    id: TaskName
    group: TaskName
    kind: Literal[TASK_KINDS.names] = DEFAULT_KIND
    prompt: NonBlank
    entry_point: NonBlank
    tests: NonBlank
    public_tests: Text | None = None
    reference: Text | None = None
    runtime: TaskRuntime | None = None
    metadata: dict[str, Any] = {}
    # The day the task (its problem, its fix) was made public, YYYY-MM-DD: what the report's
    # by_date section splits the tasks by against a checkpoint's data_cutoff. Not evaluated
    # (heldout.tasks.split._NOT_EVALUATED says why).
    released: IsoDate | None = None

    @field_validator("entry_point")
    @classmethod
    def _a_function_name(cls, value: str, info: ValidationInfo) -> str:
        # A python-function task's entry point is the function the judge calls by name; other
        # kinds say what theirs means.
        if info.data.get("kind") != DEFAULT_KIND:
            return value
        if keyword.iskeyword(value):
            raise ValueError(f"{value!r} is a Python keyword, not a function name")
        if not value.isidentifier():
            raise ValueError(f"must be a Python identifier (the function's name), got {value!r}")
        return value

    @field_validator("metadata")
    @classmethod
    def _plain_data(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = plain_data_problem(value, 1)
        if problem:
            raise ValueError(problem)
        return value

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
