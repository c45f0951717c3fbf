"""`params.test`: what the test stage may do with the test split (the reason for another
access, the spend of the plan before it, the experiment allowed to run it), read by the test
stage and by the report (which writes a sweep's report in place of a verdict)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from heldout.custody.spend import SpendConfig


class ReaccessConfig(BaseModel):
    """`params.test.reaccess`: why one more access, and which one it is for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    access: str = ""
    reason: str = ""


class TestConfig(BaseModel):
    """`params.test`."""

    __test__ = False
    model_config = ConfigDict(extra="forbid", frozen=True)

    reaccess: ReaccessConfig = ReaccessConfig()
    spend: SpendConfig = SpendConfig()
    experiment: str = ""
