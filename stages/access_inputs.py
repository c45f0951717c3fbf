"""What one test access is, read from params and the split's files: the configs the test stage
runs under, the arms, and the access's identity and key (heldout.custody.identity). The test
stage computes it before it opens anything, and `heldout plan` the same way, to say what the
stage would do with it (heldout.custody.foresight) without running it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heldout.agents.registry import identity_settings
from heldout.canonical import content_digest
from heldout.custody.access_params import TestConfig
from heldout.custody.guard import TestSetAccessError
from heldout.custody.identity import ParamsReads, access_identity, identity_digest
from heldout.custody.keys import CustodyConfig
from heldout.custody.lock import AccessKey
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig
from heldout.statistics.recipe import RecipesConfig
from stages.catalog import SELECTION
from stages.common import checkpoint_settings, excluded_ids, read_manifest, section
from stages.reruns import RerunsConfig


@dataclass(frozen=True)
class AccessInputs:
    harness: Harness
    rollouts: RolloutsConfig
    test: TestConfig
    reruns: RerunsConfig
    custody: CustodyConfig
    manifest: dict[str, Any]
    selection: dict[str, Any]
    names: dict[str, str]  # arm -> checkpoint
    settings: dict[str, dict[str, Any]]  # arm -> its checkpoint's settings
    excluded: frozenset[str]
    identity: dict[str, Any]
    key: AccessKey
    # params.recipes: the seeds of each recipe, evaluated on the test split in this access.
    recipes: RecipesConfig
    recipe_settings: dict[str, dict[str, Any]]  # each seed's checkpoint -> its settings


def read_selection(root: Path) -> dict[str, Any]:
    path = root / SELECTION
    if not path.is_file():
        raise TestSetAccessError(f"{path}: missing; the test stage runs only after `select`")
    return json.loads(path.read_text(encoding="utf-8"))


def access_inputs(root: Path, params: ParamsReads) -> AccessInputs:
    """Everything the access is, read through `params` (which records each read, and after
    the identity is fixed refuses new ones)."""
    harness = section(params, "harness", Harness)
    rollouts = section(params, "rollouts", RolloutsConfig)
    test = section(params, "test", TestConfig)
    reruns = section(params, "reruns", RerunsConfig)
    custody = section(params, "custody", CustodyConfig)
    manifest = read_manifest(root)
    selection = read_selection(root)
    names = {"candidate": selection["chosen"], "base": params.get("base")}
    settings = {arm: checkpoint_settings(params, name) for arm, name in names.items()}
    identities = {arm: content_digest(identity_settings(value))
                  for arm, value in settings.items()}
    excluded = excluded_ids(root, "test")
    recipes = section(params, "recipes", RecipesConfig) if "recipes" in params else RecipesConfig()
    recipe_settings = {name: checkpoint_settings(params, name) for name in recipes.checkpoints()}
    content_version = manifest.get("test_content_version") or manifest["test_version"]
    identity = access_identity(params, {
        "test_version": manifest["test_version"], "content_version": content_version,
        "task_source": manifest["source"], "excluded_test": sorted(excluded), "arms": names,
        # Which recipe is the baseline is their order, which a digest of the params mapping
        # (its keys sorted) would not see; empty: none, so an access without recipes keeps its
        # identity.
        **({"recipes": list(recipes.root.items())} if recipes.root else {})})
    key = AccessKey(manifest["test_version"], names["candidate"], names["base"],
                    harness.fingerprint(), identities["candidate"], identities["base"],
                    content_version, identity_digest(identity))
    return AccessInputs(harness, rollouts, test, reruns, custody, manifest, selection, names,
                        settings, excluded, identity, key, recipes, recipe_settings)
