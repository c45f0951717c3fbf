"""Held-out families (issue 42, item 2): `split.hold_out` deals named families to test whole and
every other family's groups within it, stratified; unset, the split is the bytes it was."""

from __future__ import annotations

import pydantic
import pytest

from heldout.errors import SplitError
from heldout.tasks.families import (
    VARIANT,
    HoldOut,
    access_families,
    group_words,
    split_kind,
    stratified_counts,
)
from heldout.tasks.record import Task
from heldout.tasks.split import SPLITS, SplitConfig, assign, build_manifest, group_position
from tests.conftest import task_record

FRACTIONS = {"train": 0.3, "val": 0.35, "test": 0.35}
SALT = "s"
# family -> groups; two tasks a group. "d" is held out; "e" has too few groups to stratify.
FAMILIES = {"a": 6, "b": 6, "c": 3, "d": 4, "e": 2}


def family_tasks(families: dict[str, int] = FAMILIES, per_group: int = 2) -> list[Task]:
    return [Task.model_validate(task_record(f"{family}{group}-{variant}",
                                            group=f"{family}{group}",
                                            metadata={"family": family}))
            for family, groups in families.items() for group in range(groups)
            for variant in range(per_group)]


def where(splits: dict[str, list[Task]]) -> dict[str, str]:
    return {task.id: name for name, tasks in splits.items() for task in tasks}


HOLD_D = HoldOut(field="metadata.family", values=["d"])


@pytest.mark.parametrize(("groups", "fractions", "expected"), [
    (3, FRACTIONS, (1, 1, 1)),      # 1.05 rounds to 1 each
    (6, FRACTIONS, (2, 2, 2)),      # 2.1 → 2
    (20, FRACTIONS, (6, 7, 7)),     # 7.0 → 7
    (5, {"train": 0.6, "val": 0.2, "test": 0.2}, (3, 1, 1)),
    (10, {"train": 0.6, "val": 0.2, "test": 0.2}, (6, 2, 2)),
    # val ⌊1.8 + ½⌋ = 2 and test 2 leave train none: the larger (val on a tie) gives one back
    (4, {"train": 0.1, "val": 0.45, "test": 0.45}, (1, 1, 2)),
    # 0.03·3 rounds to 0, and val takes at least 1
    (3, {"train": 0.94, "val": 0.03, "test": 0.03}, (1, 1, 1)),
])
def test_a_familys_groups_are_counted_out_by_the_fractions(groups, fractions, expected):
    assert stratified_counts(groups, fractions) == expected


def test_held_out_families_go_to_test_whole_and_the_others_are_stratified():
    tasks = family_tasks()
    splits = assign(tasks, SALT, FRACTIONS, HOLD_D)
    placed = where(splits)
    assert {placed[t.id] for t in tasks if t.metadata["family"] == "d"} == {"test"}
    for family in ("a", "b", "c"):  # ≥ 3 groups: in train, val and test
        assert {placed[t.id] for t in tasks if t.metadata["family"] == family} == set(SPLITS)
    # which groups: the lowest in salted position to train, then val, then test
    for family, (train, val, _) in (("a", (2, 2, 2)), ("b", (2, 2, 2)), ("c", (1, 1, 1))):
        ordered = sorted((f"{family}{g}" for g in range(FAMILIES[family])),
                         key=lambda group: group_position(SALT, group))
        expected = (["train"] * train + ["val"] * val
                    + ["test"] * (len(ordered) - train - val))
        assert [placed[f"{group}-0"] for group in ordered] == expected
    # a group never straddles, and "e" (2 groups) is dealt as the plain split deals it
    for task in tasks:
        assert placed[task.id] == placed[f"{task.group}-0"]
    plain = where(assign(tasks, SALT, FRACTIONS))
    assert all(placed[t.id] == plain[t.id] for t in tasks if t.metadata["family"] == "e")


def test_an_unset_hold_out_deals_and_names_the_split_as_before():
    tasks = family_tasks()
    config = SplitConfig(salt=SALT, fractions=FRACTIONS)
    assert config.hold_out is None
    before = assign(tasks, SALT, FRACTIONS)
    assert assign(tasks, SALT, FRACTIONS, None) == before
    manifest = build_manifest("src", "digest", config, before)
    assert not {"split_kind", "hold_out", "families"} & set(manifest)
    assert split_kind(manifest) == VARIANT
    # holding out by `group`: each family is one group, so only the named group moves
    by_group = where(assign(tasks, SALT, FRACTIONS, HoldOut(field="group", values=["a0"])))
    plain = where(before)
    assert {task_id for task_id in plain if by_group[task_id] != plain[task_id]} <= {"a0-0",
                                                                                   "a0-1"}
    assert by_group["a0-0"] == by_group["a0-1"] == "test"


