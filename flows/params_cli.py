"""`heldout params use FILE`: set params.yaml's keys from a file of overrides, as
`dvc exp run -S` would, keeping params.yaml's comments and order (ruamel.yaml's round trip, the
YAML library DVC itself uses). The file's `set:` maps dotted keys to values; each value replaces
the key's whole. params.yaml is checked after; a result that does not pass is not written."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from heldout.errors import HeldoutError, ParamsError

stdout = Console()


def apply_overrides(document: Any, overrides: dict[str, Any]) -> list[str]:
    """Set each dotted key of `overrides` in `document` (a ruamel mapping); the keys set.
    Raises ParamsError for a key params.yaml does not have."""
    for dotted, value in overrides.items():
        *parents, leaf = str(dotted).split(".")
        node = document
        for depth, part in enumerate(parents):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parents[:depth + 1])
                raise ParamsError(f"{dotted}: params.yaml has no {where}")
            node = node[part]
        if not isinstance(node, dict) or leaf not in node:
            # A key added at a section's end would take the next section's comments with it.
            raise ParamsError(f"{dotted}: params.yaml has no {dotted}; add it there first")
        _keep_trailing_comment(node[leaf], value)
        node[leaf] = value
    return list(overrides)


def _keep_trailing_comment(old: Any, new: Any) -> None:
    """ruamel keeps the comment lines after a mapping's or list's last item with that item: a
    replaced value would take the next key's comment with it. The new value's last item
    carries it instead."""
    old_last, new_last = _last_key(old), _last_key(new)
    if old_last is None or new_last is None:
        return
    comment = old.ca.items.get(old_last)
    if comment is not None:
        new.ca.items[new_last] = comment


def _last_key(value: Any) -> Any:
    if not hasattr(value, "ca") or not len(value):
        return None
    return list(value)[-1] if isinstance(value, dict) else len(value) - 1


def use(
    overrides: Annotated[Path, typer.Argument(help="A YAML file whose `set:` maps dotted "
                                                   "params keys to values.")],
) -> None:
    """Set params.yaml's keys from a file of overrides (examples/ has some), comments kept;
    `git diff params.yaml` shows what changed, `git checkout params.yaml` undoes it."""
    from ruamel.yaml import YAML, YAMLError

    from flows.params import check_params_file
    from heldout.environment import find_project_root

    root = find_project_root()
    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.width = 100
    round_trip.indent(mapping=2, sequence=4, offset=2)
    try:  # the overrides' own style (a flow mapping stays one) carries into params.yaml
        loaded = round_trip.load(overrides.read_text(encoding="utf-8")) or {}
    except YAMLError as error:
        raise HeldoutError(f"{overrides}: not YAML: {error}") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("set"), dict):
        raise HeldoutError(f"{overrides}: expected a mapping `set:` of dotted keys to values")
    path = root / "params.yaml"
    before = path.read_text(encoding="utf-8")
    document = round_trip.load(before)
    keys = apply_overrides(document, loaded["set"])
    written = io.StringIO()
    round_trip.dump(document, written)
    path.write_text(written.getvalue(), encoding="utf-8")
    try:
        check_params_file(root)
    except HeldoutError:
        path.write_text(before, encoding="utf-8")
        raise
    stdout.print(f"params.yaml: set {', '.join(keys)} from {overrides} (`git diff params.yaml` "
                 "shows it, `git checkout params.yaml` undoes it)", highlight=False,
                 soft_wrap=True, markup=False)
