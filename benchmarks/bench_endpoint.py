"""Episodes against a slow endpoint, the old design and the new side by side, by hand:
`python benchmarks/bench_endpoint.py [--old-tree DIR] [--quick]`.

The endpoint is tests/latency_server.py in a process of its own (its CPU is not the rollout's),
answering after a fixed latency. Each cell rolls out HumanEval episodes of the `openai` agent
through the real sandbox and judge, in a fresh process:
- single-turn (`protocol: completion`) and five-turn (`protocol: tools`, four public-test runs
  and a submit) episodes, at 0.5 s and 3 s a model call;
- the new design: rollouts.in_flight 256 on the event loop (heldout.episodes.engine);
- the old design: the code of `--old-tree` (a checkout of 9e79b89, made with `git worktree add
  /tmp/heldout-old 9e79b89` if not given), params' rollouts.concurrency 2, each chunk's
  episodes one after another, in chunks of half the cell's episodes (its best case: both
  chunks busy to the end; at params' 20 a chunk, a short cell would have one);
- the adaptive limit: single-turn at 0.5 s against a server that serves 32 at once (429 beyond).
Prints episodes/s, the endpoint's time-average requests in flight (its busy seconds over the
wall time), and the run as a fraction of Little's-law ideal: designed in-flight ÷ (latency ×
calls an episode).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_COMMIT = "9e79b89"

RUN = """
import json, sys, tempfile, time
from pathlib import Path
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig, roll_out
from heldout.tasks.sources import load_tasks

args = json.loads(sys.argv[1])
class Quiet:
    def start(self, total): pass
    def advance(self, row, cached): pass
    def finish(self): pass
tasks = load_tasks("humaneval")
harness = Harness(n=args["n"], seed=7, timeout_s=10, max_turns=args["turns"], max_tool_calls=8,
                  agent_timeout_s=600)
started = time.monotonic()
rows = roll_out(Path(tempfile.mkdtemp()), "bench", args["settings"], tasks[:args["tasks"]],
                harness, RolloutsConfig(**args["rollouts"]), Quiet())
seconds = time.monotonic() - started

def programs(row):
    # What the sandbox ran for the episode: public-test runs, the hidden tests, the public beside
    steps = json.loads(row["trajectory"])
    runs = sum(1 for step in steps if step["tool"] == "run_public_tests"
               and step["data"].get("passed") is not None)
    return runs + (row["status"] not in ("refused", "error")) + (row["public_passed"] is not None)

extra = {"programs": sum(programs(row) for row in rows)}
try:
    from heldout.agents.endpoint_limit import drain_endpoint_stats
    from stages.progress import speed_metrics
    (endpoint,) = drain_endpoint_stats().values()
    extra |= {"limits": endpoint.limits}
    extra |= speed_metrics() | endpoint.metrics()
except ImportError:
    pass
print(json.dumps({"episodes": len(rows), "seconds": seconds,
                  "statuses": sorted({r["status"] for r in rows}), **extra}))
"""


def serve(latency_s: float, turns: int, capacity: int | None,
          refuse: bool) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "tests.latency_server", "--latency-s", str(latency_s),
               "--turns", str(turns), *(["--refuse"] if refuse else [])]
    if capacity:
        command += ["--capacity", str(capacity)]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().strip()


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats", timeout=10) as answer:
        return json.loads(answer.read())


def cell(tree: Path, latency_s: float, turns: int, tasks: int, n: int, rollouts: dict,
         settings: dict, capacity: int | None = None, refuse: bool = False) -> dict:
    server, url = serve(latency_s, turns, capacity, refuse)
    try:
        before = stats(url)
        args = {"tasks": tasks, "n": n, "turns": turns, "rollouts": rollouts,
                "settings": {"agent": "openai", "base_url": url, "model": "bench",
                             "protocol": "tools" if turns > 1 else "completion",
                             "max_retries": 20, "backoff_base_s": 0.1, "backoff_max_s": 2.0,
                             **settings}}
        env = {**os.environ, "PYTHONPATH": str(tree), "NO_PROXY": "127.0.0.1,localhost"}
        ran = subprocess.run([sys.executable, "-c", RUN, json.dumps(args)], cwd=tree, env=env,
                             capture_output=True, text=True, check=True)
        result = json.loads(ran.stdout.strip().splitlines()[-1])
        after = stats(url)
    finally:
        server.terminate()
        server.wait()
    result["mean_in_flight"] = (after["busy_s"] - before["busy_s"]) / result["seconds"]
    result["server_max_in_flight"] = after["max_in_flight"]
    result["refused"] = after["refused"] - before["refused"]
    result["served"] = after["served"] - before["served"]
    result["statuses"] = after["statuses"][len(before["statuses"]):]
    return result


def judge_capacity() -> float:
    """Programs a second the default sandbox (2 workers) judges with nothing else running:
    HumanEval's references, 4 times over, 16 at a time (as episodes hand them over)."""
    from heldout.episodes.harness import Harness
    from heldout.episodes.judge import score_many
    from heldout.tasks.sources import load_tasks

    tasks = load_tasks("humaneval")
    sandbox = Harness().sandbox.open()
    try:
        pairs = [(task, task.reference) for task in tasks] * 4
        score_many(pairs[:8], sandbox, timeout_s=10, memory_mb=512)  # the workers start
        started = time.monotonic()
        for at in range(0, len(pairs), 16):
            score_many(pairs[at:at + 16], sandbox, timeout_s=10, memory_mb=512)
        return len(pairs) / (time.monotonic() - started)
    finally:
        sandbox.close()


