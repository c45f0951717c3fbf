"""The MLflow runs of the commands that need no pipeline (`score`, `compare`, `import`): one
run each, in the project's store (the working folder's outside a project, unless
MLFLOW_TRACKING_URI says otherwise), with its inputs' digests, its figures and its files."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def log_run(name: str, tags: dict[str, Any], params: dict[str, Any],
            metrics: dict[str, float], artifacts: list[Path]) -> str:
    """One MLflow run through stages/tracking.py, in the project's store (the working
    folder's outside a project, unless MLFLOW_TRACKING_URI says otherwise); its id."""
    from heldout.environment import apply_defaults, find_project_root
    from heldout.errors import StageError
    from stages.common import read_params, section
    from stages.tracking import TrackingConfig, stage_run

    try:
        root = find_project_root()
        config = section(read_params(root), "mlflow", TrackingConfig)
    except StageError:
        root, config = Path.cwd(), TrackingConfig()
    apply_defaults(root)
    with stage_run(root, config, name, {"command": tags.pop("command")} | tags) as run:
        run.log_params(params)
        run.log_metrics(metrics)
        for path in artifacts:
            run.log_artifact(path)
        return run.run_id


def log_score(scored: Any) -> str:
    """`heldout score --mlflow`: a file's summary (cli.samples.Scored) as a run."""
    s, setup = scored.summary, scored.summary.get("scoring") or {}
    p1 = s["pass_at_1"]
    metrics = {"pass_at_1": p1["estimate"], "pass_at_1_low": p1["low"],
               "pass_at_1_high": p1["high"], "tasks": s["n_tasks"], "samples": s["episodes"],
               **{f"pass_at_{k}": v for k, v in s["pass_at_k"].items()},
               **{f"pass_hat_{k}": v for k, v in s["pass_hat_k"].items()},
               **{key: s[key] for key in s if key.endswith("_rate")}}
    params = {"file": s["file"], "checkpoint": s["checkpoint"], "harness": s["harness"],
              "tasks_source": s["tasks_source"], "tasks_digest": s["tasks_digest"],
              "timeout_s": setup.get("timeout_s"),
              "sandbox": (setup.get("sandbox") or {}).get("backend"),
              "ks": ",".join(map(str, s["ks"]["reported"]))}
    return log_run(f"score {s['checkpoint']}", {"command": "score", "harness": s["harness"]},
                   params, metrics, [scored.summary_path, scored.rollouts])


def log_compare(report: Any, out: Path, files: tuple[Path, Path]) -> str:
    """The comparison's run: the verdict, its figures, and the two inputs as given (another
    harness's file, a samples file or a rollout file) with their digests."""
    from heldout.sources import file_sha256

    names = (report.names.base, report.names.candidate)
    return log_run(f"compare {names[1]} vs {names[0]}",
                   {"command": "compare", "verdict": report.verdict},
                   {"base": str(files[0]), "candidate": str(files[1]), "base_name": names[0],
                    "candidate_name": names[1], "base_sha256": file_sha256(files[0]),
                    "candidate_sha256": file_sha256(files[1])}, report.metrics, [out])
