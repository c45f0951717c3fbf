"""The access's identity is what the test stage read (heldout.custody.identity): nothing it
reads can be left out by forgetting to list it, and what it leaves out is a named few."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from heldout.custody.identity import (
    NOT_RESULTS,
    ParamsReads,
    access_identity,
    identity_digest,
)
from heldout.episodes.rollout import RolloutsConfig
from stages import access_inputs
from stages import test as test_stage
from stages.common import checkpoint_settings, section
from tests.conftest import REPO

PARAMS = {
    "harness": {"n": 4, "temperature": 0.8},
    "checkpoints": {"base": {"agent": "demo", "skill": 0.0},
                    "late": {"agent": "demo", "skill": 1.0},
                    "other": {"agent": "demo", "skill": 2.0}},
    "base": "base",
    "test": {"reaccess": {"access": "", "reason": ""}, "experiment": ""},
    "rollouts": {"in_flight": 8, "cache": ".heldout/episodes.sqlite"},
    "custody": {"public_key": ""},
    "select": {"rule": "best"},
}


def identity_of(params: dict, read) -> str:
    reads = ParamsReads(params)
    read(reads)
    return identity_digest(access_identity(reads, {}))


def stage_like(reads: ParamsReads) -> None:
    """The reads the test stage makes, the way it makes them."""
    reads.get("harness")
    reads.get("test")
    reads.get("rollouts")
    reads.get("custody")
    for name in ("late", reads.get("base")):
        checkpoint_settings(reads, name)


def changed(path: tuple[str, ...], value) -> dict:
    params = yaml.safe_load(yaml.safe_dump(PARAMS))
    place = params
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return params


def test_what_was_read_is_recorded_and_only_the_checkpoints_used():
    reads = ParamsReads(PARAMS)
    stage_like(reads)
    recorded = reads.recorded()
    assert set(recorded) == {"base", "checkpoints.base", "checkpoints.late", "harness",
                             "rollouts", "test"}
    assert recorded["rollouts"] == {} and recorded["test"] == {}, "their keys are NOT_RESULTS"


@pytest.mark.parametrize("path, value", [
    (("harness", "temperature"), 0.7),
    (("harness", "a_key_added_later"), True),
    (("checkpoints", "late", "skill"), 1.1),
    (("checkpoints", "base", "endpoint"), "http://127.0.0.1:9/v1"),
    (("base",), "late"),
    (("test", "a_key_added_later"), 1),
    (("rollouts", "a_key_added_later"), 1),
])
def test_any_value_read_changes_the_identity(path, value):
    assert identity_of(changed(path, value), stage_like) != identity_of(PARAMS, stage_like)


@pytest.mark.parametrize("path, value", [
    (("checkpoints", "other", "skill"), 0.1),  # a checkpoint the access does not use
    (("select", "rule"), "last"),  # a section the stage does not read
    (("test", "reaccess", "reason"), "why"),
    (("test", "experiment"), "exp-1"),
    (("rollouts", "in_flight"), 1),
    (("rollouts", "cache"), "elsewhere.sqlite"),
    (("custody", "public_key"), "ab" * 32),
])
def test_what_is_not_read_or_says_only_who_looks_leaves_it(path, value):
    assert identity_of(changed(path, value), stage_like) == identity_of(PARAMS, stage_like)


def test_iterating_records_everything_so_reading_more_is_only_ever_stricter():
    def iterating(reads):
        stage_like(reads)
        dict(reads["checkpoints"])  # every checkpoint, as a whole

    assert (identity_of(changed(("checkpoints", "other", "skill"), 0.1), iterating)
            != identity_of(PARAMS, iterating))
    reads = ParamsReads(PARAMS)
    list(reads)
    assert set(reads.recorded()) == set(PARAMS) - {"custody"}


def test_a_read_after_the_identity_is_fixed_raises():
    reads = ParamsReads(PARAMS)
    stage_like(reads)
    access_identity(reads, {})
    reads.get("harness")  # read before: the same value again is fine
    reads.get("custody")  # not a result input
    with pytest.raises(RuntimeError, match="params.select was read after"):
        reads.get("select")
    with pytest.raises(RuntimeError, match="params.checkpoints.other was read after"):
        checkpoint_settings(reads, "other")


def test_sections_validate_as_before():
    reads = ParamsReads(PARAMS)
    assert section(reads, "rollouts", RolloutsConfig).in_flight == 8


# --- the stage against its DVC definition --------------------------------------------------


def test_the_stage_reads_exactly_what_dvc_reruns_it_for(selected_copy: Path, monkeypatch):
    """Every section the test stage computes from is a params dependency of its DVC stage
    (else DVC would not rerun it when that section changes), and every params dependency is
    read or named in NOT_RESULTS."""
    seen = {}

    class Stop(Exception):
        pass

    def capture(params, computed_from):
        seen["identity"] = access_identity(params, computed_from)
        raise Stop

    # The access is computed where the test stage and `heldout plan` both compute it.
    monkeypatch.setattr(access_inputs, "access_identity", capture)
    with pytest.raises(Stop):
        test_stage.run(selected_copy)
    read = seen["identity"]["params"]
    declared = set(yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["test"]["params"])
    computed_from = {path.split(".")[0] for path, value in read.items() if value != {}}
    assert computed_from <= declared, computed_from - declared
    cut_whole = {cut[0] for cut in NOT_RESULTS if len(cut) == 1}
    assert declared <= {path.split(".")[0] for path in read} | cut_whole
    assert set(seen["identity"]["computed_from"]) == {
        "test_version", "content_version", "task_source", "excluded_test", "arms"}
