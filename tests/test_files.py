from __future__ import annotations

import json
from pathlib import Path

import pytest

from heldout.files import staged_outputs, write_json_atomic


def test_outputs_appear_together_only_when_the_block_succeeds(tmp_path: Path):
    with staged_outputs() as outputs:
        outputs.write_bytes(tmp_path / "a" / "one.txt", b"1")
        outputs.write_json(tmp_path / "two.json", {"b": 2})
        assert not (tmp_path / "two.json").exists(), "nothing is in place before the end"
    assert (tmp_path / "a" / "one.txt").read_bytes() == b"1"
    assert json.loads((tmp_path / "two.json").read_text()) == {"b": 2}
    assert sorted(p.name for p in tmp_path.rglob("*.tmp*")) == []


def test_a_failure_leaves_the_old_files_and_no_temporaries(tmp_path: Path):
    write_json_atomic(tmp_path / "kept.json", {"old": True})
    with pytest.raises(RuntimeError), staged_outputs() as outputs:
        outputs.write_json(tmp_path / "kept.json", {"old": False})
        outputs.write_bytes(tmp_path / "new.txt", b"half")
        raise RuntimeError("crash mid-stage")
    assert json.loads((tmp_path / "kept.json").read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]
