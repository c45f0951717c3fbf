"""Regenerate this folder's lm-evaluation-harness --log_samples files with lm-eval itself,
offline, from its `dummy` model (random log-likelihoods under --seed, "lol" for every
generation) on two local JSON tasks:

    python -m venv /tmp/lmeval && /tmp/lmeval/bin/pip install lm-eval==0.4.13
    /tmp/lmeval/bin/python tests/data/sources/lm_eval/make_fixtures.py

Each run's folder keeps lm-eval's samples_<task>_<time>.jsonl and results_<time>.json.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = 32
RUNS = {  # folder: (tasks, seed, extra arguments)
    "seed1": ("qa_mc,qa_gen", 1, []),
    "seed2": ("qa_mc", 2, []),
    "limit8": ("qa_mc", 3, ["--limit", "8"]),
}
TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: {kind}
doc_to_text: "{{{{question}}}}"
{target}
metric_list:
  - metric: {metric}
"""


def write_tasks(folder: Path) -> None:
    data = folder / "qa.jsonl"
    data.write_text("".join(json.dumps({
        "id": i, "question": f"What is {i} plus {i}?",
        "choices": [str(2 * i), str(2 * i + 1), str(i), "lol"], "answer": 3 if i % 5 == 0 else 0,
        "repo": f"r{i % 4}"}) + "\n" for i in range(DOCS)))
    (folder / "qa_mc.yaml").write_text(TASK.format(
        name="qa_mc", data=data, kind="multiple_choice", metric="acc",
        target='doc_to_choice: "{{choices}}"\ndoc_to_target: answer'))
    (folder / "qa_gen.yaml").write_text(TASK.format(
        name="qa_gen", data=data, kind="generate_until", metric="exact_match",
        target='doc_to_target: "{{choices[answer]}}"\nrepeats: 3\ngeneration_kwargs:\n'
               '  until: ["\\n"]'))


def main() -> None:
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as scratch:
        tasks = Path(scratch) / "tasks"
        tasks.mkdir()
        write_tasks(tasks)
        for folder, (names, seed, extra) in RUNS.items():
            out = Path(scratch) / folder
            subprocess.run([sys.executable, "-m", "lm_eval", "--model", "dummy", "--tasks", names,
                            "--include_path", str(tasks), "--log_samples", "--output_path",
                            str(out), "--seed", str(seed), *extra], check=True, env=env)
            target = HERE / folder
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            for path in out.rglob("*.json*"):
                shutil.copy(path, target / path.name)


if __name__ == "__main__":
    main()
