"""`heldout probe` and `heldout plan` against a loopback server with a known capacity: the
ladder stops where the server starts refusing, the knee is at or under the capacity, and the
plan turns the probe's throughput into an expected wall time before anything runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from heldout.agents.probe import Level, knee, ladder, should_stop
from tests.conftest import configure_small_project, copy_project
from tests.latency_server import LatencyServer


def level(in_flight: int, throughput: float, refused: int = 0) -> Level:
    requests = 100
    return Level(in_flight, requests, (requests - refused) / throughput, 0.1, 0.2, refused, 0)


def test_the_ladder_climbs_in_powers_of_two_to_the_ceiling():
    assert ladder(1) == [1]
    assert ladder(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert ladder(48) == [1, 2, 4, 8, 16, 32, 48]


def test_the_knee_is_the_lowest_level_within_90_percent_of_the_best():
    measured = [level(1, 10), level(2, 19), level(4, 34), level(8, 37), level(16, 38)]
    assert knee(measured).in_flight == 8  # 37 >= 0.9 * 38; 34 is not
    assert should_stop(measured)  # 34 -> 37 and 37 -> 38: both under +10%
    assert not should_stop(measured[:4])  # 19 -> 34 was not


def test_a_level_that_is_refused_stops_the_ladder_and_is_never_the_knee():
    measured = [level(1, 10), level(2, 20), level(4, 50, refused=30)]
    assert should_stop(measured)
    assert knee(measured).in_flight == 2


def heldout(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=project,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def server():
    started = LatencyServer(latency_s=0.05, capacity=16).start()
    yield started
    started.stop()


def test_probe_finds_the_servers_capacity_and_plan_prices_the_run_with_it(tmp_path, server):
    project = configure_small_project(copy_project(tmp_path / "p"), tasks=20, n=5, checkpoints={
        "base": {"agent": "demo", "skill": 0.0},
        "served": {"agent": "openai", "base_url": server.url, "model": "loopback"}})
    probed = heldout(project, "probe", "served", "--max-in-flight", "64", "--max-tokens", "8")
    assert probed.returncode == 0, probed.stderr
    record = json.loads((project / ".heldout/probe/served.json").read_text())
    measured = [entry["in_flight"] for entry in record["levels"]]
    assert measured[:5] == [1, 2, 4, 8, 16]
    assert measured[-1] == 32  # refused at 32 in flight: the ladder stops there
    assert record["levels"][-1]["refused"] > 0
    assert 8 <= record["knee"]["in_flight"] <= 16
    assert f"It would use max_in_flight: {record['knee']['in_flight']}" in probed.stdout
    # 16 in flight at 0.05 s: about 320 requests a second at best.
    assert 100 < record["knee"]["throughput"] < 400

    planned = heldout(project, "plan")
    assert planned.returncode == 0, planned.stderr
    line = next(row for row in planned.stdout.splitlines() if "rollouts:served" in row)
    rate = record["knee"]["throughput"]
    assert f"ep/s, probe: {rate:.3g} req/s at {record['knee']['in_flight']} in flight)" in line
    assert "no endpoint: a local agent" in next(
        row for row in planned.stdout.splitlines() if "rollouts:base" in row)
    assert "test access: one" in planned.stdout
    assert not (project / "data/split/manifest.json").exists()  # nothing ran


def test_plan_counts_what_the_resume_cache_holds(tmp_path, monkeypatch):
    from stages import rollouts, split

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    project = configure_small_project(copy_project(tmp_path / "p"), tasks=20, n=3, checkpoints={
        "base": {"agent": "demo", "skill": 0.0}, "other": {"agent": "demo", "skill": 1.0}})
    split.run(project)
    done = rollouts.run("base", project)["episodes"]
    planned = heldout(project, "plan")
    assert planned.returncode == 0, planned.stderr
    rows = {line.split()[0]: line.split() for line in planned.stdout.splitlines()
            if line.strip().startswith("rollouts:")}
    assert rows["rollouts:base"][1:4] == [f"{done:,}", f"{done:,}", f"{done:,}"]
    assert rows["rollouts:base"][4] == "done"
    assert rows["rollouts:other"][2] == "0"
    # Priced at the pace base's run measured (MLflow): its seconds an episode, times other's.
    import mlflow

    [run] = mlflow.MlflowClient().search_runs(
        [mlflow.MlflowClient().get_experiment_by_name("heldout").experiment_id],
        "attributes.run_name = 'rollouts:base'")
    each = run.data.metrics["episodes_s"] / run.data.metrics["episodes"]
    other = next(line for line in planned.stdout.splitlines() if "rollouts:other" in line)
    assert f"({each:.3g} s an episode, the median of 1 rollout run(s))" in other
    assert " to " not in other  # a measured run's pace holds its slowest episodes already
    manifest = yaml.safe_load((project / "data/split/manifest.json").read_text())
    assert f"{manifest['counts']['val']} val and {manifest['counts']['test']} test" in (
        planned.stdout)
    # The test access as params.reruns runs it: 2 arms × 4 runs × the harness's 3 episodes,
    # and the oracle's one a task.
    test_row = next(line for line in planned.stdout.splitlines()
                    if "test (2 arms x 4 runs x 3 episodes, and the oracle)" in line)
    assert f"{(2 * 4 * 3 + 1) * manifest['counts']['test']:,}" in test_row


def test_a_trial_of_a_local_agent_prices_a_project_that_never_ran(tmp_path):
    from cli.split_to_come import split_to_come

    project = configure_small_project(copy_project(tmp_path / "p"), tasks=20, n=3, checkpoints={
        "base": {"agent": "demo", "skill": 0.0}, "other": {"agent": "demo", "skill": 1.0}})
    unmeasured = heldout(project, "plan")
    assert "no stage's pace is measured yet" in unmeasured.stdout
    assert "run `heldout probe CHECKPOINT`" in unmeasured.stdout

    tried = heldout(project, "probe", "base", "--episodes", "6")
    assert tried.returncode == 0, tried.stderr
    record = json.loads((project / ".heldout/probe/base.json").read_text())
    assert (record["kind"], record["split"], record["episodes"]) == ("local", "val", 6)
    assert "passed" not in record  # a pace, never an outcome
    assert record["episode_s"] == pytest.approx(record["seconds"] / 6)
    assert record["stage_start_s"] > 0
    # The tasks the rollouts stage will run, and nothing of the run it prices: no split, no
    # resume cache, no MLflow run.
    params = yaml.safe_load((project / "params.yaml").read_text())
    val = sorted(task.id for task in split_to_come(project, params, "test")["val"])
    assert record["tasks"] == val[:2]
    assert not (project / "data/split/manifest.json").exists()
    assert not (project / ".heldout/episodes.sqlite").exists()
    assert not (project / "mlflow.db").exists()

    planned = heldout(project, "plan")
    assert planned.returncode == 0, planned.stderr
    rows = {line.split()[0]: line for line in planned.stdout.splitlines()
            if line.strip().startswith(("rollouts:", "test (", "split"))}
    each = record["episode_s"]
    assert f"({each:.3g} s an episode in its trial)" in rows["rollouts:base"]
    assert f"({each:.3g} s an episode, base's trial)" in rows["rollouts:other"]
    assert f"({each:.3g} s an episode, base's trial)" in rows["test"]
    assert "(its start; its own work unmeasured)" in rows["split"]
    total = next(line for line in planned.stdout.splitlines() if line.startswith("to run:"))
    assert "nothing measured" not in total
    # A trial that met no time limit cannot say how long a stage's slowest episode holds it up:
    # the plan adds one program time limit (0.5 s here) a rollout, 4 of them in the test stage.
    # Each end as the plan writes a duration: "42 s", or "1 min 05 s" on a machine slow enough
    # that the trial's pace prices the run above a minute.
    duration = r"(?:(\d+) min )?(\d+) s"
    found = re.search(rf"expected {duration} to {duration} if each rollout waits once on a "
                      r"program at its time limit", total)
    assert found, total
    low, high = (60 * int(minutes or 0) + int(seconds)
                 for minutes, seconds in (found.groups()[:2], found.groups()[2:]))
    # Two checkpoints' rollouts, the canaries, the sweep and the test's four runs: 8 x 0.5 s.
    assert abs(high - low - 4) <= 1  # each end rounded to the second


def test_a_trial_of_a_split_that_would_leave_val_empty_is_one_line(tmp_path):
    project = configure_small_project(copy_project(tmp_path / "p"), tasks=20, n=3,
                                      split={"fractions": {"train": 0.499, "val": 0.001,
                                                           "test": 0.5}})
    tried = heldout(project, "probe", "base")
    assert tried.returncode == 2, tried.stderr
    assert tried.stderr.strip().splitlines()[-1].startswith(
        "error: split 'val' would be empty: 20 tasks in 20 groups")
    assert not (project / ".heldout/probe/base.json").exists()
