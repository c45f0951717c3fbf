"""The harness fingerprint is in every rollout row and MLflow run, and the score stage refuses
rollouts made under another: pinned here, so that no refactor changes it unnoticed."""

from __future__ import annotations

import json

import pytest

from heldout.episodes.harness import EXECUTION_ONLY, Harness
from heldout.sandbox.config import SandboxConfig

# What the default harness gives since timeout_s became CPU time, with sandbox.wall_factor's
# backstop (before: 251cf003... since on_truncation entered the fingerprint, fe084cf5... since
# sandbox.container_per did, e2a91030... since episodes became a loop with tools and
# per-episode budgets, abe2fdc2... under the two-process judge, f179c0d8... with
# python-function/1). Only a change of what a score means may change it.
DEFAULT_FINGERPRINT = "110b139c66a99a3b307c53b21dcf36c6ef977bee2b7e448c8bc0fcb05b55bc81"
DEFAULT_JSON = (
    '{"template": "{prompt}", "temperature": 0.8, "top_p": 0.95, "max_tokens": 512, '
    '"max_turns": 1, "max_tool_calls": 8, "max_cost_usd": null, "tools": '
    '["run_public_tests", "submit"], "on_budget": "fail", "on_truncation": "fail", '
    '"timeout_s": 10.0, '
    '"agent_timeout_s": 120.0, "n": 10, "seed": 0, "retries": 1, "sandbox": {"backend": '
    '"subprocess", "image": "heldout-python:3.11", "memory_mb": 512, "cpus": 1.0, '
    '"workers": 2, "network": "none", "container_per": "task", "wall_factor": 4.0}, '
    '"scorer_version": "python-function/2"}'
)


def test_the_default_harness_keeps_its_fingerprint_and_its_json():
    assert json.dumps(Harness().model_dump(mode="json")) == DEFAULT_JSON
    assert Harness().fingerprint() == DEFAULT_FINGERPRINT


def test_only_what_can_change_a_score_changes_the_fingerprint():
    faster = Harness(sandbox={"workers": 8})
    assert faster.fingerprint() == DEFAULT_FINGERPRINT
    assert Harness(timeout_s=11).fingerprint() != DEFAULT_FINGERPRINT
    assert Harness(sandbox={"backend": "docker"}).fingerprint() != DEFAULT_FINGERPRINT


@pytest.mark.parametrize("setting", [
    {"container_per": "program"}, {"backend": "docker"}, {"image": "python:3.12-slim"},
    {"memory_mb": 1024}, {"cpus": 2.0}, {"wall_factor": 8.0},
])
def test_every_sandbox_setting_that_can_change_a_score_changes_the_fingerprint(setting):
    changed = Harness(sandbox=setting)
    assert changed.fingerprint() != DEFAULT_FINGERPRINT
    # workers alongside it changes nothing more: the same setting at 8 workers is the same.
    assert Harness(sandbox={**setting, "workers": 8}).fingerprint() == changed.fingerprint()


def test_workers_is_the_one_sandbox_setting_the_fingerprint_leaves_out():
    fingerprinted = Harness().model_dump(mode="json", exclude=EXECUTION_ONLY)["sandbox"]
    assert set(SandboxConfig.model_fields) - set(fingerprinted) == {"workers"}
