"""Write the embedded HumanEval set's public tests: tasks/humaneval_public_tests.json.

    .venv/bin/python scripts/make_public_tests.py          # write the file
    .venv/bin/python scripts/make_public_tests.py --check  # exit 1 if the file is not current

Each task's public tests are the asserts heldout.tasks.public_tests derives from its prompt's
doctest examples, less those its canonical solution fails when the judge runs them (a wrong
example in the docstring: "refuted"). Every assert is judged on its own, so one wrong example
drops only itself. The file records the rule, the counts, every skipped example with its reason
and every refuted assert, then `public_tests`: task id -> text, for the tasks that have any.
heldout.tasks.sources reads it when loading "humaneval"; nothing else derives at load time.

Re-run it when the rule (heldout/tasks/public_tests.py) or the HumanEval data changes;
tests/tasks/test_public_tests.py fails while the file is not what this script writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from heldout.episodes.judge import score_many
from heldout.sandbox.config import SandboxConfig
from heldout.sandbox.protocol import Sandbox
from heldout.tasks.public_tests import HUMANEVAL_PUBLIC_TESTS, RULE, SKIP_REASONS, derive, render
from heldout.tasks.record import Task
from heldout.tasks.sources import humaneval_tasks

TIMEOUT_S = 10
MEMORY_MB = 512


def build(tasks: list[Task], sandbox: Sandbox) -> dict[str, Any]:
    """The file's content for these tasks: each derived assert is kept if the task's reference
    passes it in the judge, alone."""
    derived = {task.id: derive(task.prompt, task.entry_point) for task in tasks}
    checks = [(task, d.assertion) for task in tasks for d in derived[task.id] if d.assertion]
    results = score_many(
        [(task.model_copy(update={"tests": f"{assertion}\n"}), task.reference or "")
         for task, assertion in checks],
        sandbox, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
    passed = {(task.id, assertion): result.passed
              for (task, assertion), result in zip(checks, results, strict=True)}

    public: dict[str, str] = {}
    refuted: dict[str, list[str]] = {}
    skipped: dict[str, list[dict[str, Any]]] = {}
    reasons: Counter[str] = Counter()
    for task in tasks:
        kept = []
        for d in derived[task.id]:
            if d.assertion is None:
                reasons[d.skipped or ""] += 1
                skipped.setdefault(task.id, []).append(
                    {"line": d.example.line, "example": d.example.source,
                     "output": d.example.want, "reason": d.skipped})
            elif passed[(task.id, d.assertion)]:
                kept.append(d.assertion)
            else:
                refuted.setdefault(task.id, []).append(d.assertion)
        if text := render(kept):
            public[task.id] = text

    examples = sum(len(ds) for ds in derived.values())
    return {
        "about": "Public tests of the embedded HumanEval tasks, derived from their prompts' "
                 "doctest examples. Written by scripts/make_public_tests.py: do not edit; "
                 "see docs/public-tests.md.",
        "rule": RULE,
        "checked_with": f"the task's canonical solution in the judge (python-function), "
                        f"each assert alone, timeout {TIMEOUT_S} s, {MEMORY_MB} MB",
        "counts": {
            "tasks": len(tasks),
            "tasks_with_public_tests": len(public),
            "tasks_without_examples": sum(not ds for ds in derived.values()),
            "examples": examples,
            "derived": len(checks),
            "kept": sum(text.count("\n") for text in public.values()),
            "refuted": sum(len(a) for a in refuted.values()),
            "skipped": {reason: reasons[reason] for reason in SKIP_REASONS if reasons[reason]},
        },
        "refuted": refuted,
        "skipped": skipped,
        "public_tests": public,
    }


def dumps(content: dict[str, Any]) -> str:
    return json.dumps(content, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the file differs from what it would be")
    parser.add_argument("--output", type=Path, default=HUMANEVAL_PUBLIC_TESTS)
    args = parser.parse_args(argv)

    sandbox = SandboxConfig().open()
    try:
        text = dumps(build(humaneval_tasks(), sandbox))
    finally:
        sandbox.close()
    counts = json.loads(text)["counts"]
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else ""
        if current != text:
            print(f"{args.output} is not current: re-run scripts/make_public_tests.py",
                  file=sys.stderr)
            return 1
        print(f"{args.output} is current: {counts}")
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
