"""Moved to heldout.episodes.judge; this name stays importable for code written against the
README before the regrouping (README: "The Python API")."""

from heldout.episodes.judge import SCORER_VERSION, score, score_many

__all__ = ["SCORER_VERSION", "score", "score_many"]
