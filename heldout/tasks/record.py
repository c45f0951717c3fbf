"""The task record: one evaluation item, its canonical form and its content hash."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from heldout.canonical import content_digest
from heldout.tasks.kinds import DEFAULT_KIND, TASK_KINDS


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
    kind: Literal[TASK_KINDS.names] = DEFAULT_KIND
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
