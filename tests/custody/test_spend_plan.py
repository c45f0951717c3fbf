"""The plan before the spend (issues 24 and 41): the test stage compares the selected candidate
with the base on val by the verdict's own rule, and refuses to open the test split when it would
not decide (too few tasks, fewer than 50 failure-capable ones, a base too near the ceiling, a
gain below the MDE), unless params.test.spend names the candidate with a reason, which the
ledger keeps with the access."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from heldout.custody.guard import LEDGER
from heldout.custody.identity import ParamsReads
from heldout.custody.ledger import read_ledger
from heldout.custody.spend import (
    SpendConfig,
    SpendPlan,
    plan_shortfalls,
    spend_refusal,
    spent_reason,
)
from heldout.errors import StageError
from heldout.statistics.decision import decide
from stages import test as test_stage
from stages.access_inputs import access_inputs
from stages.common import read_params
from stages.val_plan import spend_plan, val_plan
from tests.custody.test_lock import set_params
from tests.custody.test_test_access import error_lines, outcomes


def plan_of(base_passes: int, candidate_passes: int, tasks: int = 200,
            test_tasks: int | None = None) -> SpendPlan:
    """Val tasks the base passes (the first base_passes) and the candidate passes, once each;
    the test set as large as val unless said."""
    base = np.arange(tasks) < base_passes
    candidate = np.arange(tasks) < candidate_passes
    return SpendPlan(decide(base.astype(float), candidate.astype(float), n_episodes=1,
                            base_passed=base, candidate_passed=candidate),
                     tasks if test_tasks is None else test_tasks)


def test_a_val_gain_the_verdict_can_detect_opens_and_spends_no_reason():
    # +20 points on 200 tasks: far above the verdict's MDE (about 4 points).
    plan = plan_of(80, 120)
    assert plan_shortfalls(plan) == []
    named = SpendConfig(candidates=["late"], reason="would be needed otherwise")
    assert spend_refusal(plan, "late", SpendConfig()) is None
    assert spent_reason(plan, "late", named) == ""


def test_a_gain_below_the_mde_is_refused_unless_named_with_a_reason():
    plan = plan_of(80, 82)  # +1 point on 200 tasks, MDE 4.0
    (shortfall,) = plan_shortfalls(plan)
    assert shortfall == ("its val gain over the base is +1.0 points and the verdict's minimum "
                         f"detectable effect on val is {100 * plan.val.support.mde:.1f} points")
    refusal = spend_refusal(plan, "late", SpendConfig())
    assert refusal.startswith("the plan says the test split would not decide for late: ")
    assert refusal.endswith("params.test.spend.candidates: [late] with a reason")
    other = spend_refusal(plan, "late", SpendConfig(candidates=["early"], reason="why"))
    assert "params.test.spend names early, not late" in other
    assert spend_refusal(plan, "late", SpendConfig(candidates=["late"], reason="  ")) is not None
    spend = SpendConfig(candidates=["late"], reason="the release needs a number")
    assert spend_refusal(plan, "late", spend) is None
    assert spent_reason(plan, "late", spend) == "the release needs a number"


def test_too_few_val_tasks_or_failure_capable_ones_are_shortfalls():
    few = plan_of(5, 20, tasks=25)
    assert any(line.startswith("val has 25 tasks in 25 groups, fewer than 30")
               for line in plan_shortfalls(few))
    easy = plan_of(185, 200)  # 15 tasks either arm fails
    assert ("15 of 200 val tasks are ones either arm ever fails: about 15 of the test's 200, "
            "fewer than 50") in plan_shortfalls(easy)


def test_fewer_than_50_failure_capable_tasks_are_refused_before_the_spend_unless_named():
    # 100 val tasks; the candidate passes the first 95, the base the first 51 (or 50): the
    # tasks either arm ever fails are the 49 (or 50) the base fails. +44 (+45) points are far
    # above the MDE, and a base at 51% leaves room: the count is the one shortfall.
    refused, opened = plan_of(51, 95, tasks=100), plan_of(50, 95, tasks=100)
    assert (refused.val.support.failure_capable, opened.val.support.failure_capable) == (49, 50)
    assert plan_shortfalls(refused) == [
        "49 of 100 val tasks are ones either arm ever fails: about 49 of the test's 100, "
        "fewer than 50"]
    assert plan_shortfalls(opened) == []
    refusal = spend_refusal(refused, "late", SpendConfig())
    assert refusal.startswith("the plan says the test split would not decide for late: 49 of "
                              "100 val tasks")
    named = SpendConfig(candidates=["late"], reason="a hard set is not yet built")
    assert spend_refusal(refused, "late", named) is None
    assert spent_reason(refused, "late", named) == "a hard set is not yet built"
    assert spent_reason(opened, "late", named) == ""  # not needed: nothing spent


def test_the_failure_capable_count_is_val_s_share_of_the_test_set():
    # The verdict counts them on the test set, which the plan may not read: 40 of 80 val tasks
    # are a half, 50 of a 100-task test set; 39 of 80 are 48.75 of it.
    assert plan_shortfalls(plan_of(40, 78, tasks=80, test_tasks=100)) == []
    assert plan_shortfalls(plan_of(41, 78, tasks=80, test_tasks=100)) == [
        "39 of 80 val tasks are ones either arm ever fails: about 49 of the test's 100, "
        "fewer than 50"]


def test_a_base_too_near_the_ceiling_is_refused_before_the_spend():
    # The verdict voids a comparison whose base leaves less than twice its MDE to gain: a
    # base at 95% with an MDE of 4 points leaves 5 < 8. At 91% it leaves 9 >= 8.
    plan = plan_of(80, 120)  # +20 points, 120 failure-capable tasks: no other shortfall
    near = replace(plan, val=replace(plan.val, support=replace(
        plan.val.support, base_pass_at_1=0.95, mde=0.04)))
    assert plan_shortfalls(near) == [
        "the base's val pass@1 leaves 5.0 points to gain, less than twice the verdict's "
        "minimum detectable effect on val (4.0 points)"]
    room = replace(near, val=replace(near.val, support=replace(
        near.val.support, base_pass_at_1=0.91)))
    assert plan_shortfalls(room) == []
    spend = SpendConfig(candidates=["late"], reason="the ceiling is the point of this set")
    assert spend_refusal(near, "late", spend) is None
    assert spent_reason(near, "late", spend) == "the ceiling is the point of this set"


def test_a_worse_candidate_on_val_is_refused_too():
    assert plan_shortfalls(plan_of(120, 80))[0].startswith("its val gain over the base is -20.0")


def test_the_stage_refuses_with_one_line_and_a_refused_ledger_line(selected_copy: Path):
    project = selected_copy
    set_params(project, "test", spend={"candidates": [], "reason": ""})
    plan = spend_plan(project, access_inputs(project, ParamsReads(read_params(project))))
    assert plan_shortfalls(plan)  # a 40-task project: a third of them in val
    result = subprocess.run([sys.executable, "-m", "cli.main", "stage", "test"], cwd=project,
                            env=os.environ, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (error,) = error_lines(result.stderr)
    support = plan.val.support
    assert (f"the plan says the test split would not decide for late: val has "
            f"{support.tasks} tasks in {support.groups} groups, fewer than 30") in error
    assert outcomes(project) == ["refused"]
    (refused,) = read_ledger(project / LEDGER)
    assert "the plan says the test split would not decide for late" in refused["reason"]


def test_a_named_spend_opens_and_the_ledger_keeps_its_reason(selected_copy: Path):
    project = selected_copy
    set_params(project, "test", spend={"candidates": ["late"], "reason": "a demo, by design"})
    test_stage.run(project)
    assert outcomes(project) == ["opened", "closed"]
    opened = read_ledger(project / LEDGER)[0]
    assert opened["spend"] == "a demo, by design"


def test_an_arm_the_val_scores_do_not_hold_is_said_not_decided_on_nothing(selected_copy: Path):
    with pytest.raises(StageError, match="the val scores hold no episode of nobody: run the "
                                         "score stage"):
        val_plan(selected_copy, "nobody", "base")
