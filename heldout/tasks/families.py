"""Families and held-out families (issue 42, item 2): a variant split and a family split.

A task's **family** is the value of one task field, `split.hold_out.field`: `group`, `kind` or
`metadata.<key>` (one key, dots and all after the first). It names an environment: the tasks of
one repository, one template family, one kind. The plain split is a *variant* split: every
group is dealt by its salted hash, so test holds new groups of the families train already saw.
`split.hold_out.values` names families dealt to test whole, a *family* split: test then also
holds families nothing before it saw. Every other task is dealt by its group's salted position
*within its family* (`deal_by_family`), so val and test see every family that has groups
enough.

The rule within one family of G groups (heldout.tasks.split.group_position orders them, ties
by name):
- G < 3 (MIN_STRATIFIED_GROUPS): each group as the plain split deals it, by its own position
  against the fractions' bounds;
- G ≥ 3: val takes max(1, ⌊G·f_val + ½⌋) groups and test max(1, ⌊G·f_test + ½⌋); while they
  leave train fewer than one, the larger gives one back (val on a tie); train takes the rest.
  The groups lowest in position go to train, the next to val, the highest to test. So every
  family of 3 groups or more is in train, val and test, each as close to its fraction as whole
  groups allow. Adding a group to a family can move that family's boundaries by a group; it
  never moves a group of another family, and never a held-out family's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from heldout.errors import SplitError
from heldout.tasks.record import Task

FIELDS = ("group", "kind")
METADATA = "metadata."
MIN_STRATIFIED_GROUPS = 3
_ORDER = ("train", "val", "test")  # heldout.tasks.split.SPLITS, which imports this module
VARIANT = "variant: every group dealt by its salted hash; no family held out"
_SHOWN = 8  # names a refusal lists before "and N more"


class HoldOut(BaseModel):
    """`params.split.hold_out`: the families (values of `field`) dealt to test whole."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str = Field(description="group, kind or metadata.<key>: what names a task's family")
    values: list[str] = Field(min_length=1, description="the families dealt to test whole")

    @field_validator("field")
    @classmethod
    def _a_task_field(cls, value: str) -> str:
        if value in FIELDS or (value.startswith(METADATA) and len(value) > len(METADATA)):
            return value
        raise ValueError(f"must be 'group', 'kind' or 'metadata.<key>', got {value!r}")

    @field_validator("values")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        repeated = sorted({value for value in values if values.count(value) > 1})
        if repeated:
            raise ValueError(f"names {', '.join(map(repr, repeated))} more than once")
        return values


def family_of(task: Task, field: str) -> str | None:
    """The task's family by `field`; None where the task carries no such field (or a value
    that is not a name: only strings and integers name a family)."""
    if field == "group":
        return task.group
    if field == "kind":
        return task.kind
    value = task.metadata.get(field[len(METADATA):])
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def task_families(tasks: list[Task], hold_out: HoldOut) -> dict[str, str]:
    """Each task's family by `hold_out.field`; a SplitError when no task carries the field,
    when some task does not (a family split needs every task's family), when a group spans
    two families (it would straddle splits), or when a held-out family has no task."""
    field = hold_out.field
    families = {task.id: family_of(task, field) for task in tasks}
    missing = sorted(task_id for task_id, family in families.items() if family is None)
    if len(missing) == len(tasks):
        raise SplitError(f"split.hold_out.field: no task carries {field} (a string or an "
                         "integer): there are no families to hold out")
    if missing:
        raise SplitError(f"split.hold_out.field: {len(missing)} of {len(tasks)} tasks carry no "
                         f"{field} ({_listed(missing)}); a family split needs every task's "
                         "family")
    of_group: dict[str, set[str]] = defaultdict(set)
    for task in tasks:
        of_group[task.group].add(families[task.id])
    for group, found in sorted(of_group.items()):
        if len(found) > 1:
            raise SplitError(f"split.hold_out.field: group {group!r} spans the families "
                             f"{_listed(sorted(found))} of {field}; a group is dealt whole, so "
                             "it must lie in one family")
    present = set(families.values())
    absent = [value for value in hold_out.values if value not in present]
    if absent:
        raise SplitError(f"split.hold_out.values: no task has {field} "
                         f"{_listed(map(repr, absent))}; the families are "
                         f"{_listed(sorted(present))}")
    return {task_id: str(family) for task_id, family in families.items()}


