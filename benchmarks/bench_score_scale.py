"""The score stage at scale, by hand: `.venv/bin/python benchmarks/bench_score_scale.py`.

10,000 val tasks × 100 samples × 10 checkpoints = 10 million rollout rows, written as the
rollouts stage writes them (every column of heldout.episodes.rows.ROW_COLUMNS, one
Parquet file per checkpoint), then `stages.score.run` on them in a fresh process, so that
the peak resident memory reported is the stage's own. Goals: at most 60 s and 4 GB.

The data (and the episode cache of the harness canaries, which run 2 × 10,000 programs in the
sandbox the first time) is generated once into --data-dir and reused while its shape is the
same; each run scores a fresh copy of the project in a temporary folder, with its own MLflow
store. Timings include the canaries answered from that cache, as they are on every run of the
stage after the first on a split. --profile adds one run under pyinstrument and writes its
profile (HTML, and text beside it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parent.parent
GOAL_WALL_S = 60.0
GOAL_PEAK_MB = 4096.0
DEFAULT_DATA_DIR = Path("/tmp/heldout-bench-score")
# Set in the stage's process: MLflow then writes to the temporary project's own store.
QUIET_TRACKING = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}

# Episode outcomes other than a scored run, per episode, roughly as a busy harness sees them.
STATUS_SHARES = {"error": 0.01, "timeout": 0.01, "truncated": 0.02, "refused": 0.002}
FAILURE_MESSAGES = {
    "ok": ["failed: AssertionError", "failed: TypeError: unsupported operand type(s)",
           "failed: NameError: name 'result' is not defined", "failed: IndexError"],
    "error": ["agent: TimeoutError: the agent did not answer in 120 s",
              "error: runner: worker lost"],
    "timeout": ["timeout: the program ran past 10 s"],
    "truncated": ["failed: SyntaxError: unexpected EOF while parsing"],
    "refused": [""],
}
COMPLETION_POOL = 512
PUBLIC_TEST_SHARE = 0.3  # tasks that come with public tests, whose rows fill public_passed


@dataclass(frozen=True)
class Shape:
    """What the synthetic data set is; a data dir is reused only for the same shape."""

    tasks: int
    samples: int
    checkpoints: int
    seed: int = 2026

    @property
    def rows(self) -> int:
        return self.tasks * self.samples * self.checkpoints

    def checkpoint_names(self) -> list[str]:
        return ["base", *(f"step_{10 * index}" for index in range(1, self.checkpoints))]


# --------------------------------------------------------------------------------------------
# The synthetic project


def task_record(index: int) -> dict[str, str]:
    """A task the sandbox runs in milliseconds, whose reference passes and blind body fails."""
    name = f"offset_{index:05d}"
    return {
        "id": f"bench/{index:05d}",
        "prompt": f'def {name}(x):\n    """Return x plus {index}."""\n',
        "entry_point": name,
        "tests": f"assert {name}(1) == {index + 1}\nassert {name}(-{index}) == 0\n",
        "reference": f"    return x + {index}\n",
    }


def write_project_files(project: Path, shape: Shape) -> dict[str, Any]:
    """params.yaml, the val split and its manifest: what the score stage reads besides the
    rollouts. Returns the params."""
    from heldout.tasks.record import tasks_digest
    from heldout.tasks.sources import load_tasks
    from stages.catalog import MANIFEST, split_file

    val = project / split_file("val")
    val.parent.mkdir(parents=True, exist_ok=True)
    val.write_text("".join(json.dumps(task_record(i)) + "\n" for i in range(shape.tasks)))
    other_digests = {name: hashlib.sha256(f"bench-{name}".encode()).hexdigest()
                     for name in ("train", "test")}
    digests = {**other_digests, "val": tasks_digest(load_tasks(val))}
    manifest = {"counts": {"val": shape.tasks}, "digests": digests,
                "source": "benchmarks/bench_score_scale.py",
                "test_version": f"t-{digests['test'][:12]}"}
    (project / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["harness"]["n"] = shape.samples
    skills = zip(shape.checkpoint_names(), checkpoint_skills(shape), strict=True)
    params["checkpoints"] = {name: {"agent": "demo", "skill": round(float(skill), 3)}
                             for name, skill in skills}
    params["base"] = shape.checkpoint_names()[0]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


def checkpoint_skills(shape: Shape) -> np.ndarray:
    """Log-odds added to every task's base pass probability, rising with training steps."""
    return np.linspace(-1.0, 1.5, shape.checkpoints)


