"""Errors a user can cause. Each names the file, the record and the field, and what to do.

The CLI prints a HeldoutError without a traceback and exits 2 (DESIGN §7);
anything else is a bug in heldout and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def not_a_field(name: str, known: Sequence[str], noun: str = "field") -> str:
    """heldout's words for a name nobody reads (pydantic says "Extra inputs are not
    permitted"), with the closest known one, or the list."""
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"the {noun}s are {', '.join(known)}"
    return f"not a {noun} heldout reads; {hint}"


class HeldoutError(Exception):
    """Base of every error caused by input, configuration or protocol, not by a bug."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one record of an input file."""

    line: int | None
    field: str | None
    message: str

    def render(self, path: str | Path) -> str:
        where = f"{path}:{self.line}" if self.line is not None else str(path)
        field = f" field '{self.field}':" if self.field else ""
        return f"{where}:{field} {self.message}"


class InputFileError(HeldoutError):
    """One or more problems in an input file, all reported at once so one fix-up pass suffices."""

    shown_at_most = 20

    def __init__(self, path: str | Path, problems: list[Problem], hint: str = ""):
        self.path = str(path)
        self.problems = problems
        lines = [p.render(path) for p in problems[: self.shown_at_most]]
        if len(problems) > self.shown_at_most:
            lines.append(f"... and {len(problems) - self.shown_at_most} more problems")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))


class ParamsError(HeldoutError):
    """params.yaml (or a flag that overrides it) holds a value heldout cannot use."""


class SplitError(HeldoutError):
    """The split cannot be made as configured (fractions, empty splits)."""


class StageError(HeldoutError):
    """A stage cannot run: an unknown name, or inputs that an earlier stage should have made."""


class ExperimentsError(HeldoutError):
    """DVC cannot list the project's experiments (`heldout sweeps`): no git repository, no
    commit yet, or DVC's own refusal."""


class AgentError(HeldoutError):
    """An agent could not produce a completion (a server that kept failing, a missing
    replay row). The rollout records the episode as status "error"; it never vanishes."""


class SandboxError(HeldoutError):
    """The sandbox cannot run programs as configured: no container engine, a missing image,
    an unknown backend or setting."""
