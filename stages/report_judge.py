"""The judge's trust in the pipeline's report (issue 42, item 4): params.judge names the
TRUST.json `heldout judge-trust` wrote from hand labels of val rows judged under the pinned
harness; below params.judge.min_agreement the report voids its verdict. The protocol card
records what was measured, or that nothing was."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from heldout.canonical import sha256_hex
from heldout.errors import HeldoutError, StageError
from heldout.statistics.decision import Gate
from heldout.statistics.judge_trust import JudgeConfig, trust_from_record


def judge_trust_inputs(root: Path, config: JudgeConfig, harness: str
                       ) -> tuple[tuple[Gate, ...], dict[str, Any]]:
    """The gates the judge's trust puts on the verdict, and the protocol card's
    `judge_trust`. `harness`: the pinned harness's fingerprint, which the labeled rows must
    have been judged under (a trust measured for another judge measures nothing here)."""
    if not config.trust:
        return (), {"file": None, "min_agreement": config.min_agreement, "measured": False,
                    "says": "the judge was not measured against hand labels "
                            "(params.judge.trust is empty)"}
    path = root / config.trust
    try:
        data = path.read_bytes()
        record = json.loads(data)
        trust = replace(trust_from_record(record, config.trust),
                        threshold=config.min_agreement)
    except (OSError, ValueError, HeldoutError) as error:
        raise StageError(f"params.yaml: judge.trust: {config.trust}: cannot be read as a "
                         f"TRUST.json ({error})") from None
    judged_under = record.get("harness")
    if judged_under != [harness]:
        raise StageError(
            f"params.yaml: judge.trust: {config.trust} measured rows judged under harness "
            f"{', '.join(map(str, judged_under or ['unknown']))}, not the pinned harness "
            f"{harness[:12]}: label rows of data/rollouts/val/*.parquet and run `heldout "
            "judge-trust` on them again")
    gate = trust.gate()
    card = {"file": config.trust, "sha256": sha256_hex(data), "measured": True,
            **trust.to_json(), "min_agreement": config.min_agreement, "says": trust.describe()}
    return ((gate,) if gate else ()), card


def judged_record(record: dict[str, Any], card: dict[str, Any]) -> dict[str, Any]:
    """A verdict record with the judge's trust among its settings, when it was measured: the
    access closed without it, so a report it voids says that this is what changed."""
    if not card["measured"]:
        return record
    trusted = "trusted" if card["trusted"] else "UNTRUSTED"
    return {**record, "settings": {**record["settings"], "judge": f"{trusted}: {card['says']}"}}
