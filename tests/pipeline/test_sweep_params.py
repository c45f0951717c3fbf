"""`dvc exp run -S key=value` rewrites params.yaml through DVC's own override code, which
re-dumps every list and string it merges (flow style, quotes and a list's comments gone): the
project's params.yaml is written the way that code writes it, so a sweep changes only the line
of the key it sets (issue 27, item 1)."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml
from dvc.utils.hydra import apply_overrides

from tests.conftest import REPO


def leaves(tree: dict, prefix: str = "") -> list[tuple[str, object]]:
    found = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            found += leaves(value, f"{path}.")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.append((path, value))
    return found


@pytest.fixture
def params(tmp_path: Path) -> Path:
    return Path(shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml"))


def test_setting_any_number_to_its_value_leaves_every_byte(params: Path):
    before = params.read_bytes()
    numbers = leaves(yaml.safe_load(before))
    assert len(numbers) > 30
    apply_overrides(params, [f"{path}={value!r}" for path, value in numbers])
    assert params.read_bytes() == before


def test_a_sweep_changes_the_line_of_its_key_alone(params: Path):
    before = params.read_text().splitlines()
    apply_overrides(params, ["harness.n=2", "sensitivity.fields.max_turns=[2,3]"])
    changed = [line for line in difflib.unified_diff(before, params.read_text().splitlines(),
                                                     lineterm="", n=0)
               if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    # max_turns 3, 4 became 2, 3: the 3 stays, a 2 comes before it and the 4 goes.
    assert changed == ["-  n: 10", "+  n: 2", "+    - 2", "-    - 4"], changed
    assert yaml.safe_load(params.read_text())["harness"]["n"] == 2
