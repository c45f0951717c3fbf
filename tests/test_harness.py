"""The harness fingerprint is in every rollout row and MLflow run, and the score stage refuses
rollouts made under another: pinned here, so that no refactor changes it unnoticed."""

from __future__ import annotations

import json

from heldout.episodes.harness import Harness

# What the default harness gives since the two-process judge (scorer python-function/2; with
# python-function/1 it was f179c0d8...). Only a change of what a score means may change it.
DEFAULT_FINGERPRINT = "abe2fdc2dd9edf5c85794828c82c7a3569d5177371085a370f654b992e1800bd"
DEFAULT_JSON = (
    '{"template": "{prompt}", "temperature": 0.8, "top_p": 0.95, "max_tokens": 512, '
    '"max_turns": 1, "timeout_s": 10.0, "agent_timeout_s": 120.0, "n": 10, "seed": 0, '
    '"retries": 1, "sandbox": {"backend": "subprocess", "image": "heldout-python:3.11", '
    '"memory_mb": 512, "cpus": 1.0, "workers": 2, "network": "none", "container_per": "task"}, '
    '"scorer_version": "python-function/2"}'
)


def test_the_default_harness_keeps_its_fingerprint_and_its_json():
    assert json.dumps(Harness().model_dump(mode="json")) == DEFAULT_JSON
    assert Harness().fingerprint() == DEFAULT_FINGERPRINT


def test_only_what_can_change_a_score_changes_the_fingerprint():
    faster = Harness(sandbox={"workers": 8, "container_per": "program"})
    assert faster.fingerprint() == DEFAULT_FINGERPRINT
    assert Harness(timeout_s=11).fingerprint() != DEFAULT_FINGERPRINT
    assert Harness(sandbox={"backend": "docker"}).fingerprint() != DEFAULT_FINGERPRINT
