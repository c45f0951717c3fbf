"""The selection table and card say how often the rule picks each checkpoint under resampling
and the winner's curse of the pick (issue 41 item 4); a selection.json from before them still
renders, without them."""

from __future__ import annotations

import pandas as pd
import pytest

from heldout.report import build_report
from heldout.report.protocol import protocol_copy
from heldout.report.render import render_markdown
from heldout.report.sweep import sweep_document
from heldout.statistics.counts import per_task_counts
from heldout.statistics.selection import SelectConfig, select_checkpoint
from tests.report.test_one_number import ragged_arm
from tests.report.test_report import full_markdown

NEW_KEYS = ("pick_stability", "winners_curse")


@pytest.fixture(scope="module")
def arms() -> tuple[pd.DataFrame, pd.DataFrame]:
    return ragged_arm("base", 1), ragged_arm("cand", 2)


@pytest.fixture(scope="module")
def selection(arms) -> dict:
    return select_checkpoint(per_task_counts(pd.concat(arms)), ["base", "cand"],
                             SelectConfig())


def card_of(arms, selection: dict) -> str:
    report = build_report(*arms, protocol={"selection": selection})
    return full_markdown(report).split("## Protocol card")[1]


def test_the_card_shows_each_checkpoints_share_of_resamples_and_the_winners_curse(
        arms, selection):
    card = card_of(arms, selection)
    shares = selection["pick_stability"]["shares"]
    assert "| checkpoint | val pass@1 | 95% interval | picked in resamples |" in card
    for name, share in shares.items():
        row = next(line for line in card.splitlines() if line.startswith(f"| {name} | "))
        assert f"| {100 * share:.1f}% |" in row
    assert selection["winners_curse"]["note"] in card
    assert "| pick_stability.resamples | 2000 |" in card
    # The shares are the column, not a row per checkpoint; the curse is its sentence.
    assert "pick_stability.shares" not in card and "winners_curse." not in card


def test_a_selection_written_before_the_resampling_renders_as_it_did(arms, selection):
    old = {key: value for key, value in selection.items() if key not in NEW_KEYS}
    card = card_of(arms, old)
    assert "| checkpoint | val pass@1 | 95% interval | public-vs-hidden alarm |" in card
    assert "picked in resamples" not in card and "Winner's curse" not in card
    sweep = render_markdown(sweep_document("exp-old", old))
    assert "picked in resamples" not in sweep and "Winner's curse" not in sweep


def test_a_sweeps_report_carries_them_too(selection):
    sweep = render_markdown(sweep_document("exp-1", selection))
    assert "picked in resamples" in sweep
    assert selection["winners_curse"]["note"] in sweep


@pytest.mark.parametrize("broken", [
    {"pick_stability": {"shares": {"base": 1.5}}},
    {"pick_stability": {"shares": ["base"]}},
    {"pick_stability": "all of them"},
    {"winners_curse": {"note": 0.02}},
])
def test_the_card_refuses_shares_it_could_not_draw(selection, broken):
    with pytest.raises(ValueError, match="protocol.selection"):
        protocol_copy({"selection": {**selection, **broken}})