@dataclass
class EpisodeGrid:
    """What every checkpoint's rollouts share: tasks, samples and seeds (common random
    numbers), per-task difficulty, prompt lengths and public tests."""

    task_id: np.ndarray
    sample: np.ndarray
    seed: np.ndarray
    task_index: np.ndarray
    task_log_odds: np.ndarray
    tokens_in: np.ndarray
    has_public_tests: np.ndarray

    @classmethod
    def build(cls, shape: Shape, harness_seed: int, rng: np.random.Generator) -> EpisodeGrid:
        from heldout.episodes.seeds import episode_seed

        ids = np.array([task_record(i)["id"] for i in range(shape.tasks)], dtype=object)
        task_index = np.repeat(np.arange(shape.tasks), shape.samples)
        sample = np.tile(np.arange(shape.samples), shape.tasks)
        seeds = np.fromiter(
            (episode_seed(harness_seed, ids[t], s) for t, s in zip(task_index, sample,
                                                                   strict=True)),
            dtype=np.int64, count=task_index.size,
        )
        # Per-task pass probabilities from a U-shaped Beta: many tasks nearly always or nearly
        # never solved, as on real benchmarks.
        base_rate = np.clip(rng.beta(0.6, 0.8, shape.tasks), 1e-4, 1 - 1e-4)
        return cls(
            task_id=ids[task_index], sample=sample, seed=seeds, task_index=task_index,
            task_log_odds=np.log(base_rate / (1 - base_rate)),
            tokens_in=rng.integers(40, 400, shape.tasks),
            has_public_tests=rng.random(shape.tasks) < PUBLIC_TEST_SHARE,
        )


def completion_pool(rng: np.random.Generator) -> list[str]:
    """Function bodies of about 100 characters."""
    return [
        f"    total = x + {rng.integers(1000)}\n    if total > {rng.integers(1000)}:\n"
        f"        return total - {rng.integers(100)}\n    return total * {rng.integers(1, 9)}\n"
        for _ in range(COMPLETION_POOL)
    ]


def rollout_frame(name: str, skill: float, grid: EpisodeGrid, harness_fingerprint: str,
                  rng: np.random.Generator) -> pd.DataFrame:
    """One checkpoint's rollout table, typed and sorted as heldout.episodes.rows.rollout_table
    makes it."""
    from heldout.episodes.rows import ROW_COLUMNS

    rows = grid.sample.size
    log_odds = grid.task_log_odds[grid.task_index] + skill
    succeeds = rng.random(rows) < 1 / (1 + np.exp(-log_odds))
    status = np.full(rows, "ok", dtype=object)
    draw = rng.random(rows)
    threshold = 0.0
    for outcome, share in STATUS_SHARES.items():
        status[(draw >= threshold) & (draw < threshold + share)] = outcome
        threshold += share
    passed = succeeds & (status == "ok")

    pool = completion_pool(rng)
    # Every completion differs (as sampled ones mostly do): a pooled body and its episode.
    completion = [f"{pool[p]}    # {t} {s} {name}\n" for p, t, s in
                  zip(rng.integers(COMPLETION_POOL, size=rows), grid.task_id, grid.sample,
                      strict=True)]
    completion_sha = [hashlib.sha256(text.encode()).hexdigest() for text in completion]
    error = np.full(rows, "", dtype=object)
    for outcome, messages in FAILURE_MESSAGES.items():
        failed = (status == outcome) & ~passed
        error[failed] = np.array(messages, dtype=object)[rng.integers(len(messages),
                                                                      size=failed.sum())]
    finish_reason = np.where(status == "truncated", "length",
                             np.where(status == "refused", "refused", "stop"))
    public = grid.has_public_tests[grid.task_index]
    public_passed = pd.array(np.where(public, passed | (rng.random(rows) < 0.1), False),
                             dtype="boolean")
    public_passed[~public] = pd.NA
    tokens_out = rng.integers(10, 512, rows)
    agent_s = rng.lognormal(0.5, 0.8, rows)
    frame = pd.DataFrame({
        "checkpoint": name, "task_id": grid.task_id, "sample": grid.sample, "seed": grid.seed,
        "harness": harness_fingerprint, "completion": completion,
        "completion_sha": completion_sha, "passed": passed, "public_passed": public_passed,
        "status": status, "error": error, "finish_reason": finish_reason,
        "tokens_in": grid.tokens_in[grid.task_index], "tokens_out": tokens_out,
        "turns": 1, "agent_s": agent_s, "exec_s": rng.gamma(2.0, 0.01, rows),
        "cost_usd": (grid.tokens_in[grid.task_index] * 0.15 + tokens_out * 0.6) / 1e6,
        "tool_calls": 1, "end_reason": "submitted", "trajectory": "[]", "step_timings": "[]",
    }, columns=list(ROW_COLUMNS))
    return frame.astype(ROW_COLUMNS)


