"""`heldout plan` says what the test stage would do with its access before it runs (issue 39,
item 2): open, read recorded results, or be refused, in the words the lock then uses. Each
forecast here is followed by the stage itself, and the two must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.paces import Paces
from cli.plan import access_line, forecast, foreseen_access, split_counts
from heldout.custody.guard import LEDGER, TestSetAccessError
from heldout.custody.ledger import read_ledger
from stages import test as test_stage
from stages.common import read_params
from tests.custody.test_access_identity import set_checkpoint
from tests.custody.test_lock import set_params


def foreseen(project: Path) -> str:
    return access_line(project, read_params(project))


def outcomes(project: Path) -> list[str]:
    return [entry["outcome"] for entry in read_ledger(project / LEDGER)]


def refusal(project: Path) -> str:
    with pytest.raises(TestSetAccessError) as refused:
        test_stage.run(project)
    return str(refused.value)


def test_a_first_access_is_foreseen_to_open_and_opens(selected_copy: Path):
    line = foreseen(selected_copy)
    assert line.startswith("test access: opens, late against base (if select keeps choosing "
                           "late): the first access to test set ")
    test_stage.run(selected_copy)
    assert outcomes(selected_copy) == ["opened", "closed"]
    assert foreseen(selected_copy).startswith("test access: none: access ")
    assert "the outputs hold its results, and reading them opens nothing" in (
        foreseen(selected_copy))
    # A stale test stage that will read them is planned at no episode.
    params = read_params(selected_copy)
    planned = forecast(selected_copy, params, split_counts(selected_copy, params)[0], {"test"},
                       Paces({}), foreseen_access(selected_copy, params))
    [test_row] = [row for row in planned.rows if row.work.address == "test"]
    assert (test_row.left, test_row.expected) == (0, "reads the recorded results")
    assert test_row.work.episodes > 0 and planned.episodes == 0


def test_a_changed_base_is_foreseen_refused_in_the_words_of_the_refusal(selected_copy: Path):
    test_stage.run(selected_copy)
    set_checkpoint(selected_copy, "base", skill=1.0)  # another model behind the base's name
    line = foreseen(selected_copy)
    assert line.startswith("test access: REFUSED, late against base")
    why = line.split("): ", 1)[1]
    assert "already opened by 1 earlier access(es)" in why
    assert f"refused: {why}. Every look at a test set spends it." == refusal(selected_copy)
    assert outcomes(selected_copy) == ["opened", "closed", "refused"]

    set_params(selected_copy, "test", reaccess={"access": "late", "reason": "the new base"})
    assert foreseen(selected_copy).startswith("test access: opens, late against base")
    assert "access number 2 to test set" in foreseen(selected_copy)
    test_stage.run(selected_copy)
    assert outcomes(selected_copy)[-2:] == ["opened", "closed"]

    set_checkpoint(selected_copy, "base", skill=1.5)  # the reason is spent
    line = foreseen(selected_copy)
    assert "the reason 'the new base' was spent by ledger line" in line
    assert refusal(selected_copy).startswith("refused: " + line.split("): ", 1)[1])


def test_a_closed_access_without_its_outputs_is_foreseen_refused(selected_copy: Path):
    test_stage.run(selected_copy)
    (selected_copy / "data/test/access.json").unlink()
    line = foreseen(selected_copy)
    assert line.startswith("test access: REFUSED")
    assert "its numbers are fixed and its outputs are not in place" in line
    assert "numbers are fixed" in refusal(selected_copy)


def test_a_plan_that_would_not_decide_is_foreseen_refused_in_the_words_of_the_refusal(
        selected_copy: Path):
    # The gate before the spend refuses before the lock is asked (issue 41): a 40-task project
    # has too few val tasks, too few that can fail on the test set, and no room to the ceiling
    # for its MDE.
    set_params(selected_copy, "test", spend={"candidates": [], "reason": ""})
    line = foreseen(selected_copy)
    assert line.startswith("test access: REFUSED, late against base")
    why = line.split("): ", 1)[1]
    assert why.startswith("the plan says the test split would not decide for late: val has ")
    assert "val tasks are ones either arm ever fails: about " in why
    assert refusal(selected_copy).startswith(f"refused: {why}. ")
    assert outcomes(selected_copy) == ["refused"]
    # Named with a reason, the plan foresees the opening the stage then makes.
    set_params(selected_copy, "test", spend={"candidates": ["late"], "reason": "a demo"})
    assert foreseen(selected_copy).startswith("test access: opens, late against base")
