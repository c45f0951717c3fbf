"""What decontamination scans: the train split and the training corpora (JSONL files named in
params.yaml), read as a stream of training items."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from heldout.errors import InputFileError, Problem
from heldout.json_lines import json_error
from heldout.tasks.record import Task

TRAIN_SPLIT_SOURCE = "train-split"


class TrainingCorpus(BaseModel):
    """One JSONL file the team trains on: which fields hold the text, which the id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    fields: list[str] = Field(min_length=1)
    id_field: str = "id"
    group_field: str | None = None


@dataclass(frozen=True)
class TrainingItem:
    """One training example, its text fields by name; `line` is its line in a corpus file."""

    source: str
    id: str
    fields: dict[str, str]
    group: str | None = None
    line: int | None = None


def task_items(tasks: Iterable[Task]) -> Iterator[TrainingItem]:
    """The train split as training items: every text a task holds, and its group."""
    for task in tasks:
        texts = {"prompt": task.prompt, "reference": task.reference or "", "tests": task.tests}
        yield TrainingItem(TRAIN_SPLIT_SOURCE, task.id, texts, task.group)


def corpus_items(path: Path, corpus: TrainingCorpus) -> Iterator[TrainingItem]:
    """A training corpus, one item a line, streamed. A missing or null text field is empty;
    bad lines are all reported at once at the end, naming line and field."""
    problems: list[Problem] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                problems.append(Problem(number, None, f"invalid JSON: {json_error(error)}"))
                continue
            item = _corpus_item(record, number, corpus, problems)
            if item is not None:
                yield item
    if problems:
        raise InputFileError(path, problems, hint=(
            f"params.yaml decontaminate.training_corpora names the text fields "
            f"{corpus.fields} and the id field '{corpus.id_field}' of this file."))


def _corpus_item(record: Any, number: int, corpus: TrainingCorpus,
                 problems: list[Problem]) -> TrainingItem | None:
    if not isinstance(record, dict):
        problems.append(Problem(number, None, "expected a JSON object"))
        return None
    identifier = record.get(corpus.id_field)
    if not isinstance(identifier, str | int) or isinstance(identifier, bool):
        problems.append(Problem(number, corpus.id_field, "missing, or not a string or integer"))
        return None
    texts = {}
    for name in corpus.fields:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            problems.append(Problem(number, name, "expected a string"))
            return None
        texts[name] = value or ""
    group = record.get(corpus.group_field) if corpus.group_field else None
    return TrainingItem(corpus.path, str(identifier), texts,
                        None if group is None else str(group), number)

