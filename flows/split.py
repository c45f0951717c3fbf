"""The `split` stage as a Prefect flow."""

from __future__ import annotations

from typing import Any

from prefect import flow

from stages import split


@flow(name="split", description=split.__doc__)
def split_flow() -> dict[str, Any]:
    return split.run()
