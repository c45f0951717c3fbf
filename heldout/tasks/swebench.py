"""SWE-bench's formats as heldout reads them: instances become repository tasks, predictions
become samples.

An instance (the SWE-bench / SWE-Gym dataset row) holds `instance_id`, `repo` ("owner/name"),
`base_commit`, `patch` (the reference), `test_patch`, `problem_statement`, and `FAIL_TO_PASS`
and `PASS_TO_PASS`, each a JSON list or a JSON-encoded string of one, of pytest node ids. The
task reads its tree from the repository's clone at `<repos>/<owner>__<name>` at `base_commit`
(heldout.tasks.snapshots: `git archive`, so nothing of the history comes with it). An image
name, where the row has one (`image_name`, `docker_image`), becomes the task's runtime image.
A `patch` or `test_patch` larger than heldout applies (MAX_DIFF_BYTES, 1 MiB) is refused.

A prediction is `{"instance_id", "model_patch", "model_name_or_path"}`; as a sample its task is
the instance and its completion the patch (none: an empty diff, the repository unchanged).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from heldout.tasks.patches import oversized
from heldout.tasks.record import iso_date_problem

IMAGE_FIELDS = ("image_name", "docker_image")
REQUIRED = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
            "FAIL_TO_PASS", "PASS_TO_PASS")


def node_list(value: Any, field: str) -> list[str]:
    """FAIL_TO_PASS / PASS_TO_PASS as a list of pytest node ids. Raises ValueError."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{field}: not a JSON list (nor a JSON-encoded one)") from None
    if not (isinstance(value, list) and all(isinstance(node, str) for node in value)):
        raise ValueError(f"{field}: expected a list of test names")
    not_pytest = [node for node in value if "::" not in node]
    if not_pytest:
        raise ValueError(f"{field}: {not_pytest[0]!r} is not a pytest node id (path::name); "
                         "heldout judges pytest suites only")
    return value


def task_record(instance: dict[str, Any], repos: Path, out_folder: Path,
                test_command: str) -> dict[str, Any]:
    """The repository task of one instance. Raises ValueError naming the field."""
    missing = [field for field in REQUIRED if field not in instance]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    for field in ("patch", "test_patch"):
        too_large = isinstance(instance[field], str) and oversized(instance[field], field)
        if too_large:
            raise ValueError(too_large)
    owner_name = str(instance["repo"])
    clone = repos / owner_name.replace("/", "__")
    if not (clone / ".git").exists() and not (clone / "HEAD").exists():
        raise ValueError(f"repo: no git clone of {owner_name} at {clone}")
    record: dict[str, Any] = {
        "id": instance["instance_id"], "kind": "repository", "repo": owner_name,
        "snapshot": os.path.relpath(clone, out_folder), "base_commit": instance["base_commit"],
        "prompt": instance["problem_statement"], "tests": instance["test_patch"],
        "reference": instance["patch"],
        "fail_to_pass": node_list(instance["FAIL_TO_PASS"], "FAIL_TO_PASS"),
        "pass_to_pass": node_list(instance["PASS_TO_PASS"], "PASS_TO_PASS"),
        "test_command": test_command,
        "metadata": {"source": "swe-bench", **{key: instance[key] for key in ("version",
                     "created_at") if isinstance(instance.get(key), str)}},
    }
    image = next((instance[field] for field in IMAGE_FIELDS if instance.get(field)), None)
    if image:
        record["runtime"] = {"image": image}
    released = released_day(instance.get("created_at"))
    if released:
        record["released"] = released
    return record


def released_day(created_at: Any) -> str | None:
    """The task's `released` date from the instance's `created_at` (when its issue's pull
    request was opened, "2023-06-01T12:34:56Z"): its day, YYYY-MM-DD, or None for a value
    that does not start with one (the instance imports without a date)."""
    if not isinstance(created_at, str):
        return None
    day = created_at.strip()[:10]
    return None if iso_date_problem(day) else day


def as_sample(record: dict[str, Any]) -> dict[str, Any]:
    """A SWE-bench prediction as a samples-file row; any other row as it is."""
    if "task_id" in record or "instance_id" not in record:
        return record
    sample = {key: value for key, value in record.items()
              if key not in ("instance_id", "model_patch", "model_name_or_path")}
    return {**sample, "task_id": record["instance_id"],
            "completion": record.get("model_patch") or ""}
