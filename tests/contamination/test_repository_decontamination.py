"""Decontamination of repository tasks: a training item that holds the issue, the fix (even
renamed), the test patch, or comes from the same repository is found."""

from __future__ import annotations

from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.fingerprints import program_text, split_fingerprints
from heldout.contamination.index import EvalIndex
from heldout.contamination.sources import TrainingItem
from tests.repository_fixtures import calc_task

ISSUE = ("clamp(5, 0, 3) returns 0 instead of 3: every value above the high bound comes back as "
         "the low bound, which breaks the slider widget and the volume control in our app.\n")
TASK = calc_task(prompt=ISSUE)
INDEX = EvalIndex([split_fingerprints("val", "digest", [TASK], 13)], DecontaminateConfig())
RENAMED_FIX = ("def bound(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n"
               "        return hi\n    return x\n")


def methods(fields: dict[str, str], group: str | None = None) -> set[str]:
    matches, _ = INDEX.scan(TrainingItem("corpus", "t1", fields, group))
    return {match.method for match in matches if match.eval_id == TASK.id}


def test_the_code_fingerprinted_is_the_function_the_fix_writes():
    assert program_text(TASK).startswith("def clamp(value, low, high):")
    assert "return high" in program_text(TASK) and "def add" not in program_text(TASK)


def test_the_issue_the_fix_renamed_the_test_patch_and_the_repository_are_each_found():
    assert {"exact", "ngram"} <= methods({"text": ISSUE})
    assert "code" in methods({"prompt": "Fix the bound helper.", "completion": RENAMED_FIX})
    assert "ngram" in methods({"text": "my training diff\n" + TASK.tests})
    assert methods({"text": "an unrelated sentence about nothing"}, group="heldout/calc") == {
        "group"}


def test_an_unrelated_item_is_not_found():
    assert methods({"text": "def add(a, b):\n    return a + b\n"}, group="someone/else") == set()
