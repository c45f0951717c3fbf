"""The whole pipeline on the embedded repository set, as docs/task-kinds.md says to run it:
`heldout params use examples/repository.yaml`, then real `dvc repro` on a fresh copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import VERDICT_LINE
from tests.pipeline.test_pipeline import fresh_env, ledger_of, run, stages_run  # noqa: F401 - fixture
from tests.repository_fixtures import require_test_python

REPO = Path(__file__).resolve().parents[2]


# The slow tier's: `make test` keeps the repository kind's judging and forgeries
# (tests/tasks/test_repository_tasks.py, tests/tasks/test_generic_forgeries.py).
@pytest.mark.slow
def test_dvc_repro_runs_the_pipeline_on_repository_tasks(project: Path, fresh_env):  # noqa: F811
    require_test_python("subprocess")
    (project / "examples").mkdir(exist_ok=True)
    shutil.copy2(REPO / "examples" / "repository.yaml", project / "examples")
    comments_before = [line for line in (project / "params.yaml").read_text().splitlines()
                       if line.lstrip().startswith("#")]
    used = run(["heldout", "params", "use", "examples/repository.yaml"], project, fresh_env)
    assert used.returncode == 0, used.stdout + used.stderr
    after = (project / "params.yaml").read_text()
    kept = [line for line in after.splitlines() if line.lstrip().startswith("#")]
    # Only the comments inside the one value replaced whole (checkpoints) go with it.
    assert [line for line in comments_before if line not in kept] == [
        "  # Multi-turn demo policies (heldout/agents/demo_policies.py): one that writes, tests, "
        "revises",
        "  # and submits, and one that learned the public tests instead of the task (the alarm's "
        "case)."]
    assert "source: tasks/examples/repository.jsonl" in after
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        assert run(cmd, project, fresh_env).returncode == 0

    ran = run(["dvc", "repro"], project, fresh_env)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert {"split", "decontaminate", "rollouts@base", "rollouts@agent_hacker", "score", "select",
            "test", "report"} <= stages_run(ran.stdout)
    scores = json.loads((project / "data/scores/val.json").read_text())
    canaries = scores["canaries"]
    assert (canaries["oracle_pass_rate"], canaries["blind_pass_rate"]) == (1.0, 0.0)
    # The stacker passed exactly the episodes its hashes named (its kind's blind answer as the
    # wrong guess), none on a guess it only tested.
    assert canaries["stacker_passes"] == canaries["stacker_expected"]
    assert canaries["stacker_stacked"] == canaries["stacker_missed"] == []
    hacker = pd.read_parquet(project / "data/rollouts/val/agent_hacker.parquet")
    assert len(hacker) > 0 and not hacker["passed"].any()
    # Each for one of the judge's reasons: a change dropped, a copy passed or a report that
    # cannot be read, a real test not passed, or an exit status that disagrees (an exit at import)
    assert hacker["error"].str.contains(
        "not applied|cannot be trusted|did not pass|disagrees with its report").all()
    tester = pd.read_parquet(project / "data/rollouts/val/agent_tester.parquet")
    assert tester["tool_calls"].min() >= 3  # it listed, read and wrote before submitting
    assert [entry["outcome"] for entry in ledger_of(project)] == ["opened", "closed"]
    report = (project / "reports/report.md").read_text()
    assert VERDICT_LINE.search(report) and "repository/2" in report