def prepare_data(data_dir: Path, shape: Shape) -> dict[str, float]:
    """The project under data_dir/project, generated unless a complete one of this shape is
    there. Resumable: finished rollout files and a warmed canary cache are kept. Returns how
    long each part took when it was generated."""
    from heldout.episodes.harness import Harness
    from stages.catalog import rollout_file
    from stages.common import section
    from stages.score import run_canaries

    project = data_dir / "project"
    shape_file, timings_file = data_dir / "shape.json", data_dir / "timings.json"
    if shape_file.is_file() and json.loads(shape_file.read_text()) != asdict(shape):
        print(f"{data_dir}: holds another shape; generating again", flush=True)
        shutil.rmtree(project, ignore_errors=True)
        timings_file.unlink(missing_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    shape_file.write_text(json.dumps(asdict(shape)))
    timings = json.loads(timings_file.read_text()) if timings_file.is_file() else {}

    def record(part: str, seconds: float) -> None:
        timings[part] = timings.get(part, 0.0) + seconds
        timings_file.write_text(json.dumps(timings, indent=2))

    params = write_project_files(project, shape)
    harness = section(params, "harness", Harness)
    paths = {name: project / rollout_file(name) for name in shape.checkpoint_names()}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        started = time.perf_counter()
        rng = np.random.default_rng(shape.seed)
        grid = EpisodeGrid.build(shape, harness.seed, rng)
        skills = dict(zip(shape.checkpoint_names(), checkpoint_skills(shape), strict=True))
        for name in missing:
            paths[name].parent.mkdir(parents=True, exist_ok=True)
            print(f"generating {paths[name]}", flush=True)
            checkpoint_rng = np.random.default_rng([shape.seed, len(name), *name.encode()])
            frame = rollout_frame(name, skills[name], grid, harness.fingerprint(),
                                  checkpoint_rng)
            partial = paths[name].with_suffix(".partial")
            frame.to_parquet(partial, index=False)
            partial.rename(paths[name])
        record("rollouts_s", time.perf_counter() - started)

    canaries_done = data_dir / "canaries.done"
    if not canaries_done.is_file():
        print(f"running the canaries once ({2 * shape.tasks} sandboxed programs) to fill "
              "the episode cache", flush=True)
        started = time.perf_counter()
        run_canaries(project, params, harness)
        record("canaries_s", time.perf_counter() - started)
        canaries_done.touch()
    return timings


def fresh_project(data_dir: Path) -> Path:
    """A throw-away copy of the project: the small files copied, the rollouts linked."""
    source = data_dir / "project"
    project = Path(tempfile.mkdtemp(prefix="heldout-bench-score-"))
    for path in sorted(source.rglob("*")):
        target = project / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".parquet":
            target.symlink_to(path)
        else:
            shutil.copy2(path, target)
    return project


# --------------------------------------------------------------------------------------------
# Running the stage


@dataclass
class StageRun:
    wall_s: float  # the whole process: interpreter, imports, stage
    stage_s: float  # score.run alone
    peak_mb: float
    episodes: int


def measure_stage(project: Path, profile: Path | None = None) -> StageRun:
    """score.run in a child process; its peak RSS comes from wait4 on that child alone."""
    result = project / "bench-result.json"
    command = [sys.executable, str(Path(__file__).resolve()), "--run-stage", str(project),
               "--result", str(result)]
    if profile is not None:
        command += ["--profile-output", str(profile)]
    env = os.environ | QUIET_TRACKING | {"MLFLOW_TRACKING_URI": f"sqlite:///{project}/mlflow.db"}
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=project, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall_s = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"the score stage failed (exit {child.returncode}); see above")
    figures = json.loads(result.read_text())
    return StageRun(wall_s=wall_s, stage_s=figures["stage_s"], peak_mb=usage.ru_maxrss / 1024,
                    episodes=figures["episodes"])


