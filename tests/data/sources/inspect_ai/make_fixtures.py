"""Regenerate this folder's inspect_ai logs with inspect_ai itself, offline (mockllm):

    python -m venv /tmp/inspect && /tmp/inspect/bin/pip install inspect-ai==0.3.285
    /tmp/inspect/bin/python tests/data/sources/inspect_ai/make_fixtures.py

Each `inspect eval` writes one log per model; base and candidate run in
one eval (their samples interleave in time, as a paired comparison needs). `reported.json`
keeps inspect_ai's own figures and per-sample scores, read back with inspect_ai's reader.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from inspect_ai.log import read_eval_log

HERE = Path(__file__).resolve().parent
RUNS = {  # name: (models, task args, log format)
    "pair": ("mockllm/base,mockllm/candidate",
             {"fail": "mockllm/base:q05:2", "limit": "mockllm/base:q07:1"}, "eval"),
    "fewer": ("mockllm/candidate", {"count": 4}, "eval"),
    "one-epoch": ("mockllm/candidate", {"epochs": 1}, "eval"),
    "small-json": ("mockllm/base", {"count": 3, "epochs": 1}, "json"),
}


def main() -> None:
    reported = {}
    for name, (models, args, form) in RUNS.items():
        with tempfile.TemporaryDirectory() as logs:
            command = [sys.executable, "-m", "inspect_ai", "eval", "arithmetic.py",
                       "--model", models, "--log-dir", logs, "--log-format", form,
                       "--display", "none", "--no-log-realtime"]
            for key, value in args.items():
                command += ["-T", f"{key}={value}"]
            subprocess.run(command, check=True, cwd=HERE)  # inspect globs a relative path
            for path in sorted(Path(logs).iterdir()):
                log = read_eval_log(str(path))
                model = log.eval.model.split("/")[-1]
                target = HERE / f"{name}-{model}.{form}" if name == "pair" else (
                    HERE / f"{name}.{form}")
                shutil.copy(path, target)
                reported[target.name] = {
                    "metrics": {f"{s.scorer}/{s.name}/{m}": v.value
                                for s in log.results.scores for m, v in s.metrics.items()},
                    # [id, epoch, match's value, error, limit] of every sample
                    "samples": [[s.id, s.epoch, (s.scores or {}).get("match", None) and
                                 s.scores["match"].value, bool(s.error),
                                 s.limit.type if s.limit else None] for s in log.samples]}
    (HERE / "reported.json").write_text(json.dumps(reported, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
