"""Moved to heldout.episodes.judge (and the scorer version to the task kind's module,
heldout.tasks.python_function); this name stays importable for code written against the README
before the regrouping (docs/python-api.md)."""

from heldout.episodes.judge import score, score_many
from heldout.tasks.python_function import SCORER_VERSION

__all__ = ["SCORER_VERSION", "score", "score_many"]
