"""Every benchmark in benchmarks/ starts on main (issue 39 item 8): each is run as its
docstring says (`PYTHONPATH=. .venv/bin/python benchmarks/NAME.py`), on tiny input where it
takes a size, else for its --help (which imports all it needs). What they measure is not
checked here: they are run by hand, on a quiet machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
HELPERS = {"grid_cli"}  # imported by the grids, not run
TINY = {
    "alarm_simulation": ["--replications", "3", "--episodes", "2"],
    "bench_decontaminate": ["--train", "300", "--eval", "30", "--workers", "1"],
    "bench_input_memory": ["--scale", "0.02"],
    "bench_report_scale": ["--tasks", "40"],
    "bench_traces": ["--episodes", "10", "--span-api", "3"],
    "cost_table": ["--replications", "2", "--workers", "1"],
    "coverage_single_arm": ["--replications", "2"],
    "guard_overhead": ["--opens", "50", "--repeats", "1"],
    "recipe_simulation": ["--replications", "20"],
    "small_sets": ["--replications", "2", "--workers", "1"],
    "time_drift": ["--replications", "2", "--workers", "1"],
    "verdict_simulation": ["--replications", "2", "--workers", "1", "--tasks", "30",
                           "--episodes", "2", "--cells", "nulls"],
}


def scripts() -> list[str]:
    return sorted(path.stem for path in BENCHMARKS.glob("*.py") if path.stem not in HELPERS)


def test_every_benchmark_is_listed_here_or_runs_for_its_help():
    assert set(TINY) <= set(scripts()), "a benchmark named here is gone"


@pytest.mark.parametrize("name", scripts())
def test_the_benchmark_starts(name: str, tmp_path: Path):
    arguments = TINY.get(name, ["--help"])
    done = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), *arguments],
                          cwd=tmp_path if name == "bench_traces" else REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert done.stdout.strip(), "it printed nothing"
