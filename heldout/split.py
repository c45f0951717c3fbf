"""Moved to heldout.tasks.split; this name stays importable for code written against the README
before the regrouping (docs/python-api.md)."""

from heldout.tasks.split import EVAL_SPLITS, SPLITS, SplitConfig, assign, split_records

__all__ = ["EVAL_SPLITS", "SPLITS", "SplitConfig", "assign", "split_records"]
