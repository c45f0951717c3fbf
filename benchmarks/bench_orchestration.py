"""What orchestration costs, measured on fresh copies of this project (run by hand, ~20 min).

    .venv/bin/python benchmarks/bench_orchestration.py [--only full,noop,add,runners,overhead]

- full:     `heldout pipeline` (what `make repro` runs) on the embedded default; the wall time
            split into episodes, other stage work, and orchestration (Prefect + DVC + MLflow:
            everything outside the stages' MLflow runs, plus their MLflow set-up). Goal: <= 20%.
- noop:     `dvc repro` and `heldout pipeline` again on the finished project. Goal: <= 3 s.
- add:      six checkpoints, then a seventh added. Goal: <= 1.5/6 of the six's wall time.
- runners:  one checkpoint's rollouts on threads vs a Dask LocalCluster of 2 workers,
            alternated, episodes/s.
- overhead: Prefect's cost per stage process: the same stage run directly, as a flow on one
            shared API server, the same forked from the pipeline's warm starter (the
            pipeline's way), and as a flow with no server configured (Prefect's temporary
            server per process: a bare `dvc repro`). Goal: <= 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def environment() -> dict[str, str]:
    """A user's shell: the venv on PATH, telemetry off, no store or server pointed anywhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "PREFECT_", "DVC_", "HELDOUT_"))}
    env.update(PATH=f"{BIN}:{env['PATH']}", DO_NOT_TRACK="true", DVC_NO_ANALYTICS="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", MLFLOW_DISABLE_TELEMETRY="true",
               GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.org",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@example.org")
    return env


