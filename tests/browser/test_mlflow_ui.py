"""A reviewer finds the test access in the MLflow UI: a real `mlflow server` on 127.0.0.1 over
the project's store, and headless Chromium on the runs page filtered by the README's search."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from pathlib import Path

import mlflow
import pytest

from heldout.custody.guard import SEALED_TEST, TestSetAccessError
from stages import rollouts, score, select, split
from stages import test as test_stage
from stages.catalog import SELECTION
from tests.chromium import find_chromium, render, serve_mlflow
from tests.conftest import configure_small_project

README_FILTER = 'tags.heldout.test_access = "true"'



@pytest.fixture
def mlflow_server(project: Path):
    with serve_mlflow(f"sqlite:///{project / 'own.db'}") as url:
        yield url


def test_the_test_access_run_is_found_with_the_readme_filter(project: Path, monkeypatch,
                                                            mlflow_server: str, tmp_path: Path):
    find_chromium()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
    configure_small_project(project, tasks=30, n=1)
    split.run(project)
    for name in ("base", "late"):
        rollouts.run(name, project)
    score.run(project)
    # Two refused attempts first: a stage that peeks at the test split (the guard) and a test
    # stage whose selection was made from other val scores (the lock's caller). Both must be on
    # the reviewer's page.
    with monkeypatch.context() as patch:
        patch.setattr(select, "select_checkpoint",
                      lambda *args, **kwargs: (project / SEALED_TEST).read_bytes())
        with pytest.raises(TestSetAccessError, match="outside the test lock"):
            select.run(project)
    select.run(project)
    chosen = (project / SELECTION).read_text()
    stale = json.loads(chosen) | {"val_scores_digest": "0" * 64}
    (project / SELECTION).write_text(json.dumps(stale))
    with pytest.raises(TestSetAccessError, match="computed from other val scores"):
        test_stage.run(project)
    (project / SELECTION).write_text(chosen)
    access = test_stage.run(project)

    experiment = mlflow.MlflowClient().get_experiment_by_name("heldout")
    query = urllib.parse.quote(README_FILTER)
    page = f"{mlflow_server}/#/experiments/{experiment.experiment_id}/runs?searchFilter={query}"
    artifacts = Path(os.environ.get("HELDOUT_TEST_ARTIFACTS", tmp_path)) / "mlflow_ui"
    rendered = render(page, screenshot=artifacts / "test_access_runs.png",
                      window=(1600, 1000), virtual_time_budget_ms=20_000)
    print(f"screenshot: {rendered.screenshot}")

    # The runs table links each run by its id: the test access and both refused attempts are
    # listed, the other runs are not.
    client = mlflow.MlflowClient()
    refused = client.search_runs([experiment.experiment_id],
                                 "tags.`heldout.test_access_refused` = 'true'")
    assert sorted(r.data.tags["heldout.stage"] for r in refused) == ["select", "test"]
    assert {r.info.status for r in refused} == {"FAILED"}
    for run_id in (access["mlflow_run_id"], *(r.info.run_id for r in refused)):
        assert run_id in rendered.dom
    refused_ids = {r.info.run_id for r in refused}
    others = [r for r in client.search_runs([experiment.experiment_id],
                                            "tags.`heldout.stage` != 'test'")
              if r.info.run_id not in refused_ids]
    assert len(others) >= 5
    assert not [r.info.run_id for r in others if r.info.run_id in rendered.dom]
