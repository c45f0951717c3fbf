"""Stage `select` writes the pick's stability and winner's curse into data/selection.json, prints
the curse, logs both to MLflow (issue 41 item 4), and writes the same bytes when run again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import mlflow
import pytest

from stages import catalog, select


def test_the_selection_holds_pick_stability_and_the_winners_curse(selected_copy: Path,
                                                                   capsys):
    written = (selected_copy / catalog.SELECTION).read_bytes()
    selection = json.loads(written)
    stability, curse = selection["pick_stability"], selection["winners_curse"]
    names = [row["checkpoint"] for row in selection["table"]]
    assert list(stability["shares"]) == names == ["base", "late"]
    assert sum(stability["shares"].values()) == pytest.approx(1.0)
    assert stability["resamples"] >= 1000 and stability["unit"] in ("tasks", "groups")
    assert stability["seed"] == 0
    assert curse["configurations_tried"] == 2
    assert {"inflation", "monte_carlo_error", "if_all_level", "counted", "not_counted",
            "note"} <= set(curse)

    again = select.run(selected_copy)  # the same val scores, the same seed: the same bytes
    assert (selected_copy / catalog.SELECTION).read_bytes() == written
    assert f"select: {curse['note']}" in capsys.readouterr().out

    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("heldout")
    runs = client.search_runs([experiment.experiment_id],
                              filter_string="tags.`heldout.stage` = 'select'",
                              order_by=["attributes.start_time DESC"])
    metrics = runs[0].data.metrics
    assert metrics["pick_share"] == stability["shares"][again["chosen"]]
    assert metrics["winners_curse.inflation"] == curse["inflation"]
    assert metrics["winners_curse.if_all_level"] == curse["if_all_level"]
    assert metrics["configurations_tried"] == 2


def test_each_row_carries_its_effort_against_the_base_from_the_val_scores(selected_copy: Path):
    selection = json.loads((selected_copy / catalog.SELECTION).read_text())
    scores = json.loads((selected_copy / catalog.SCORES).read_text())
    for row in selection["table"]:
        measures = scores["checkpoints"][row["checkpoint"]]["effort"]["measures"]
        assert row["effort_ratio"] == {measure: spent["ratio"]
                                       for measure, spent in measures.items()}
    # the base against itself spends 1.00x of everything it recorded
    base = next(row for row in selection["table"] if row["checkpoint"] == "base")
    assert base["effort_ratio"] and set(base["effort_ratio"].values()) == {1.0}
