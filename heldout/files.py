"""Writing outputs so that a crash leaves the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class StagedOutputs:
    """Files written under temporary names beside their targets, renamed into place together
    only when the whole stage succeeded."""

    def __init__(self) -> None:
        self._pending: dict[Path, Path] = {}

    def path(self, target: Path) -> Path:
        """A temporary path to write `target`'s content to (for writers that want a path)."""
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        # The suffix stays last: writers such as matplotlib choose the format by it.
        temporary = target.with_name(f".{target.stem}.{os.getpid()}.tmp{target.suffix}")
        self._pending[target] = temporary
        return temporary

    def write_bytes(self, target: Path, data: bytes) -> None:
        self.path(target).write_bytes(data)

    def write_json(self, target: Path, value: Any) -> None:
        self.write_bytes(target, json_bytes(value))

    def commit(self) -> list[Path]:
        for target, temporary in self._pending.items():
            os.replace(temporary, target)
        written = list(self._pending)
        self._pending.clear()
        return written

    def discard(self) -> None:
        for temporary in self._pending.values():
            temporary.unlink(missing_ok=True)
        self._pending.clear()


@contextmanager
def staged_outputs() -> Iterator[StagedOutputs]:
    outputs = StagedOutputs()
    try:
        yield outputs
    except BaseException:
        outputs.discard()
        raise
    outputs.commit()


def json_bytes(value: Any) -> bytes:
    """Indented, key-sorted JSON: stable bytes for DVC, readable diffs for people."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def write_json_atomic(target: Path, value: Any) -> None:
    with staged_outputs() as outputs:
        outputs.write_json(target, value)


def create_secret_file(path: Path, size: int) -> bool:
    """Put a new random secret of `size` bytes, as hex digits, in `path` (mode 0600, in a folder
    made 0700) unless a file is there already; True when this call made it. The file appears
    whole or not at all (written aside, then linked into place), so a process racing this one
    reads either no file or the whole secret, and two racing processes keep the same one."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # 0600
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(os.urandom(size).hex() + "\n")
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temporary)