def old_tree(given: str | None) -> Path:
    if given:
        return Path(given)
    tree = Path(tempfile.gettempdir()) / "heldout-old"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), OLD_COMMIT], cwd=ROOT,
                       check=True, capture_output=True)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-tree", default=None)
    parser.add_argument("--quick", action="store_true", help="fewer episodes a cell")
    options = parser.parse_args()
    old = old_tree(options.old_tree)
    scale = 0.25 if options.quick else 1.0
    capacity = judge_capacity()
    print(f"the judge alone: {capacity:.1f} programs/s (sandbox workers 2, nothing else "
          "running)\n")
    print(f"{'cell':<34} {'design':<6} {'episodes':>8} {'s':>7} {'ep/s':>7} "
          f"{'in flight':>9} {'ideal ep/s':>10} {'of ideal':>8} {'programs/s':>10}")
    for turns in (1, 5):
        for latency in (0.5, 3.0):
            old_episodes = max(4, int((60 if latency < 1 else 16) / turns))
            for design, tree, in_flight, rollouts, episodes in (
                ("old", old, 2, {"concurrency": 2, "chunk_episodes": old_episodes // 2},
                 old_episodes),
                ("new", ROOT, 256, {"in_flight": 256, "chunk_episodes": 32},
                 int((2600 if turns == 1 else 1000) * (3 if latency > 1 else 1) * scale)),
            ):
                n = max(1, -(-episodes // 164))
                tasks = min(164, episodes)
                result = cell(tree, latency, turns, tasks, n, rollouts, {})
                ideal = in_flight / (latency * turns)
                rate = result["episodes"] / result["seconds"]
                name = f"{turns}-turn, {latency:g} s a call"
                print(f"{name:<34} {design:<6} {result['episodes']:>8} "
                      f"{result['seconds']:>7.1f} {rate:>7.2f} {result['mean_in_flight']:>9.1f} "
                      f"{ideal:>10.2f} {rate / ideal:>8.0%} "
                      f"{result['programs'] / result['seconds']:>10.1f}", flush=True)
    # The engine's own ceiling: the server refuses every request, so nothing is judged.
    for latency in (0.5, 3.0):
        result = cell(ROOT, latency, 1, 164, int((16 if latency < 1 else 40) * scale) or 2,
                      {"in_flight": 256, "chunk_episodes": 32}, {}, refuse=True)
        ideal = 256 / latency
        rate = result["episodes"] / result["seconds"]
        name = f"1-turn, {latency:g} s, nothing judged"
        print(f"{name:<34} {'new':<6} {result['episodes']:>8} {result['seconds']:>7.1f} "
              f"{rate:>7.2f} {result['mean_in_flight']:>9.1f} {ideal:>10.2f} "
              f"{rate / ideal:>8.0%} {0.0:>10.1f}", flush=True)
    adaptive = cell(ROOT, 0.5, 1, 164, int(20 * scale) or 4, {"in_flight": 256}, {},
                    capacity=32)
    retried = adaptive["requests_retried"] / adaptive["requests"]
    later = adaptive["limits"][len(adaptive["limits"]) // 2:]
    second = adaptive["statuses"][len(adaptive["statuses"]) // 2:]
    print(f"\nadaptive limit against a server of 32: over the second half of its changes median "
          f"{sorted(later)[len(later) // 2]}, range {min(later)}-{max(later)}; time-average "
          f"in flight {adaptive['mean_in_flight']:.1f}; {adaptive['requests_retried']} of "
          f"{adaptive['requests']} requests retried ({retried:.2%}), of the second half "
          f"{second.count(429)} of {len(second)} refused ({second.count(429) / len(second):.2%}); "
          f"{adaptive['episodes'] / adaptive['seconds']:.1f} ep/s")


if __name__ == "__main__":
    started = time.monotonic()
    main()
    print(f"\n{time.monotonic() - started:.0f} s in all")