def fresh_project(destination: Path, edit=None) -> Path:
    """The work tree's tracked files (uncommitted edits included) as a new git repository."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    for name in tracked:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    for name in ("dvc.lock",):
        (destination / name).unlink(missing_ok=True)
    if edit:
        params = yaml.safe_load((destination / "params.yaml").read_text())
        edit(params)
        (destination / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "bench"]):
        subprocess.run(cmd, cwd=destination, check=True, env=environment())
    return destination


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env or environment(), capture_output=True,
                          text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed in {cwd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return wall


def mlflow_runs(project: Path) -> list:
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("heldout")
    return client.search_runs([experiment.experiment_id], max_results=10_000,
                              order_by=["attributes.start_time ASC"])


def breakdown(project: Path, started: float, wall: float) -> dict:
    """Episodes, other stage work and orchestration in the wall time of the pipeline run that
    started at `started` (epoch seconds)."""
    import mlflow

    runs = [r for r in mlflow_runs(project) if r.info.start_time >= started * 1000]
    pipeline = next(r for r in runs if r.data.tags.get("heldout.stage") == "pipeline")
    stage_runs = [r for r in runs if r.data.tags.get("heldout.stage") != "pipeline"]
    summary = mlflow.artifacts.load_dict(f"{pipeline.info.artifact_uri}/pipeline.json")
    in_runs = sum((r.info.end_time - r.info.start_time) / 1000 for r in stage_runs)
    episodes = sum(r.data.metrics.get(key, 0.0) for r in stage_runs
                   for key in ("episodes_s", "canary_episodes_s"))
    in_stage_processes = summary["stage_wall_s"]
    orchestration = wall - in_runs
    return {
        "wall_s": wall, "episodes_s": episodes, "other_stage_work_s": in_runs - episodes,
        "orchestration_s": orchestration, "orchestration_share": orchestration / wall,
        "outside_stage_processes_s": wall - in_stage_processes,
        "stages_run": len(summary["ran"]),
        "per_stage_outside_run_s": (in_stage_processes - in_runs) / max(len(summary["ran"]), 1),
    }


def bench_full(work: Path) -> dict:
    project = fresh_project(work / "full")
    started = time.time()
    wall = timed(["heldout", "pipeline"], project)
    return breakdown(project, started, wall) | {"project": str(project)}


def bench_noop(project: Path) -> dict:
    dvc = [timed(["dvc", "repro"], project) for _ in range(3)]
    pipeline = timed(["heldout", "pipeline"], project)
    return {"dvc_repro_s": dvc, "heldout_pipeline_s": pipeline}


def bench_add(work: Path) -> dict:
    def six(params: dict) -> None:
        params["checkpoints"] = dict(list(params["checkpoints"].items())[:6])

    project = fresh_project(work / "add", six)
    full = timed(["heldout", "pipeline"], project)
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    mine = yaml.safe_load((project / "params.yaml").read_text())
    name, settings = list(params["checkpoints"].items())[6]
    mine["checkpoints"][name] = settings
    # A new best checkpoint opens the test split a second time: that needs a stated reason.
    mine["test"]["reaccess"] = {"access": name, "reason": f"{name} added"}
    (project / "params.yaml").write_text(yaml.safe_dump(mine, sort_keys=False))
    added = timed(["heldout", "pipeline"], project)
    return {"six_s": full, "add_one_s": added, "ratio": added / full, "goal": 1.5 / 6}


def bench_runners(project: Path, repeats: int = 2) -> dict:
    """Alternating runs of one checkpoint's rollouts stage, the episode cache cleared each time,
    all flows on one API server as under the pipeline."""
    sys.path.insert(0, str(REPO))
    from flows.server import prefect_api

    results: dict[str, list[dict]] = {"threads": [], "dask": []}
    with prefect_api():
        env = environment() | {"PREFECT_API_URL": os.environ["PREFECT_API_URL"]}
        for _ in range(repeats):
            for runner in results:
                params = yaml.safe_load((project / "params.yaml").read_text())
                params["orchestration"]["task_runner"] = runner
                (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
                shutil.rmtree(project / ".heldout", ignore_errors=True)
                wall = timed(["heldout", "stage", "rollouts", "--checkpoint", "step_80"],
                             project, env)
                run = mlflow_runs(project)[-1]
                metrics = run.data.metrics
                results[runner].append({"stage_s": wall, "episodes": metrics["episodes"],
                                        "episodes_s": metrics["episodes_s"],
                                        "episodes_per_s": metrics["episodes_per_s"]})
    return results


def bench_overhead(project: Path, repeats: int = 3) -> dict:
    sys.path.insert(0, str(REPO))
    from flows.server import prefect_api

    direct_code = "import sys; from importlib import import_module; " \
                  "import_module('stages.' + sys.argv[1]).run()"
    from flows.warm import WARM_ENV, warm_starts

    results: dict[str, dict[str, list[float]]] = {}
    # The starter forks only for callers with its own Prefect and MLflow settings: give it a
    # user's shell, as `heldout pipeline` does.
    shell = environment()
    os.environ.clear()
    os.environ.update(shell)
    with prefect_api(), warm_starts(project):
        warm = dict(os.environ)
        shared = {k: v for k, v in warm.items() if k != WARM_ENV}
        env = environment() | {"PREFECT_HOME": str(project / ".prefect"),
                               "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}"}
        for stage in ("select", "report"):
            modes = {
                "direct": (["python", "-c", direct_code, stage], env),
                "shared_server": (["heldout", "stage", stage], shared),
                "shared_server_warm_start": (["heldout", "stage", stage], warm),
                "temporary_server": (["heldout", "stage", stage], environment()),
            }
            results[stage] = {mode: [] for mode in modes}
            for _ in range(repeats):
                for mode, (cmd, mode_env) in modes.items():
                    results[stage][mode].append(timed(cmd, project, mode_env))
    summary = {}
    for stage, modes in results.items():
        direct = statistics.median(modes["direct"])
        summary[stage] = {
            "medians_s": {mode: statistics.median(walls) for mode, walls in modes.items()},
            "prefect_overhead_shared_s": statistics.median(modes["shared_server"]) - direct,
            "prefect_overhead_temporary_s": statistics.median(modes["temporary_server"]) - direct,
            "warm_start_saves_s": statistics.median(modes["shared_server"])
            - statistics.median(modes["shared_server_warm_start"]),
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="full,noop,add,runners,overhead")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench_orchestration.json"))
    args = parser.parse_args()
    chosen = args.only.split(",")
    work = args.work or Path(tempfile.mkdtemp(prefix="heldout-bench-orch-"))
    results: dict = {}
    full_project = work / "full"
    if "full" in chosen:
        results["full"] = bench_full(work)
        print(json.dumps(results["full"], indent=1), flush=True)
    for name, bench in (("noop", bench_noop), ("runners", bench_runners),
                        ("overhead", bench_overhead)):
        if name in chosen:
            results[name] = bench(full_project)
            print(name, json.dumps(results[name], indent=1), flush=True)
    if "add" in chosen:
        results["add"] = bench_add(work)
        print("add", json.dumps(results["add"], indent=1), flush=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}; projects in {work}")


if __name__ == "__main__":
    main()