def test_the_manifest_names_the_split_kind_and_counts_families_per_split():
    tasks = family_tasks()
    config = SplitConfig(salt=SALT, fractions=FRACTIONS, hold_out=HOLD_D)
    splits = assign(tasks, SALT, FRACTIONS, config.hold_out)
    manifest = build_manifest("src", "digest", config, splits)
    assert manifest["split_kind"] == ("family (held out: metadata.family = d) + variant "
                                      "(stratified by metadata.family)")
    assert split_kind(manifest) == manifest["split_kind"]
    assert manifest["hold_out"] == {"field": "metadata.family", "values": ["d"]}
    families = manifest["families"]
    assert families["a"] == families["b"] == {"train": 4, "val": 4, "test": 4}
    assert families["c"] == {"train": 2, "val": 2, "test": 2}
    assert families["d"] == {"train": 0, "val": 0, "test": 8}
    assert sum(families["e"].values()) == 4
    assert manifest["counts"] == {name: sum(f[name] for f in families.values())
                                  for name in SPLITS}
    # what the test stage records of its tasks: each one's family
    recorded = access_families(manifest, splits["test"])["families"]
    assert recorded == {t.id: t.metadata["family"] for t in splits["test"]}
    assert access_families({"counts": {}}, splits["test"]) == {}


def test_what_a_group_is_follows_the_manifest():
    own = {"counts": {"train": 3, "val": 2, "test": 2}, "groups": {"train": 3, "val": 2,
                                                                   "test": 2}}
    assert group_words(own).startswith("each task is its own group (7 tasks)")
    shared = {"counts": {"train": 4, "val": 2, "test": 2}, "groups": {"train": 2, "val": 1,
                                                                      "test": 1}}
    assert group_words(shared).startswith("8 tasks in 4 groups: a group")


def test_a_held_out_family_no_task_has_is_refused_naming_the_families():
    with pytest.raises(SplitError, match=r"no task has metadata.family 'z'; the families are "
                                         r"a, b, c, d, e"):
        assign(family_tasks(), SALT, FRACTIONS,
               HoldOut(field="metadata.family", values=["d", "z"]))


def test_a_field_no_task_carries_or_some_task_lacks_is_refused():
    with pytest.raises(SplitError, match="no task carries metadata.colour"):
        assign(family_tasks(), SALT, FRACTIONS, HoldOut(field="metadata.colour", values=["x"]))
    lacking = family_tasks() + [Task.model_validate(task_record("orphan"))]
    with pytest.raises(SplitError, match=r"1 of 43 tasks carry no metadata.family \(orphan\)"):
        assign(lacking, SALT, FRACTIONS, HOLD_D)


def test_a_group_that_spans_two_families_is_refused():
    tasks = family_tasks({"a": 3, "b": 3}) + [Task.model_validate(
        task_record("stray", group="a0", metadata={"family": "b"}))]
    with pytest.raises(SplitError, match="group 'a0' spans the families a, b"):
        assign(tasks, SALT, FRACTIONS, HoldOut(field="metadata.family", values=["a"]))


def test_a_hold_out_that_leaves_val_or_train_empty_is_refused():
    # b's one group lands in train by its position, so nothing is left for val
    lone = next(f"b{n}" for n in range(100) if group_position(SALT, f"b{n}") < 0.3)
    tasks = family_tasks({"a": 3}) + [Task.model_validate(
        task_record(f"{lone}-0", group=lone, metadata={"family": "b"}))]
    with pytest.raises(SplitError, match="split.hold_out would leave split 'val' empty"):
        assign(tasks, SALT, FRACTIONS, HoldOut(field="metadata.family", values=["a"]))
    with pytest.raises(SplitError, match="would leave split 'train' empty"):
        assign(family_tasks({"a": 3, "b": 3}), SALT, FRACTIONS,
               HoldOut(field="metadata.family", values=["a", "b"]))


def test_hold_out_params_are_checked():
    for bad in ({"field": "colour", "values": ["x"]}, {"field": "metadata.", "values": ["x"]},
                {"field": "kind", "values": []}, {"field": "kind", "values": ["x", "x"]},
                {"field": "kind", "values": ["x"], "extra": 1}):
        with pytest.raises(pydantic.ValidationError):
            SplitConfig(salt=SALT, fractions=FRACTIONS, hold_out=bad)
    kind = SplitConfig(salt=SALT, fractions=FRACTIONS,
                       hold_out={"field": "kind", "values": ["python-program"]})
    assert kind.hold_out == HoldOut(field="kind", values=["python-program"])
