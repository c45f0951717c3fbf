"""The leakage channels, one row each (issue 42): what decontamination compared, at which
threshold, and how much it found; and the channels it does not check, with where they are
measured. A reader sees what was looked for as well as what was found: "no copy found" means
something only beside what a copy had to look like to be found.

Rows of report.json `channels`, in this order:
- checked here, one row per method family of heldout.contamination.index (exact copy, n-gram
  overlap, MinHash near-duplicate, rename-invariant code, shared group): `matches` per eval
  split (every match, the train split's included) and `flagged`, per split, the eval items a
  training *corpus* holds by that channel (the train split's matches remove training items and
  flag nothing);
- not checked here (`checked` false, `matches` and `flagged` None, `where` says where): a task
  released before a checkpoint's data cutoff (the report's by_date section), and recall of a
  task's text by the checkpoint itself (the prefix-completion probe, `heldout probe-recall`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.fingerprints import FINGERPRINTED_FIELDS, MINHASH_FIELDS
from heldout.contamination.sources import TRAIN_SPLIT_SOURCE

SPLITS = ("val", "test")


def _fields(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _checked(config: DecontaminateConfig, n: int) -> list[tuple[str, tuple[str, ...], str, str]]:
    """(channel, methods, what was compared, threshold) of each channel checked here."""
    template = (f"n-grams and code shared by {config.boilerplate_items} or more eval items are "
                "template, not evidence")
    return [
        ("exact copy", ("exact", "normalized"),
         "each training item's text (each field, and its fields joined) against each eval "
         f"item's {_fields(FINGERPRINTED_FIELDS)} and whole program (prompt and solution)",
         "equal text, raw or after normalization (sha256)"),
        ("n-gram overlap", ("ngram",),
         f"word {n}-grams of each training item (its fields joined) against each eval item's "
         f"{_fields(FINGERPRINTED_FIELDS)}; {template}",
         f"at least {config.ngram_threshold:g} of an eval field's {n}-grams in one training "
         "item"),
        ("MinHash near-duplicate", ("minhash",),
         f"each training item's fields against each eval item's {_fields(MINHASH_FIELDS)} and "
         f"whole program, texts of at least {config.minhash_min_shingles} shingles",
         f"estimated Jaccard similarity at least {config.jaccard_threshold:g}"),
        ("rename-invariant code", ("code",),
         "the AST fingerprint (names renamed, literals "
         f"{config.code_literals}) of each training item's code against each eval item's "
         f"program, functions and statements of at least {config.code_min_nodes} nodes; "
         f"{template}",
         f"an eval function held whole, or at least {config.code_threshold:g} of its body's "
         "statements"),
        ("shared group", ("group",),
         "each training item's group key against each eval item's group",
         "the same group key"),
    ]


NOT_CHECKED = (
    ("released before the data cutoff",
     "each test task's `released` date against each checkpoint's `data_cutoff`",
     "released on or before the later of the two arms' cutoffs",
     "not checked here: the pipeline report's by_date section (report.json `by_date`) splits "
     "the compared tasks there and gives the difference on each side"),
    ("recall by the checkpoint",
     "a task's text completed by the checkpoint itself from its prefix",
     "set by the probe",
     "not checked here: the prefix-completion probe, `heldout probe-recall`"),
)


def channel_rows(config: DecontaminateConfig, n: int,
                 matches: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """report.json `channels`: the rows of the module's docstring. `n`: the fingerprints'
    n-gram length; `matches`: the report's match records."""
    rows = []
    for channel, methods, compared, threshold in _checked(config, n):
        mine = [m for m in matches if m["method"] in methods]
        rows.append({
            "channel": channel, "checked": True, "methods": list(methods),
            "compared": compared, "threshold": threshold,
            "matches": {split: sum(m["eval_split"] == split for m in mine) for split in SPLITS},
            "flagged": {split: len({m["eval_id"] for m in mine if m["eval_split"] == split
                                    and m["source"] != TRAIN_SPLIT_SOURCE})
                        for split in SPLITS},
            "where": "decontaminate (data/decontam/report.json)"})
    rows += [{"channel": channel, "checked": False, "methods": [], "compared": compared,
              "threshold": threshold, "matches": None, "flagged": None, "where": where}
             for channel, compared, threshold, where in NOT_CHECKED]
    return rows