def run_stage_here(project: Path, result: Path, profile: Path | None) -> None:
    """The child's side: the stage, timed (and profiled when asked)."""
    from stages import score

    profiler = None
    if profile is not None:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
    started = time.perf_counter()
    scores = score.run(project)
    stage_s = time.perf_counter() - started
    if profiler is not None:
        profiler.stop()
        profile.write_text(profiler.output_html())
        profile.with_suffix(".txt").write_text(profiler.output_text(unicode=True, color=False))
    episodes = sum(summary["episodes"] for summary in scores["checkpoints"].values())
    result.write_text(json.dumps({"stage_s": stage_s, "episodes": episodes}))


# --------------------------------------------------------------------------------------------
# Report


def print_table(shape: Shape, runs: list[StageRun], timings: dict[str, float],
                data_size_mb: float) -> None:
    print(f"\nscore stage: {shape.tasks:,} tasks × {shape.samples} samples × "
          f"{shape.checkpoints} checkpoints = {shape.rows:,} rollout rows "
          f"({data_size_mb:,.0f} MB of Parquet)")
    for run in runs:
        if run.episodes != shape.rows:
            print(f"  warning: the stage scored {run.episodes:,} episodes, not {shape.rows:,}")
    wall = min(run.wall_s for run in runs)
    peak = max(run.peak_mb for run in runs)
    lines = [
        ("figure", "value", "goal", ""),
        (f"wall, whole process (s, best of {len(runs)})", f"{wall:.1f}", f"≤ {GOAL_WALL_S:.0f}",
         "ok" if wall <= GOAL_WALL_S else "MISSED"),
        ("  of which score.run (s)", f"{min(run.stage_s for run in runs):.1f}", "", ""),
        (f"peak RSS (MB, worst of {len(runs)})", f"{peak:,.0f}", f"≤ {GOAL_PEAK_MB:,.0f}",
         "ok" if peak <= GOAL_PEAK_MB else "MISSED"),
        ("data generation, rollouts (s, once)", f"{timings.get('rollouts_s', 0):.0f}", "", ""),
        ("data generation, canary cache (s, once)", f"{timings.get('canaries_s', 0):.0f}", "",
         ""),
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help=f"where the generated data is kept and reused ({DEFAULT_DATA_DIR})")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1, help="measured runs, one after another")
    parser.add_argument("--profile", type=Path, nargs="?", const=Path("score-profile.html"),
                        help="add a run under pyinstrument; HTML here (text beside it), "
                             "relative paths under --data-dir")
    parser.add_argument("--keep", action="store_true", help="keep the temporary projects")
    parser.add_argument("--run-stage", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--profile-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_stage is not None:
        run_stage_here(args.run_stage, args.result, args.profile_output)
        return

    shape = Shape(tasks=args.tasks, samples=args.samples, checkpoints=args.checkpoints)
    timings = prepare_data(args.data_dir, shape)
    data_size_mb = sum(path.stat().st_size for path in
                       (args.data_dir / "project").rglob("*.parquet")) / 2**20

    def run_once(profile: Path | None = None) -> StageRun:
        project = fresh_project(args.data_dir)
        try:
            return measure_stage(project, profile)
        finally:
            if args.keep:
                print(f"kept {project}")
            else:
                shutil.rmtree(project)

    runs = [run_once() for _ in range(args.runs)]
    print_table(shape, runs, timings, data_size_mb)
    if args.profile is not None:
        profile = args.profile if args.profile.is_absolute() else args.data_dir / args.profile
        profiled = run_once(profile)
        print(f"\nprofiled run: {profiled.stage_s:.1f} s in score.run, "
              f"peak {profiled.peak_mb:,.0f} MB; profile in {profile} and "
              f"{profile.with_suffix('.txt')}")


if __name__ == "__main__":
    main()