def stratified_counts(groups: int, fractions: Mapping[str, float]) -> tuple[int, int, int]:
    """Groups of one family (at least MIN_STRATIFIED_GROUPS) to train, val and test."""
    val, test = (max(1, int(groups * fractions[name] + 0.5)) for name in ("val", "test"))
    while val + test > groups - 1:
        if val >= test:
            val -= 1
        else:
            test -= 1
    return groups - val - test, val, test


def deal_by_family(tasks: list[Task], hold_out: HoldOut, fractions: Mapping[str, float],
                   position: Callable[[str], float]) -> dict[str, str]:
    """Each task's split (train, val or test) by the module's rule; `position` is a group's
    salted position in [0, 1)."""
    families = task_families(tasks, hold_out)
    held_out = set(hold_out.values)
    groups: dict[str, set[str]] = defaultdict(set)
    for task in tasks:
        groups[families[task.id]].add(task.group)
    bounds = (fractions["train"], fractions["train"] + fractions["val"])
    split_of_group: dict[str, str] = {}
    for family, members in groups.items():
        ordered = sorted(members, key=lambda group: (position(group), group))
        if family in held_out:
            split_of_group |= dict.fromkeys(ordered, "test")
        elif len(ordered) < MIN_STRATIFIED_GROUPS:
            split_of_group |= {group: _ORDER[sum(position(group) >= bound for bound in bounds)]
                               for group in ordered}
        else:
            train, val, _ = stratified_counts(len(ordered), fractions)
            split_of_group |= {group: "train" if rank < train else
                               "val" if rank < train + val else "test"
                               for rank, group in enumerate(ordered)}
    return {task.id: split_of_group[task.group] for task in tasks}


def family_counts(splits: Mapping[str, list[Task]], field: str) -> dict[str, dict[str, int]]:
    """Tasks per family per split, families sorted by name."""
    counts: dict[str, dict[str, int]] = {}
    for name in _ORDER:
        for task in splits[name]:
            family = family_of(task, field) or ""
            counts.setdefault(family, dict.fromkeys(_ORDER, 0))[name] += 1
    return dict(sorted(counts.items()))


def access_families(manifest: Mapping[str, Any], tasks: list[Task]) -> dict[str, Any]:
    """What the test access records of its tasks' families: {"families": {task id: family}}
    when the manifest says families were held out, else nothing (an access of a variant split
    records what it did before)."""
    hold_out = manifest.get("hold_out")
    if not hold_out:
        return {}
    return {"families": {task.id: family_of(task, hold_out["field"]) or "" for task in tasks}}


def split_kind_words(hold_out: HoldOut) -> str:
    """The manifest's `split_kind` of a split with families held out."""
    return (f"family (held out: {hold_out.field} = {', '.join(hold_out.values)}) + variant "
            f"(stratified by {hold_out.field})")


def split_kind(manifest: Mapping[str, Any]) -> str:
    """Which split a manifest records: a manifest without `split_kind` (no family held out, or
    written before families were) is a variant split."""
    return str(manifest.get("split_kind", VARIANT))


def group_words(manifest: Mapping[str, Any]) -> str:
    """What a group is in this split, for the protocol card."""
    counts, groups = manifest.get("counts", {}), manifest.get("groups", {})
    tasks, units = sum(counts.values()), sum(groups.values())
    if counts and counts == groups:
        return (f"each task is its own group ({tasks} tasks): the group defaults to the task "
                "id, so the split and every interval treat tasks as independent")
    return (f"{tasks} tasks in {units} groups: a group (the task field `group`: one template's "
            "variants, one repository) is dealt to one split whole, and every interval "
            "resamples groups, not tasks")
