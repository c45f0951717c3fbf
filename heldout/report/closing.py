"""The verdict an access closes with, and what a later report of the same access says of it.

The test stage computes the verdict from the very files it writes and records it in the
access's `closed` ledger line (MAC'd under the test key), beside the digests of those files.
A report of that access afterwards is a re-drawing, never a silent re-decision: its files must
be the recorded ones (else it is refused), and a verdict that comes out otherwise (the
verdict's code or its settings changed since) is shown beside the recorded one, with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from heldout.canonical import content_digest
from heldout.report.estimates import headline_estimates
from heldout.report.inputs import pair_arms
from heldout.statistics.decision import Decision
from heldout.statistics.power import Reruns
from heldout.statistics.rule import rule_settings

# The verdict's numbers compared between the record and a report: the words and what they
# rest on. Rounded: a last-bit difference between two numpy builds is no re-decision.
_DIGITS = 10


def verdict_record(decision: Decision, groups: Mapping[str, str]) -> dict[str, Any]:
    """What a closed access keeps of its verdict: the words, the difference and its
    interval, the test's p-value, the units, the groups it was computed with, the rule's
    settings."""
    difference = decision.difference
    return {"verdict": decision.verdict,
            "difference": round(float(difference.estimate), _DIGITS),
            "interval": [round(float(difference.low), _DIGITS),
                         round(float(difference.high), _DIGITS)],
            "p_value": round(float(decision.test.p_value), _DIGITS),
            "tasks": decision.support.tasks, "groups": decision.support.groups,
            "groups_digest": content_digest(dict(groups)), "settings": rule_settings()}


def closing_verdict(base: pd.DataFrame, candidate: pd.DataFrame, *,
                    groups: Mapping[str, str], reruns: Reruns | None) -> dict[str, Any]:
    """The verdict of two test rollout tables as the report computes it (same pairing, same
    estimators, seed 0), recorded when the access closes."""
    paired = pair_arms(base, candidate, names=(None, None), sample=0,
                       allow_harness_mismatch=False)
    decision = headline_estimates(paired.arms, groups=groups, reruns=reruns, mismatch=None,
                                  seed=0).decision
    return verdict_record(decision, groups)


def words(record: Mapping[str, Any]) -> str:
    low, high = record["interval"]
    return (f"{record['verdict']} ({100 * record['difference']:+.1f} points, 95% interval "
            f"[{100 * low:+.1f}, {100 * high:+.1f}], p = {record['p_value']:.3g}, "
            f"{record['tasks']} tasks in {record['groups']} groups)")


def redrawn(recorded: Mapping[str, Any], now: Mapping[str, Any], *, closed_at: str,
            commit: str) -> str | None:
    """None when a report's verdict is the recorded one; else the warning that shows both
    and says why they differ (the files were checked to be the access's own, so what
    differs is the rule: its settings, or its code between two commits)."""
    keys = ("verdict", "difference", "interval", "p_value", "tasks", "groups")
    if all(recorded.get(key) == now.get(key) for key in keys):
        return None
    settings = [f"{name} {recorded['settings'].get(name)} → {value}"
                for name, value in now["settings"].items()
                if recorded.get("settings", {}).get(name) != value]
    why = (f"the rule's settings changed since: {', '.join(settings)}" if settings else
           f"the verdict's code changed between {closed_at} and {commit}, with the same "
           "settings")
    return (f"RE-DRAWN: when this access closed ({closed_at}) its verdict was "
            f"{words(recorded)}; this report computes {words(now)} from the same files. "
            f"They differ because {why}. The recorded verdict is the access's; this one is "
            "a re-drawing of it, not a new decision")
