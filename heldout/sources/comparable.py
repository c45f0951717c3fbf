"""Whether two imported files can be compared, and the first difference when not: the same
scorer (tool, task, scorer and key), the same tasks (ids, and content digests where both files
hold them) and the same number of samples per task. A file heldout wrote (a rollout table)
compares with an import when the tasks and the samples per task match; its scorer is another,
which the report's headline says."""

from __future__ import annotations

from collections.abc import Mapping

from heldout.sources.record import Imported
from heldout.statistics.counts import IncomparableRolloutsError

ROLES = ("A", "B")


def _first_difference(ids: tuple[set[str], set[str]]) -> str | None:
    for index, (own, other) in enumerate((ids, ids[::-1])):
        missing = sorted(own - other)
        if missing:
            return (f"task {missing[0]} is in {ROLES[index]} and not in {ROLES[1 - index]} "
                    f"({len(own - other)} such task(s); A has {len(ids[0])} tasks, B "
                    f"{len(ids[1])})")
    return None


def _different_samples(counts: tuple[Mapping[str, int], Mapping[str, int]]) -> str | None:
    for task in sorted(counts[0]):
        if counts[0][task] != counts[1][task]:
            return (f"task {task} has {counts[0][task]} sample(s) in A and {counts[1][task]} in "
                    "B: compare files with the same number of samples (epochs, repeats, "
                    "rollouts) per task")
    return None


def same_tasks(counts: tuple[Mapping[str, int], Mapping[str, int]]) -> None:
    """The same task ids and the same samples per task, or IncomparableRolloutsError."""
    problem = (_first_difference((set(counts[0]), set(counts[1])))
               or _different_samples(counts))
    if problem:
        raise IncomparableRolloutsError(f"not comparable: {problem}")


def check_comparable(a: Imported, b: Imported) -> None:
    """Two imports scored alike on the same tasks, or IncomparableRolloutsError naming the
    first difference."""
    for part, value in a.source.comparable.items():
        other = b.source.comparable[part]
        if value != other:
            raise IncomparableRolloutsError(
                f"not comparable: a different {part}: A {a.source.scored_by()} on task "
                f"{a.source.task!r}, B {b.source.scored_by()} on task {b.source.task!r}")
    same_tasks((a.samples_per_task(), b.samples_per_task()))
    contents = (a.contents(), b.contents())
    for task in sorted(set(contents[0]) & set(contents[1])):
        if contents[0][task] != contents[1][task]:
            raise IncomparableRolloutsError(
                f"not comparable: task {task} asks something else in A than in B (its input "
                "or target differs): the files hold different versions of the task set")
