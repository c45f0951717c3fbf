"""Release dates inside the access (issue 42): the test stage records each test task's
`released` date and each arm's `data_cutoff` in access.json, their digest in the closed ledger
line; the report splits the test tasks by them (report.json `by_date`) and refuses dates edited
afterwards. A date is no part of the evaluated version, and a cutoff no part of the agent's
settings digest, so neither re-runs an episode or resets the one-access rule."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from heldout.agents.registry import identity_settings
from heldout.canonical import content_digest
from heldout.custody.ledger import read_ledger
from heldout.errors import StageError
from heldout.tasks.sources import load_tasks
from heldout.tasks.split import assign
from stages import catalog, decontaminate, select, split
from stages import report as report_stage
from stages import test as test_stage
from tests.conftest import TWO_DEMOS

BEFORE, AFTER = "2023-12-01", "2024-09-01"
CUTOFFS = {"base": "2024-03-01", "late": "2024-06-01"}  # the later: 2024-06-01


def date_the_test_tasks(project: Path) -> dict[str, str | None]:
    """Sorted test tasks by thirds: released before the cutoff, after it, no date. Only the test
    split's tasks change, so val, its scores and the selection's inputs stay as they were."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    source = project / params["tasks"]["source"]
    tasks = load_tasks(source)
    test_ids = [t.id for t in assign(tasks, params["split"]["salt"],
                                     params["split"]["fractions"])["test"]]
    dates = {task: (BEFORE, AFTER, None)[index % 3] for index, task in enumerate(test_ids)}
    records = [t.to_record() | ({"released": dates[t.id]} if dates.get(t.id) else {})
               for t in tasks]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    for name, cutoff in CUTOFFS.items():
        params["checkpoints"][name]["data_cutoff"] = cutoff
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dates


def test_the_access_records_the_dates_and_the_report_splits_by_them(selected_copy: Path):
    project = selected_copy
    manifest_before = json.loads((project / catalog.MANIFEST).read_text())
    dates = date_the_test_tasks(project)
    split.run(project)
    select.run(project)
    manifest = json.loads((project / catalog.MANIFEST).read_text())
    # The file changed, what is evaluated did not: the one-access rule sees the same tasks.
    assert manifest["test_version"] != manifest_before["test_version"]
    assert manifest["test_content_version"] == manifest_before["test_content_version"]

    access = test_stage.run(project)
    decontaminate.run(project)
    recorded = json.loads((project / catalog.ACCESS).read_text())["dates"]
    assert recorded["released"] == {task: day for task, day in dates.items() if day}
    assert recorded["data_cutoff"] == {"candidate": CUTOFFS[access["candidate"]],
                                       "base": CUTOFFS["base"]}
    # The cutoff is in no settings digest: the key names the agent as it was without it.
    assert access["base_settings"] == content_digest(identity_settings(TWO_DEMOS["base"]))
    closed = [e for e in read_ledger(project / catalog.LEDGER) if e["outcome"] == "closed"][-1]
    assert closed["verdict"]["dates_digest"] == content_digest(recorded)

    report = report_stage.run(project)
    by_date = report["by_date"]
    assert by_date["cutoff"] == "2024-06-01" and "later of the two" in by_date["cutoff_from"]
    rates = {arm: pd.read_parquet(project / catalog.test_rollout_file(arm))
             .groupby("task_id")["passed"].mean() for arm in ("base", "candidate")}
    before, after = ([t for t, day in dates.items() if day == which] for which in (BEFORE, AFTER))
    assert by_date["undated"] == sum(day is None for day in dates.values())
    for part, ids in zip(by_date["parts"], (before, after), strict=True):
        assert part["tasks"] == len(ids) >= 3
        base, candidate = (rates[arm][ids].mean() for arm in ("base", "candidate"))
        assert (part["base"], part["candidate"]) == pytest.approx((base, candidate))
        assert part["difference"] == pytest.approx(candidate - base)
        assert part["low"] <= part["difference"] <= part["high"]
    markdown = (project / "reports" / "report.md").read_text()
    assert "By release date" in markdown and "on or before 2024-06-01" in markdown
    # Decontamination's channels, in the report's contamination part beside the dates.
    channels = json.loads((project / catalog.DECONTAM_REPORT).read_text())["channels"]
    assert report["contamination"]["channels"] == channels and len(channels) == 7
    assert "Leakage channels" in markdown and "MinHash near-duplicate" in markdown

    # A date edited after the access moves nothing: the report refuses it.
    path = project / catalog.ACCESS
    edited = json.loads(path.read_text())
    edited["dates"]["released"] = {task: BEFORE for task in edited["dates"]["released"]}
    path.write_text(json.dumps(edited))
    with pytest.raises(StageError, match="release dates and data cutoffs are not the ones"):
        report_stage.run(project)
