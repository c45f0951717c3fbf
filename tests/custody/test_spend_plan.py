"""The plan before the spend (issue 24): the test stage compares the selected candidate with
the base on val by the verdict's own rule, and refuses to open the test split when it would
not decide, unless params.test.spend names the candidate with a reason, which the ledger keeps
with the access."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from heldout.custody.guard import LEDGER
from heldout.custody.ledger import read_ledger
from heldout.custody.spend import SpendConfig, plan_shortfalls, spend_refusal, spent_reason
from heldout.statistics.decision import decide
from stages import test as test_stage
from stages.val_plan import val_plan
from tests.custody.test_lock import set_params
from tests.custody.test_test_access import error_lines, outcomes


def plan_of(base_passes: int, candidate_passes: int, tasks: int = 200):
    base = np.arange(tasks) < base_passes
    candidate = np.arange(tasks) < candidate_passes
    return decide(base.astype(float), candidate.astype(float), n_episodes=1,
                  base_passed=base, candidate_passed=candidate)


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
                         f"detectable effect on val is {100 * plan.support.mde:.1f} points")
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
    assert "only 15 val tasks that either arm ever fails, fewer than 30" in plan_shortfalls(easy)


def test_a_worse_candidate_on_val_is_refused_too():
    assert plan_shortfalls(plan_of(120, 80))[0].startswith("its val gain over the base is -20.0")


def test_the_stage_refuses_with_one_line_and_a_refused_ledger_line(selected_copy: Path):
    project = selected_copy
    set_params(project, "test", spend={"candidates": [], "reason": ""})
    plan = val_plan(project, "late", "base")
    assert plan_shortfalls(plan)  # a 40-task project: a third of them in val
    result = subprocess.run([sys.executable, "-m", "cli.main", "stage", "test"], cwd=project,
                            env=os.environ, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (error,) = error_lines(result.stderr)
    assert (f"the plan says the test split would not decide for late: val has "
            f"{plan.support.tasks} tasks in {plan.support.groups} groups, fewer than 30") in error
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
