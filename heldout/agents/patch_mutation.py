"""Mutants of a reference patch: the repository as the reference leaves it, with one AST mutation
(heldout.agents.mutation) inside the lines the patch wrote, as a diff from the base.

What a demo checkpoint submits when it does not draw the reference on a repository task: a
real near miss of the fix (a flipped comparison, an off-by-one, a dropped guard), which the
hidden tests kill or not, as a mutation-testing run would predict.
"""

from __future__ import annotations

from heldout.agents.mutation import mutants
from heldout.tasks.patches import PatchError, apply_patch, diff_trees, parse_patch, written_lines

LIMIT = 400  # mutants looked at per changed file, before those outside the patch are dropped


def _first_changed_line(a: str, b: str) -> int:
    return next((number for number, (x, y) in enumerate(
        zip(a.splitlines(), b.splitlines(), strict=False), start=1) if x != y),
        min(a.count("\n"), b.count("\n")) + 1)


def patch_mutants(files: dict[str, str], reference: str) -> tuple[tuple[str, ...], ...]:
    """The reference's mutants as diffs from the base, grouped by operator (in a stable order);
    none when the reference does not apply or changes no Python."""
    try:
        fixed = apply_patch(files, parse_patch(reference))
    except PatchError:
        return ()
    groups: dict[str, list[str]] = {}
    for path in sorted(fixed):
        if not path.endswith(".py") or fixed[path] == files.get(path):
            continue
        written = written_lines(files.get(path, ""), fixed[path])
        lines = fixed[path].splitlines(keepends=True)
        start = min(written) - 1
        prefix = "".join(lines[:start])
        for operator, rest in mutants(prefix, "".join(lines[start:]), limit=LIMIT):
            mutated = prefix + rest
            if _first_changed_line(fixed[path], mutated) in written:
                groups.setdefault(operator, []).append(
                    diff_trees(files, {**fixed, path: mutated}))
    return tuple(tuple(group) for _, group in sorted(groups.items()))
