"""Write the embedded repository task set: tasks/examples/repository.jsonl.

    .venv/bin/python scripts/make_repository_tasks.py          # write the file
    .venv/bin/python scripts/make_repository_tasks.py --check  # exit 1 if it is not current

Each folder of tasks/repositories/ is one task, written by the project: `base/` (the repository
at its base), `fix.patch` (the reference patch), `tests.patch` (the hidden test patch, test
files added or replaced before judging), `issue.md` (the prompt) and, for some, `public.txt`
(node ids the agent may run). The line holds both patches, and `snapshot` points at `base/`,
read into the record when the file is loaded.

`fail_to_pass` and `pass_to_pass` are computed, never written by hand: every test collected from
the repository with its hidden tests is run through heldout's judge in the sandbox, at the base
and with the reference; a test that fails at the base and passes with the reference is
fail-to-pass, one that passes at both pass-to-pass. tests/tasks/test_repository_tasks.py fails while
the file is not what this script writes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from heldout.canonical import canonical_json
from heldout.sandbox.config import SandboxConfig, make_sandbox
from heldout.tasks.patches import apply_patch, parse_patch
from heldout.tasks.repository import TEST_PYTHON, RepositoryTask
from heldout.tasks.repository_checks import check_repository_tasks
from heldout.tasks.repository_judge import revealed
from heldout.tasks.snapshots import read_snapshot

ROOT = Path(__file__).resolve().parent.parent
REPOSITORIES = ROOT / "tasks" / "repositories"
OUT = ROOT / "tasks" / "examples" / "repository.jsonl"
TIMEOUT_S = 30.0
MEMORY_MB = 1024


def collected(tree: dict[str, str]) -> list[str]:
    """The node ids pytest collects from `tree` (written to a temporary folder)."""
    with tempfile.TemporaryDirectory() as folder:
        for path, text in tree.items():
            target = Path(folder, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        listed = subprocess.run([TEST_PYTHON, "-P", "-m", "pytest", "--collect-only", "-q",
                                 "-p", "no:cacheprovider"], cwd=folder, capture_output=True,
                                text=True, env={"PYTHONPATH": folder, "PATH": "/usr/bin:/bin",
                                                "PYTHONDONTWRITEBYTECODE": "1"})
    nodes = [line for line in listed.stdout.splitlines() if "::" in line]
    if not nodes:
        raise SystemExit(f"pytest collected nothing: {listed.stdout[-2000:]}")
    return nodes


def draft(folder: Path) -> dict[str, Any]:
    """The task's record, before its test lists are computed."""
    tests = (folder / "tests.patch").read_text(encoding="utf-8")
    with_tests = apply_patch(read_snapshot(folder / "base"), parse_patch(tests))
    record = {
        "id": f"repo/{folder.name}", "kind": "repository", "repo": f"heldout/{folder.name}",
        "snapshot": f"../repositories/{folder.name}/base",
        "prompt": (folder / "issue.md").read_text(encoding="utf-8"),
        "tests": tests, "reference": (folder / "fix.patch").read_text(encoding="utf-8"),
        "fail_to_pass": collected(with_tests), "pass_to_pass": [],
        "metadata": {"source": "heldout"},
    }
    public = folder / "public.txt"
    if public.exists():
        record["public_tests"] = json.dumps(public.read_text(encoding="utf-8").split())
    return record


def build(sandbox) -> list[dict[str, Any]]:
    drafts = [draft(folder) for folder in sorted(REPOSITORIES.iterdir()) if folder.is_dir()]
    from heldout.tasks.repository import build_program

    records = []
    for record in drafts:
        task = RepositoryTask.model_validate({**{k: v for k, v in record.items()
                                                 if k != "snapshot"},
                                              "files": read_snapshot(
                                                  OUT.parent / record["snapshot"])})
        base, fixed = sandbox.run_many([build_program(task, "", reveal=True),
                                        build_program(task, task.reference, reveal=True)],
                                       timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
        at_base = revealed(base, task.expected_tests)
        with_fix = revealed(fixed, task.expected_tests)
        if at_base is None or with_fix is None or at_base["distrust"] or with_fix["distrust"]:
            raise SystemExit(f"{task.id}: the judge could not run its tests: "
                             f"{base.stderr_tail[-500:]} {fixed.stderr_tail[-500:]}")
        nodes = record["fail_to_pass"]
        record["fail_to_pass"] = [node for node in nodes if at_base["outcomes"][node] == "failed"
                                  and with_fix["outcomes"][node] == "passed"]
        record["pass_to_pass"] = [node for node in nodes if at_base["outcomes"][node] == "passed"
                                  and with_fix["outcomes"][node] == "passed"]
        records.append(record)
    return records


def render(records: list[dict[str, Any]]) -> str:
    return "".join(canonical_json(record) + "\n" for record in records)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    check = parser.parse_args(argv).check
    with make_sandbox("subprocess", workers=SandboxConfig().workers) as sandbox:
        records = build(sandbox)
        text = render(records)
        if check:
            current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
            print("current" if current == text else f"{OUT} is stale: re-run this script")
            return 0 if current == text else 1
        OUT.write_text(text, encoding="utf-8")
        from heldout.tasks.sources import load_tasks

        tasks = load_tasks(OUT)
        problems = check_repository_tasks(tasks, sandbox, TIMEOUT_S, MEMORY_MB)
    counts = [(len(r["fail_to_pass"]), len(r["pass_to_pass"])) for r in records]
    print(f"wrote {len(records)} tasks to {OUT} (fail_to_pass/pass_to_pass per task: {counts})")
    for task_id, found in problems.items():
        print(f"{task_id}: {'; '.join(found)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
