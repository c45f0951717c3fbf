"""`params.decontaminate`: each method's threshold, the training corpora, and the policy for eval
items a training corpus leaked."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from heldout.contamination.code import LiteralMode
from heldout.contamination.sources import TrainingCorpus

Policy = Literal["flag", "drop", "fail"]


class DecontaminateConfig(BaseModel):
    """`params.decontaminate`. The n-gram length is `split.ngram`, read from the fingerprints."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Policy = "flag"
    ngram_threshold: float = Field(default=0.5, gt=0, le=1)
    boilerplate_items: int = Field(default=3, ge=2, description="n-grams and code shared by "
                                   "this many eval items are template, not evidence")
    jaccard_threshold: float = Field(default=0.4, gt=0, le=1)
    minhash_min_shingles: int = Field(default=10, ge=1)
    code_threshold: float = Field(default=0.8, gt=0, le=1)
    code_min_nodes: int = Field(default=12, ge=1)
    code_literals: LiteralMode = "keep"
    training_corpora: list[TrainingCorpus] = []
    workers: int = Field(default=1, ge=1, description="processes scanning training items; "
                         "the report does not depend on it")

