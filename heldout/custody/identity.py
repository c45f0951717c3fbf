"""What one test access is: everything the test stage read, not a list of chosen fields.

A list of fields is a promise that whoever adds an input remembers the list; an input left off
it re-opens a closed access as a "resume" (issue 37: the excluded tasks, the reruns count). So
the test stage reads its params only through `ParamsReads`, which records every section and
entry it hands out, and the access's identity is the digest of what was recorded, less the
few keys that say who may look or where things are kept, not what is computed
(`NOT_RESULTS`, each with its reason), beside the files' parts the stage computes from
(`access_identity`). A key added to a section the stage reads, or a section it starts to read,
changes the identity without anyone naming it; anything that iterates the params records
everything (reading more can only make the identity stricter).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from heldout.canonical import content_digest

# Params paths the identity leaves out, and why each cannot change a number the access
# computes. Everything else the stage reads is in.
NOT_RESULTS: dict[tuple[str, ...], str] = {
    ("test", "reaccess"): "the reason for another access: recorded with it, not an input",
    ("test", "spend"): "the reason to open against the plan: recorded with it, not an input",
    ("test", "experiment"): "which experiment may open the split: who looks, not what is seen",
    ("custody",): "the test key and the ledger's store: who may look and where it is written",
    ("mlflow",): "the MLflow experiment the runs are logged to",
    ("rollouts", "in_flight"): "how many episodes run at once: the results do not depend on it",
    ("rollouts", "agent_threads"): "threads for blocking agents: the results do not depend on it",
    ("rollouts", "chunk_episodes"): "the unit of resume: the results do not depend on it",
    ("rollouts", "cache"): "where finished episodes are kept for resume",
}
# The sections whose entries are read one by one: a checkpoint the access does not use is no
# input of it.
BY_ENTRY = frozenset({"checkpoints"})
# The identity document's own version: a document built another way is another identity.
IDENTITY_SCHEMA = 1


class ParamsReads(Mapping[str, Any]):
    """params.yaml as a read-only mapping that records what was read: a section when it is
    indexed, an entry of a BY_ENTRY section when that entry is; `recorded()` gives them."""

    def __init__(self, params: Mapping[str, Any]):
        self._params = params
        self._read = _Reads()

    def __getitem__(self, name: str) -> Any:
        value = self._params[name]
        if name in BY_ENTRY and isinstance(value, Mapping):
            return _EntryReads(value, (name,), self._read)
        self._read.note((name,), value)
        return value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._params else default

    def __contains__(self, name: object) -> bool:
        return name in self._params

    def __iter__(self) -> Iterator[str]:
        for name, value in self._params.items():
            self._read.note((name,), value)
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def recorded(self) -> dict[str, Any]:
        """What was read, as {dotted path: value}, with the NOT_RESULTS paths taken out; from
        now on, reading anything else raises (it would be an input the identity left out)."""
        self._read.fixed = True
        read = {path: value for path, value in self._read.values.items() if not _cut(path)}
        return {".".join(path): _without_cuts(path, value) for path, value in sorted(read.items())}


class _Reads:
    """The paths read so far; once the identity is fixed, a read of a new path that is not
    NOT_RESULTS is a bug that would leave an input out, and raises."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, ...], Any] = {}
        self.fixed = False

    def note(self, path: tuple[str, ...], value: Any) -> None:
        if self.fixed and not _cut(path) and self.values.get(path, _UNREAD) != value:
            raise RuntimeError(f"params.{'.'.join(path)} was read after the test access's "
                               "identity was fixed: read it before, so the identity holds it")
        self.values[path] = value


_UNREAD = object()


def _cut(path: tuple[str, ...]) -> bool:
    return any(path[:len(cut)] == cut for cut in NOT_RESULTS)


class _EntryReads(Mapping[str, Any]):
    """A BY_ENTRY section: an entry indexed is recorded alone; iterating records them all."""

    def __init__(self, section: Mapping[str, Any], path: tuple[str, ...], read: _Reads):
        self._section, self._path, self._read = section, path, read

    def __getitem__(self, name: str) -> Any:
        value = self._section[name]
        self._read.note((*self._path, name), value)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._section

    def __iter__(self) -> Iterator[str]:
        self._read.note(self._path, dict(self._section))
        return iter(self._section)

    def __len__(self) -> int:
        return len(self._section)


def _without_cuts(path: tuple[str, ...], value: Any) -> Any:
    """`value` (read at `path`) less the NOT_RESULTS paths below it."""
    if not isinstance(value, Mapping):
        return value
    kept = {}
    for key, inner in value.items():
        below = (*path, str(key))
        if below in NOT_RESULTS:
            continue
        kept[key] = _without_cuts(below, inner)
    return kept


def access_identity(params: ParamsReads, computed_from: Mapping[str, Any]) -> dict[str, Any]:
    """The identity document of an access: every params value it read (less NOT_RESULTS) and
    `computed_from`, what the stage computes the results from in its files (the test set's
    versions, the excluded tasks, the chosen candidate, the verdict's settings)."""
    return {"schema": IDENTITY_SCHEMA, "params": params.recorded(),
            "computed_from": dict(computed_from)}


def identity_digest(identity: Mapping[str, Any]) -> str:
    return content_digest(dict(identity))
