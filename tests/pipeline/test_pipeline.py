"""`dvc repro` on a fresh copy of the project, as a new user runs it: real DVC, real Prefect
(its temporary server on loopback), real MLflow store at the project's default location.
The task set and checkpoints are cut down so the whole pipeline runs in about a minute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from tests.conftest import VERDICT_LINE, configure_small_project

VENV_BIN = str(Path(sys.executable).parent)


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture
def fresh_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("MLFLOW_", "PREFECT_", "DVC_", "DO_NOT_TRACK", "HELDOUT_TEST_KEY",
                               "XDG_CONFIG_HOME"))
    }
    env.update(
        HOME=str(home),
        PATH=f"{VENV_BIN}:{env['PATH']}",
        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org",
        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.org",
    )
    return env


def cut_down(project: Path, checkpoints: dict) -> None:
    configure_small_project(project, tasks=30, n=2, checkpoints=checkpoints)


def ledger_of(project: Path) -> list[dict]:
    return [json.loads(line) for line in
            (project / "ledger/test_access.jsonl").read_text().splitlines()]


def stages_run(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


# The slow tier's: the whole pipeline under real `dvc repro`, twice. `make test` keeps a whole
# run (tests/pipeline/test_terminal.py) and the program kind's end to end
# (tests/tasks/test_python_program.py).
@pytest.mark.slow
def test_dvc_repro_runs_the_pipeline_then_only_what_changed(project: Path, fresh_env):
    checkpoints = {"base": {"agent": "demo", "skill": -0.5},
                   "step_10": {"agent": "demo", "skill": 0.8},
                   "hacker": {"agent": "demo", "policy": "hacker"}}
    cut_down(project, checkpoints)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        assert run(cmd, project, fresh_env).returncode == 0

    first = run(["dvc", "repro"], project, fresh_env)
    assert first.returncode == 0, first.stdout + first.stderr
    # No key was configured: the embedded default made the user's own, and said where.
    key_file = Path(fresh_env["HOME"]) / ".config" / "heldout" / "test-key"
    assert f"heldout: created your test key in {key_file} (mode 0600)" in first.stderr
    assert stages_run(first.stdout) == {"split", "decontaminate", "rollouts@base",
                                        "rollouts@step_10", "rollouts@hacker", "score",
                                        "select", "sensitivity", "test", "report"}
    scores = json.loads((project / "data/scores/val.json").read_text())
    assert set(scores["checkpoints"]) == {"base", "step_10", "hacker"}
    # The public-test hacker trips the alarm; the honest checkpoint does not; both are shown.
    assert {name: alarm["fired"] for name, alarm in scores["alarms"].items()} == {
        "step_10": False, "hacker": True}
    assert "score: ALARM hacker:" in first.stdout
    selection = json.loads((project / "data/selection.json").read_text())
    assert [row["checkpoint"] for row in selection["table"] if row["public_hidden_alarm"]] == [
        "hacker"]
    report = (project / "reports/report.md").read_text()
    assert VERDICT_LINE.search(report)
    assert "Public-versus-hidden alarm, hacker (val):" in report
    audited = run(["heldout", "audit"], project, fresh_env)
    assert audited.returncode == 0, audited.stdout + audited.stderr

    second = run(["dvc", "repro"], project, fresh_env)
    assert second.returncode == 0, second.stderr
    assert stages_run(second.stdout) == set()
    assert "up to date" in second.stdout
    # And the plan says so: an up-to-date project has nothing to run (issue 39 item 2).
    planned = run(["heldout", "plan"], project, fresh_env)
    assert planned.returncode == 0, planned.stderr
    assert "to run: nothing: every stage is up to date with dvc.lock" in planned.stdout

    # A new checkpoint runs its own rollouts and what reads all of them (the sweep reads
    # params.checkpoints), nothing else; it wins on val, so the test stage refuses a second look
    # at the test split without a reason.
    cut_down(project, {**checkpoints, "step_20": {"agent": "demo", "skill": 2.5}})
    planned = run(["heldout", "plan"], project, fresh_env)
    rows = {line.split()[0]: line for line in planned.stdout.splitlines()
            if line.startswith("  rollouts:")}
    assert rows["rollouts:base"].endswith("up to date")
    assert not rows["rollouts:step_20"].endswith(("up to date", "done"))
    third = run(["dvc", "repro"], project, fresh_env)
    assert third.returncode != 0
    assert stages_run(third.stdout) == {"rollouts@step_20", "score", "select", "sensitivity",
                                        "test"}
    assert "params.test.reaccess.reason" in third.stdout + third.stderr
    # DVC keeps the refused stage's persisted outputs: the report still has what it describes.
    kept = json.loads((project / "data/test/access.json").read_text())
    assert kept["candidate"] == "step_10" and (project / "data/test/episodes.sealed").is_file()
    assert (project / "data/test/rollouts/candidate.parquet").is_file()
    assert VERDICT_LINE.search((project / "reports/report.md").read_text())
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["test"]["reaccess"] = {"access": "step_20",
                                  "reason": "step_20 is the release candidate"}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    fourth = run(["dvc", "repro"], project, fresh_env)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert stages_run(fourth.stdout) == {"test", "report"}
    ledger = ledger_of(project)
    assert [e["outcome"] for e in ledger] == ["opened", "closed", "refused", "opened", "closed"]

    # Forcing the test stage again with its outputs in place is not an access: nothing opens.
    forced = run(["dvc", "repro", "--force", "--single-item", "test"], project, fresh_env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "reading them is not an access" in forced.stdout
    assert ledger_of(project) == ledger
    # Without them (deleted) the access has closed all the same: its numbers are not computed
    # again. The stage is refused and says how to restore them; restored, it opens nothing.
    (project / "data/test/access.json").unlink()
    forced = run(["dvc", "repro", "--force", "--single-item", "test"], project, fresh_env)
    assert forced.returncode != 0
    assert "numbers are fixed" in forced.stdout + forced.stderr
    ledger = ledger_of(project)
    assert [e["outcome"] for e in ledger][-1] == "refused"
    assert [e["outcome"] for e in ledger].count("opened") == 2
    assert run(["dvc", "checkout", "data/test/access.json"], project, fresh_env).returncode == 0
    forced = run(["dvc", "repro", "--force", "--single-item", "test"], project, fresh_env)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "reading them is not an access" in forced.stdout
    assert ledger_of(project) == ledger
    assert run(["heldout", "audit"], project, fresh_env).returncode == 0

    client = mlflow.MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("heldout")
    runs = client.search_runs([experiment.experiment_id], "tags.`heldout.stage` = 'split'")
    assert len(runs) == 1, "no-op repros must not run the split again"
    assert runs[0].data.tags["heldout.test_version"].startswith("t-")
    assert runs[0].data.tags["heldout.git_commit"]
    rollout_runs = client.search_runs([experiment.experiment_id],
                                      "tags.`heldout.stage` = 'rollouts'")
    assert sorted(r.data.tags["heldout.checkpoint"] for r in rollout_runs) == [
        "base", "hacker", "step_10", "step_20"]
    # Two runs read the test split: the first access and the reaccess.
    test_runs = client.search_runs([experiment.experiment_id], "datasets.context = 'test'")
    assert len(test_runs) == 2 and {r.data.tags["heldout.test_access"] for r in test_runs} == {
        "true"}
    assert len({r.data.tags["heldout.harness"] for r in rollout_runs}) == 1

    # A sweep is saved as an experiment with its val metrics; its test stage opens nothing and
    # records nothing, and its report is the val selection. --temp leaves the workspace as it
    # was, params.yaml to the byte.
    for cmd in (["git", "add", "-A"], ["git", "commit", "-qm", "accessed"]):
        assert run(cmd, project, fresh_env).returncode == 0
    params_before = (project / "params.yaml").read_bytes()
    swept = run(["dvc", "exp", "run", "--temp", "-n", "sweep-n3", "-S", "harness.n=3"], project,
                fresh_env)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert "test: not run in experiment sweep-n3: a sweep" in swept.stdout
    assert "Traceback" not in swept.stdout + swept.stderr
    assert run(["git", "status", "--porcelain"], project, fresh_env).stdout == ""
    assert (project / "params.yaml").read_bytes() == params_before
    assert ledger_of(project) == ledger
    assert VERDICT_LINE.search((project / "reports/report.md").read_text())
    # In the workspace (DVC's own `dvc exp run`: a repro, then `dvc exp save`), the same.
    in_place = run(["dvc", "exp", "run", "-n", "sweep-n4", "-S", "harness.n=4"], project,
                   fresh_env)
    assert in_place.returncode == 0, in_place.stdout + in_place.stderr
    assert ledger_of(project) == ledger
    assert "No test verdict in a sweep" in (project / "reports/report.md").read_text()
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project, fresh_env).stdout)
    experiments = {exp["name"]: exp for baseline in shown
                   for exp in baseline.get("experiments") or [] if exp.get("name")}
    assert set(experiments) == {"sweep-n3", "sweep-n4"}, shown
    for name, n in (("sweep-n3", 3), ("sweep-n4", 4)):
        data = experiments[name]["revs"][0]["data"]
        assert data["params"]["params.yaml"]["data"]["harness"]["n"] == n
        chosen = data["metrics"]["metrics/val/step_20.json"]["data"]
        assert 0 <= chosen["pass@1"] <= 1, chosen
    assert run(["heldout", "audit"], project, fresh_env).returncode == 0

    # The experiment named to open the test split, in DVC's temporary copy, with another base
    # model: a new access to tasks already opened, refused (the reason in params was spent by
    # the access it named). The refusal is in the project's ledger (the copy is thrown away),
    # and the audit stays clean.
    named = run(["dvc", "exp", "run", "--temp", "-n", "base-b", "-S", "test.experiment=base-b",
                 "-S", "checkpoints.base.skill=-0.4"], project, fresh_env)
    assert named.returncode != 0
    assert "error: refused: the reason 'step_20 is the release candidate' was spent" in (
        named.stderr), named.stderr[-3000:]
    after = ledger_of(project)
    assert after[:len(ledger)] == ledger and [e["outcome"] for e in after[len(ledger):]] == [
        "refused"]
    assert after[-1]["base_settings"] != ledger[-1]["base_settings"]
    audited = run(["heldout", "audit"], project, fresh_env)
    assert audited.returncode == 0, audited.stdout + audited.stderr

    # With no Prefect API configured, a bare `dvc repro` runs its stages without Prefect (no
    # temporary server per stage): no Prefect state anywhere, the user's home least of all.
    assert not (project / ".prefect").exists()
    assert not (Path(fresh_env["HOME"]) / ".prefect").exists()
    assert (project / "mlartifacts").is_dir()
