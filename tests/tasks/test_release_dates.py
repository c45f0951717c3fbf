"""A task's `released` date and a checkpoint's `data_cutoff` (issue 42): dates written
YYYY-MM-DD and checked as calendar dates; SWE-bench's `created_at` gives the date on import;
neither changes what the one-access rule or the resume cache keys on."""

from __future__ import annotations

import datetime
import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from heldout.agents.protocol import AgentContext
from heldout.agents.registry import identity_settings, make_agent
from heldout.canonical import content_digest
from heldout.errors import InputFileError
from heldout.tasks.record import Task
from heldout.tasks.sources import load_jsonl_bytes, load_tasks
from heldout.tasks.split import evaluated_digest
from stages.params_check import agent_problems
from tests.tasks.test_repository_swebench import instance, make_clone, write_lines

TASK = {"id": "t", "prompt": "def f():\n", "entry_point": "f", "tests": "assert f() is None\n"}


def lines(*records: dict) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


def test_a_released_date_is_a_calendar_date_written_yyyy_mm_dd():
    [task] = load_jsonl_bytes(lines({**TASK, "released": "2024-02-29"}), "tasks.jsonl")
    assert task.released == "2024-02-29" and task.to_record()["released"] == "2024-02-29"
    with pytest.raises(InputFileError) as refused:
        load_jsonl_bytes(lines(*({**TASK, "id": f"t{i}", "released": bad} for i, bad in
                                 enumerate(["2023-02-29", "2024/01/01", "June 2024", 20240101],
                                           start=1))), "tasks.jsonl")
    problems = str(refused.value).splitlines()
    assert problems[0] == ("tasks.jsonl:1: field 'released': '2023-02-29' is no calendar date "
                           "(day is out of range for month)")
    assert problems[1] == ("tasks.jsonl:2: field 'released': must be a date written YYYY-MM-DD, "
                           "got '2024/01/01'")
    assert problems[2] == ("tasks.jsonl:3: field 'released': must be a date written YYYY-MM-DD, "
                           "got 'June 2024'")
    assert problems[3].startswith("tasks.jsonl:4: field 'released': ")  # a number: not text
    assert "released (a date, YYYY-MM-DD)" in problems[-1]  # the hint names the field


def test_a_date_changes_the_file_not_what_is_evaluated():
    plain, dated = Task(**TASK), Task(**TASK, released="2024-06-01")
    assert "released" not in plain.to_record()  # hashes made before the field stay
    assert plain.content_hash == content_digest(TASK | {"group": "t", "kind": "python-function"})
    assert dated.content_hash != plain.content_hash
    assert evaluated_digest(dated) == evaluated_digest(plain)


def test_import_swebench_takes_the_released_date_from_created_at(tmp_path):
    repos, base = make_clone(tmp_path)
    instances = write_lines(tmp_path / "instances.jsonl", [
        instance(base, created_at="2023-06-01T12:34:56Z"),
        instance(base, instance_id="undated", created_at="last spring")])
    out = tmp_path / "tasks" / "swe.jsonl"
    result = CliRunner().invoke(app, ["tasks", "import-swebench", str(instances), "--repos",
                                      str(repos), "--out", str(out)])
    assert result.exit_code == 0, result.output
    dated, undated = sorted(load_tasks(out), key=lambda task: task.id != "heldout__calc-1")
    assert (dated.released, dated.metadata["created_at"]) == ("2023-06-01",
                                                              "2023-06-01T12:34:56Z")
    assert (undated.id, undated.released) == ("undated", None)


def test_a_data_cutoff_is_checked_and_left_out_of_the_agents_identity():
    demo = {"agent": "demo", "skill": 1.0}
    cut = {**demo, "data_cutoff": "2024-06-01"}
    assert agent_problems("checkpoints.late", cut) == []
    assert agent_problems("checkpoints.late", {**demo, "data_cutoff": "2024-13-01"}) == [
        "params.yaml: checkpoints.late.data_cutoff: '2024-13-01' is no calendar date "
        "(month must be in 1..12)"]
    # YAML reads an unquoted 2024-06-01 as a date
    [unquoted] = agent_problems("checkpoints.late",
                                {**demo, "data_cutoff": datetime.date(2024, 6, 1)})
    assert "in quotes" in unquoted
    assert identity_settings(cut) == demo  # the resume cache's and the access key's digests
    context = AgentContext(template="{prompt}", temperature=0.8, top_p=0.95, max_tokens=64,
                           max_turns=1, timeout_s=10.0, project_root=".")
    assert make_agent("late", cut, context) is not None  # no agent kind is handed it


def test_swebench_tasks_split_at_a_cutoff_with_dates_on_both_sides(tmp_path):
    """SWE-bench instances dated on both sides of a cutoff, imported, then compared: the
    by_date split places each by its instance's created_at."""
    from tests.report.test_compare_cli import heldout
    from tests.report.test_report import rollouts

    repos, base = make_clone(tmp_path)
    days = {"old-1": "2023-01-05", "old-2": "2023-11-30", "old-3": "2024-06-01",
            "new-1": "2024-06-02", "new-2": "2024-12-24", "new-3": "2025-03-03"}
    instances = write_lines(tmp_path / "instances.jsonl", [
        instance(base, instance_id=name, created_at=f"{day}T09:00:00Z")
        for name, day in days.items()])
    out = tmp_path / "tasks" / "swe.jsonl"
    result = CliRunner().invoke(app, ["tasks", "import-swebench", str(instances), "--repos",
                                      str(repos), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert {task.id: task.released for task in load_tasks(out)} == days
    # The candidate gains on the old tasks only: what a leak of the old ones would look like.
    base_rows = {name: [False, False] for name in days}
    candidate_rows = {name: [name.startswith("old")] * 2 for name in days}
    rollouts("base", base_rows).to_parquet(tmp_path / "A.parquet")
    rollouts("tuned", candidate_rows).to_parquet(tmp_path / "B.parquet")
    done = heldout("compare", tmp_path / "A.parquet", tmp_path / "B.parquet", "--out",
                   tmp_path / "report", "--tasks", out, "--cutoff-b", "2024-06-01")
    assert done.returncode == 0, done.stderr
    by_date = json.loads((tmp_path / "report" / "report.json").read_text())["by_date"]
    before, after = by_date["parts"]
    assert (by_date["cutoff"], by_date["undated"]) == ("2024-06-01", 0)
    assert (before["tasks"], before["base"], before["candidate"]) == (3, 0.0, 1.0)
    assert (after["tasks"], after["base"], after["candidate"]) == (3, 0.0, 0.0)
