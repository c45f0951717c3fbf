"""The `score` stage as a Prefect flow."""

from __future__ import annotations

from typing import Any

from prefect import flow

from stages import score


@flow(name="score", description=score.__doc__)
def score_flow() -> dict[str, Any]:
    return score.run()
