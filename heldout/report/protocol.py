"""The protocol card a report carries: how the numbers were made and how spent the test set is.
Copied as plain JSON values, checked where the card relies on its shape, and compared with the
harness the rollouts ran under."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from heldout.report.formatting import short_fingerprint


class ProtocolCard(TypedDict, total=False):
    """What `build_report(protocol=...)` renders as the protocol card. Every section is
    optional and may hold more fields than listed: the card shows every field it is given.

    tasks:       {"source", "digest", "count"}
    split:       {"salt", "fractions": {"train", "val", "test"}, "test_version",
                  "digests": {"train", "val", "test"}, "kind" (which split:
                  heldout.tasks.families.split_kind), "group" (what a group is), and
                  "families" (tasks per family per split) where families were held out}
    harness:     {"fingerprint", **Harness.model_dump(mode="json")} (every field: template,
                  sampling, budgets, n, sandbox image and network, scorer version)
    selection:   data/selection.json as the select stage writes it: {"rule", "metric",
                  "chosen", "table": [{"checkpoint", "value", "low", "high", ...}, ...], ...}
                  (the val table the rule chose from, drawn as a chart; since issue 41
                  also "pick_stability": {"shares": {checkpoint: share}, ...} and
                  "winners_curse": {"note", ...}, optional)
    test_access: {"test_version", "opened", "models_evaluated", "ledger", "this_access",
        "tasks_seen_before"} (from the ledger and the access)
    """

    tasks: dict[str, Any]
    split: dict[str, Any]
    harness: dict[str, Any]
    selection: dict[str, Any]
    test_access: dict[str, Any]



def protocol_copy(protocol: Mapping[str, Any]) -> ProtocolCard:
    """The protocol as plain JSON values (never aliasing the caller's objects), checked where
    the card relies on its shape: sections are objects, selection rows can be drawn."""
    try:
        copy = json.loads(json.dumps(protocol, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise ValueError(f"protocol must hold plain JSON values: {error}") from None
    for name, section in copy.items():
        if not isinstance(section, dict):
            raise ValueError(f"protocol.{name} must be an object, got {section!r}")
    for index, row in enumerate(copy.get("selection", {}).get("table", [])):
        shaped = isinstance(row, dict) and isinstance(row.get("checkpoint"), str) and all(
            isinstance(row.get(key), int | float) for key in ("value", "low", "high")
        )
        if not shaped:
            raise ValueError(
                f"protocol.selection.table[{index}] must be {{checkpoint, value, low, high}}, "
                f"got {row!r}"
            )
    _check_honest_selection(copy.get("selection", {}))
    return copy


def _check_honest_selection(selection: dict[str, Any]) -> None:
    """The pick stability's shares (a column of the selection table) and the winner's-curse
    note (a line of the card), where the selection has them: one written before issue 41 has
    neither and renders without them."""
    stability, curse = selection.get("pick_stability", {}), selection.get("winners_curse", {})
    shares = stability.get("shares", {}) if isinstance(stability, dict) else None
    if not isinstance(shares, dict) or not all(
            isinstance(share, int | float) and 0 <= share <= 1 for share in shares.values()):
        raise ValueError("protocol.selection.pick_stability.shares must map checkpoints to "
                         f"shares in [0, 1], got {stability!r}")
    if not isinstance(curse, dict) or not isinstance(curse.get("note", ""), str):
        raise ValueError(f"protocol.selection.winners_curse must hold a note, got {curse!r}")


def protocol_warnings(protocol: ProtocolCard, fingerprints: Iterable[str]) -> list[str]:
    """A warning when the protocol declares a harness other than the one the rollouts were
    produced under (`fingerprints`: every harness found in either arm)."""
    declared = protocol.get("harness", {}).get("fingerprint")
    produced = set(fingerprints)
    if declared and produced != {declared}:
        return [
            f"The protocol's harness is {short_fingerprint(declared)}, but the rollouts were "
            f"produced under {', '.join(map(short_fingerprint, sorted(produced)))}."
        ]
    return []
