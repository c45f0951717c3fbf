"""What an environment answers to one tool call (heldout.episodes.environments)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool call: the observation's text and data, and, for `submit`, the
    program that ends the episode."""

    text: str
    data: dict[str, Any]
    submitted: str | None = None
