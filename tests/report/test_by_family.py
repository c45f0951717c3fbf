"""The report's by-family section (issue 42, item 2), hand-computed on a tiny two-arm case: the
held-out families' test tasks beside the other test tasks, then each family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from heldout.canonical import content_digest
from heldout.errors import StageError
from heldout.report import build_report
from heldout.report.core import Report
from heldout.report.families import (
    FAMILY_SPLIT,
    VARIANT_SPLIT,
    FamilySplit,
    recorded_families,
)
from heldout.statistics.bca import difference_interval
from tests.report.test_report import full_markdown, rollouts


def episodes(rates: dict[str, list[int]]) -> dict[str, list[bool]]:
    return {task: [bool(x) for x in passed] for task, passed in rates.items()}


BASE = episodes({"x1": [1, 0], "x2": [0, 0], "x3": [0, 0],
                 "y1": [1, 1], "y2": [1, 0], "y3": [0, 0], "z1": [1, 1]})
CANDIDATE = episodes({"x1": [1, 1], "x2": [1, 0], "x3": [0, 0],
                      "y1": [1, 1], "y2": [1, 1], "y3": [1, 0], "z1": [0, 1]})
OF_TASK = {task: task[0] for task in BASE}  # x1 → family "x"
HELD_OUT_X = FamilySplit("metadata.family", frozenset({"x"}), OF_TASK)


def test_by_family_puts_the_unseen_families_beside_the_seen_ones():
    report = build_report(rollouts("base", BASE), rollouts("cand", CANDIDATE),
                          families=HELD_OUT_X)
    by_family = report.by_family
    assert (by_family.field, by_family.held_out) == ("metadata.family", ["x"])
    unseen, seen = by_family.splits
    # x: base 1/2, 0, 0; candidate 1, 1/2, 0; differences 1/2, 1/2, 0
    assert (unseen.name, unseen.tasks) == (FAMILY_SPLIT, 3)
    assert (unseen.base, unseen.candidate) == (pytest.approx(1 / 6), pytest.approx(1 / 2))
    assert unseen.difference == pytest.approx(1 / 3)
    assert (unseen.improved, unseen.regressed, unseen.tied) == (2, 0, 1)
    expected = difference_interval(np.array([0.5, 0.5, 0.0]), seed=0)
    assert (unseen.low, unseen.high) == pytest.approx((expected.low, expected.high))
    # y and z: base 1, 1/2, 0, 1; candidate 1, 1, 1/2, 1/2; differences 0, 1/2, 1/2, -1/2
    assert (seen.name, seen.tasks) == (VARIANT_SPLIT, 4)
    assert (seen.base, seen.candidate) == (pytest.approx(0.625), pytest.approx(0.75))
    assert seen.difference == pytest.approx(0.125)
    assert (seen.improved, seen.regressed, seen.tied) == (2, 1, 1)
    expected = difference_interval(np.array([0.0, 0.5, 0.5, -0.5]), seed=0)
    assert (seen.low, seen.high) == pytest.approx((expected.low, expected.high))
    # one row per family; z's one task is unmeasured, its numbers still shown
    x, y, z = by_family.environments
    assert [(row.name, row.held_out, row.tasks) for row in (x, y, z)] == [
        ("x", True, 3), ("y", False, 3), ("z", False, 1)]
    assert x.difference == pytest.approx(1 / 3) and (x.low, x.high) == (unseen.low, unseen.high)
    assert (y.base, y.candidate, y.difference) == (pytest.approx(0.5), pytest.approx(5 / 6),
                                                   pytest.approx(1 / 3))
    assert (z.difference, z.low, z.high) == (pytest.approx(-0.5), None, None)
    assert z.method.startswith("unmeasured")
    metrics = report.metrics
    assert (metrics["family_split_tasks"], metrics["variant_split_tasks"]) == (3, 4)
    assert metrics["family_split_difference"] == pytest.approx(1 / 3, abs=1e-6)
    assert metrics["variant_split_difference"] == pytest.approx(0.125)
    markdown = full_markdown(report)
    assert "By family: unseen families and new groups" in markdown
    assert FAMILY_SPLIT in markdown and VARIANT_SPLIT in markdown
    assert "| z | no | 1 |" in markdown and "unmeasured" in markdown
    again = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert again.by_family == by_family
    # the claim names the split it rests on
    kind = "family (held out: metadata.family = x) + variant (stratified by metadata.family)"
    carded = build_report(rollouts("base", BASE), rollouts("cand", CANDIDATE),
                          families=HELD_OUT_X,
                          protocol={"split": {"test_version": "t-1", "kind": kind}})
    assert (f"(the test split's 7 tasks, a {kind} split: whole families no earlier stage saw "
            "beside new groups of seen ones, each measured apart under By family)"
            ) in carded.headline.claim


def test_a_row_whose_tasks_share_one_group_is_unmeasured():
    groups = {"y1": "g", "y2": "g", "y3": "g"}
    report = build_report(rollouts("base", BASE), rollouts("cand", CANDIDATE), groups=groups,
                          families=HELD_OUT_X)
    _, y, _ = report.by_family.environments
    assert (y.tasks, y.low, y.difference) == (3, None, pytest.approx(1 / 3))
    # the variant split's four tasks are two groups (g and z1): measured over groups
    seen = report.by_family.splits[1]
    expected = difference_interval(np.array([0.0, 0.5, 0.5, -0.5]),
                                   groups=np.array(["g", "g", "g", "z1"]), seed=0)
    assert (seen.low, seen.high) == pytest.approx((expected.low, expected.high))


def test_no_families_held_out_no_section():
    report = build_report(rollouts("base", BASE), rollouts("cand", CANDIDATE))
    assert report.by_family is None and report.to_json()["by_family"] is None
    assert "By family" not in full_markdown(report)
    assert not any(key.startswith(("family_split", "variant_split")) for key in report.metrics)


def test_the_report_reads_families_only_as_the_access_closed_with_them():
    manifest = {"hold_out": {"field": "metadata.family", "values": ["x"]}}
    access = {"families": OF_TASK}
    closed = {"access_id": "a1", "seq": 7,
              "verdict": {"families_digest": content_digest(OF_TASK)}}
    assert recorded_families(manifest, access, closed) == HELD_OUT_X
    assert recorded_families({}, access, closed) is None  # a variant split
    assert recorded_families(manifest, {}, closed) is None  # an access recording none
    edited = {"families": {**OF_TASK, "z1": "x"}}
    with pytest.raises(StageError, match="not the ones access a1 closed with .ledger line 7"):
        recorded_families(manifest, edited, closed)
