"""Split tasks into train / val / test by a salted hash of their group key.

A group's split depends only on (salt, group), never on position or on the other tasks, so
adding tasks never moves an existing one, and variants of one template never straddle splits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from heldout.canonical import content_digest, jsonl_bytes, sha256_hex
from heldout.errors import SplitError
from heldout.tasks.families import HoldOut, deal_by_family, family_counts, split_kind_words
from heldout.tasks.record import Task

SPLITS = ("train", "val", "test")
EVAL_SPLITS = ("val", "test")
_FRACTION_TOLERANCE = 1e-9


class SplitConfig(BaseModel):
    """`params.split`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    salt: str = Field(min_length=1)
    fractions: dict[str, float]
    ngram: int = Field(default=13, ge=1, description="word n-gram length of the fingerprints")
    # Unset: the variant split, and the manifest and digests of before it (heldout.tasks.families).
    hold_out: HoldOut | None = None


def group_position(salt: str, group: str) -> float:
    """A uniform number in [0, 1) fixed by (salt, group): sha256, so no PYTHONHASHSEED, no
    platform and no Python version can change it."""
    digest = hashlib.sha256(f"{salt}\x00{group}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def check_fractions(fractions: Mapping[str, float]) -> None:
    keys = set(fractions)
    if keys != set(SPLITS):
        missing = ", ".join(s for s in SPLITS if s not in keys) or "none"
        extra = ", ".join(sorted(keys - set(SPLITS))) or "none"
        raise SplitError(
            f"split.fractions must name exactly train, val and test (missing: {missing}; "
            f"unknown: {extra})"
        )
    for name in SPLITS:
        if not 0 < fractions[name] < 1:
            raise SplitError(
                f"split.fractions.{name} is {fractions[name]}: each fraction must lie strictly "
                "between 0 and 1, or that split is empty"
            )
    total = sum(fractions.values())
    if abs(total - 1) > _FRACTION_TOLERANCE:
        raise SplitError(
            f"split.fractions sum to {total:.6g}, not 1 "
            f"(train {fractions['train']}, val {fractions['val']}, test {fractions['test']})"
        )


def assign(tasks: list[Task], salt: str, fractions: Mapping[str, float],
           hold_out: HoldOut | None = None) -> dict[str, list[Task]]:
    """Tasks of each split, each list sorted by id. Refuses fractions that do not sum to 1 or
    that leave a split empty on these tasks. `hold_out` deals the families it names to test
    whole and the rest within their families (heldout.tasks.families)."""
    check_fractions(fractions)
    upper_bounds = [fractions["train"], fractions["train"] + fractions["val"]]
    dealt = None if hold_out is None else deal_by_family(
        tasks, hold_out, fractions, lambda group: group_position(salt, group))
    splits: dict[str, list[Task]] = {name: [] for name in SPLITS}
    for task in sorted(tasks, key=lambda t: t.id):
        if dealt is not None:
            splits[dealt[task.id]].append(task)
            continue
        position = group_position(salt, task.group)
        index = sum(position >= bound for bound in upper_bounds)
        splits[SPLITS[index]].append(task)
    empty = [name for name in SPLITS if not splits[name]]
    if empty and hold_out is not None:
        raise SplitError(
            f"split.hold_out would leave split '{empty[0]}' empty: holding out "
            f"{hold_out.field} = {', '.join(hold_out.values)} leaves no group for it among the "
            "other families; hold out fewer families, or add tasks to the others")
    if empty:
        groups = len({t.group for t in tasks})
        raise SplitError(
            f"split '{empty[0]}' would be empty: {len(tasks)} tasks in {groups} groups with "
            f"fractions {dict(fractions)} leave no group in it; raise "
            f"split.fractions.{empty[0]}, add tasks, or use finer groups"
        )
    return splits


def split_records(tasks: list[Task]) -> bytes:
    """The bytes of a split file: canonical JSONL sorted by id."""
    return jsonl_bytes(t.to_record() for t in sorted(tasks, key=lambda t: t.id))


def split_digest(tasks: list[Task]) -> str:
    """The split's name: sha256 of its canonical file, so `sha256sum` on the file checks it."""
    return sha256_hex(split_records(tasks))


def to_test_version(test_digest: str) -> str:
    return f"t-{test_digest[:12]}"


# `released` is out too. It changes nothing an episode sees or is judged by, and an edit of it
# must not make opened tasks look new: in, a changed date would give a new evaluated version
# and the one-access rule would let the "new" tasks be opened again. Out, the edited tasks are
# the ones already opened (another look is a counted re-access), and what an edit could still
# move, the report's by_date split, reads no task file: it reads the dates the test stage
# recorded inside the access (access.json `dates`, whose digest the ledger's closed line
# holds). Leaving it out also keeps every evaluated version made before the field existed
# (model_dump writes an unset field as None).
_NOT_EVALUATED = {"id", "group", "metadata", "reference", "released"}


def evaluated_version(tasks: list[Task]) -> str:
    """The name of a task set by what is evaluated of it (kind, prompt, tests, public tests,
    entry point, runtime, a kind's own judging fields), not by its file: editing a task's
    metadata, id, group or reference solution leaves it, so the one-access rule cannot be reset
    by a cosmetic edit."""
    return f"c-{content_digest(sorted(map(evaluated_digest, tasks)))[:12]}"


def evaluated_digest(task: Task) -> str:
    """One task by what is evaluated of it: the same task under another id, group or
    metadata has the same digest."""
    return content_digest(task.model_dump(mode="json", exclude=_NOT_EVALUATED))


def build_manifest(
    source: str, source_digest: str, config: SplitConfig, splits: dict[str, list[Task]]
) -> dict[str, Any]:
    digests = {name: split_digest(tasks) for name, tasks in splits.items()}
    return {
        "source": source,
        "source_digest": source_digest,
        "salt": config.salt,
        "fractions": {name: config.fractions[name] for name in SPLITS},
        "counts": {name: len(splits[name]) for name in SPLITS},
        "groups": {name: len({t.group for t in splits[name]}) for name in SPLITS},
        "digests": digests,
        "test_version": to_test_version(digests["test"]),
        "test_content_version": evaluated_version(splits["test"]),
        "fingerprints": {"ngram": config.ngram},
        # Only with families held out, so a variant split's manifest is the bytes it was.
        **({} if config.hold_out is None else {
            "split_kind": split_kind_words(config.hold_out),
            "hold_out": config.hold_out.model_dump(mode="json"),
            "families": family_counts(splits, config.hold_out.field)}),
    }


# Fewer groups than this and a group-level standard error is itself too noisy to lean on (the
# clustered-error literature asks for tens of clusters; below 10 it is badly biased downward):
# select's intervals and its "this val set can detect" rest on the val groups.
MIN_VAL_GROUPS = 10


def val_support_problem(val: list[Task]) -> str | None:
    """Why a val split cannot support choosing between checkpoints, with what to change; None
    if it can."""
    groups = len({task.group for task in val})
    if groups >= MIN_VAL_GROUPS:
        return None
    return (f"val holds {len(val)} task{'s' * (len(val) != 1)} in {groups} group"
            f"{'s' * (groups != 1)}, too few for select to choose between checkpoints on (its "
            f"intervals need at least {MIN_VAL_GROUPS} groups). Give val more groups (more "
            "tasks, or a larger split.fractions.val), or fix the choice in advance "
            "(select.rule: last, select.final: NAME)")
