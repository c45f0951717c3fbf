"""Every file the pipeline reads or writes, named once. dvc.yaml names the same paths (a test
holds the two together); the core names only what it guards: the sealed test split and the
ledger (heldout.custody.lock)."""

from __future__ import annotations

from pathlib import Path

from heldout.custody.guard import LEDGER, SEALED_TEST, SPLIT_DIR

PARAMS_FILE = Path("params.yaml")

# split
MANIFEST = SPLIT_DIR / "manifest.json"
FINGERPRINT_DIR = SPLIT_DIR / "fingerprints"

# decontaminate
DECONTAM_DIR = Path("data/decontam")
DECONTAM_TRAIN = DECONTAM_DIR / "train.jsonl"
DECONTAM_REPORT = DECONTAM_DIR / "report.json"
EXCLUDED = DECONTAM_DIR / "excluded.json"

# rollouts and score
ROLLOUT_DIR = Path("data/rollouts/val")
SCORES = Path("data/scores/val.json")
PER_TASK = Path("data/scores/val_per_task.parquet")
# One JSON per checkpoint (val_metrics_file), so `dvc metrics show` gives each its own row.
VAL_METRICS = Path("metrics/val")
PASSK_CSV = Path("plots/val_passk.csv")
PASSK_PNG = Path("plots/val_passk.png")

# sensitivity (the harness sweep, val only; no stage reads these)
SENSITIVITY = Path("data/sensitivity/val.json")
SENSITIVITY_METRICS = Path("metrics/sensitivity.json")
SENSITIVITY_PNG = Path("plots/sensitivity.png")

# select, test, report
SELECTION = Path("data/selection.json")
TEST_ROLLOUTS = Path("data/test/rollouts")
ACCESS = Path("data/test/access.json")
# The test episodes whole (completions included), sealed for the test key; the rollout files
# beside it hold outcomes only, for the report.
SEALED_TEST_EPISODES = Path("data/test/episodes.sealed")
# pass@1 of each run of the arm rerun for the run-level drift (params.reruns), and the
# variance its episodes alone give.
RERUNS = Path("data/test/reruns.json")
REPORTS = Path("reports")
# params.recipes' verdict, unit the training seed (heldout.report.recipe), beside the report.
RECIPE_REPORT = REPORTS / "recipe"
TEST_METRICS = Path("metrics/test.json")

__all__ = [
    "ACCESS", "DECONTAM_DIR", "DECONTAM_REPORT", "DECONTAM_TRAIN", "EXCLUDED", "FINGERPRINT_DIR",
    "LEDGER", "MANIFEST", "PARAMS_FILE", "PASSK_CSV", "PASSK_PNG", "PER_TASK", "REPORTS", "RERUNS",
    "ROLLOUT_DIR", "SCORES", "SEALED_TEST", "SEALED_TEST_EPISODES", "SELECTION", "SENSITIVITY",
    "SENSITIVITY_METRICS", "SENSITIVITY_PNG", "SPLIT_DIR", "TEST_METRICS", "TEST_ROLLOUTS",
    "VAL_METRICS", "fingerprint_file", "rollout_file", "split_file", "test_rollout_file",
    "val_metrics_file",
]


def split_file(name: str) -> Path:
    """train or val; the test split is sealed (SEALED_TEST)."""
    return SPLIT_DIR / f"{name}.jsonl"


def fingerprint_file(split: str) -> Path:
    return FINGERPRINT_DIR / f"{split}.json"


def rollout_file(checkpoint: str) -> Path:
    return ROLLOUT_DIR / f"{checkpoint}.parquet"


def val_metrics_file(checkpoint: str) -> Path:
    return VAL_METRICS / f"{checkpoint}.json"


def test_rollout_file(arm: str) -> Path:
    """candidate or base: the two arms of the single test access, outcomes only (no completion,
    no trajectory, an empty error: on test tasks they stay sealed in SEALED_TEST_EPISODES)."""
    return TEST_ROLLOUTS / f"{arm}.parquet"
