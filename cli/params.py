"""`heldout params use FILE`: set params.yaml's keys from a file of overrides, as
`dvc exp run -S` would, leaving every other line of params.yaml as it was, byte for byte. The
file's `set:` maps dotted keys to values; each value replaces the key's whole. The lines of a
key are found with ruamel.yaml (the YAML library DVC itself uses), and only they are rewritten:
a scalar in place, its comment kept; a mapping or list as the overrides file writes it. The
result is checked as a whole before it is written; one that does not pass is not written."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from heldout.errors import HeldoutError, ParamsError

stdout = Console()
_SCALAR_LINE = re.compile(r"^(?P<key>\s*[^#\s][^:]*:)(?P<value>[^#\n]*?)(?P<rest>\s+#.*)?$")


def _yaml() -> Any:
    from ruamel.yaml import YAML

    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.width = 100
    round_trip.indent(mapping=2, sequence=2, offset=0)  # params.yaml's style, DVC's `-S`'s
    return round_trip


def _value_end(lines: list[str], start: int, column: int) -> int:
    """The line after the last of the value whose key is at (`start`, `column`): it goes on while
    lines are indented deeper, or are items of a list written at the key's own indent (as DVC
    writes lists); blank and comment lines at its end belong to what follows."""
    end = start + 1
    last = start + 1
    while end < len(lines):
        stripped = lines[end].strip()
        indent = len(lines[end]) - len(lines[end].lstrip())
        if stripped and not stripped.startswith("#"):
            if indent < column or (indent == column and not stripped.startswith("- ")):
                break
            last = end + 1
        end += 1
    return last


def _rendered(key_line: str, column: int, leaf: str, value: Any) -> list[str]:
    """The lines that say `leaf: value` at `column`: the old line with its value replaced (and its
    comment kept) for a scalar, else the value as the overrides file writes it."""
    if not isinstance(value, dict | list):
        written = io.StringIO()
        _yaml().dump({leaf: value}, written)
        text = written.getvalue().strip().split(":", 1)[1].strip()
        match = _SCALAR_LINE.match(key_line)
        if match and not written.getvalue().strip().count("\n"):
            padding = match["value"][:len(match["value"]) - len(match["value"].lstrip())] or " "
            line = f"{match['key']}{padding}{text}"
            if match["rest"]:  # the comment where it was, if the value leaves room
                comment = match["rest"].lstrip()
                line = line.ljust(len(key_line) - len(comment) - 1) + " " + comment
            return [line]
    written = io.StringIO()
    _yaml().dump({leaf: value}, written)
    return [" " * column + line for line in written.getvalue().rstrip("\n").split("\n")]


def apply_overrides(text: str, overrides: dict[str, Any]) -> str:
    """`text` (params.yaml) with each dotted key of `overrides` set. Raises ParamsError for a
    key params.yaml does not have."""
    for dotted, value in overrides.items():
        document = _yaml().load(text)
        *parents, leaf = str(dotted).split(".")
        node = document
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise ParamsError(f"{dotted}: params.yaml has no {dotted}; add it there first")
        start, column = node.lc.key(leaf)
        lines = text.split("\n")
        end = _value_end(lines, start, column) if isinstance(node[leaf], dict | list) else \
            start + 1
        lines[start:end] = _rendered(lines[start], column, leaf, value)
        text = "\n".join(lines)
    return text


def use(
    overrides: Annotated[Path, typer.Argument(
        help="A YAML file whose `set:` maps dotted params keys to values.", exists=True,
        dir_okay=False)],
) -> None:
    """Set params.yaml's keys from a file of overrides (examples/ has some); every other line
    stays. `git diff params.yaml` shows what changed, `git checkout params.yaml` undoes it."""
    from ruamel.yaml import YAMLError

    from flows.params import check_params_file
    from heldout.environment import find_project_root

    root = find_project_root()
    try:  # the overrides' own style (a flow mapping stays one) carries into params.yaml
        loaded = _yaml().load(overrides.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as error:
        raise HeldoutError(f"{overrides}: not UTF-8 text (byte {error.start})") from None
    except YAMLError as error:
        raise HeldoutError(f"{overrides}: not YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise HeldoutError(f"{overrides}: nested too deeply to be a params file") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("set"), dict):
        raise HeldoutError(f"{overrides}: expected a mapping `set:` of dotted keys to values")
    path = root / "params.yaml"
    before = path.read_text(encoding="utf-8")
    path.write_text(apply_overrides(before, dict(loaded["set"])), encoding="utf-8")
    try:
        check_params_file(root)
    except HeldoutError:
        path.write_text(before, encoding="utf-8")
        raise
    stdout.print(f"params.yaml: set {', '.join(map(str, loaded['set']))} from {overrides} "
                 "(`git diff params.yaml` shows it, `git checkout params.yaml` undoes it)",
                 highlight=False, soft_wrap=True, markup=False)
