"""dvc.yaml and the code agree: every output a stage writes is a path of stages/catalog.py, and
every stage lists as deps the code it runs, so changing that code re-runs it."""

from __future__ import annotations

import pytest
import yaml

from stages import catalog
from tests.test_architecture import MODULES, ROOT, project_imports

DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
# Code that shapes only logs and messages, never an output, so changing it re-runs nothing:
# errors and environment word and locate; tracking logs to MLflow; the test-split guard can
# only stop a stage that opens the test split, never change what a stage writes.
# params_check reads params.yaml and refuses it whole or not at all: like the guard, it can stop
# a stage, never change what it writes (the models it validates with are each stage's own deps).
NOT_SHAPING_OUTPUTS = {"heldout/__init__.py", "heldout/errors.py", "heldout/environment.py",
                       "heldout/custody/guard.py", "stages/tracking.py", "stages/__init__.py",
                       "stages/params_check.py"}


def stage_body(name: str) -> dict:
    return DVC[name]["do"] if "foreach" in DVC[name] else DVC[name]


def declared_outputs() -> set[str]:
    found = set()
    for name in DVC:
        body = stage_body(name)
        for kind in ("outs", "metrics", "plots"):
            for entry in body.get(kind, []):
                found.add(next(iter(entry)) if isinstance(entry, dict) else entry)
    return found


def catalog_outputs() -> set[str]:
    files = {
        catalog.split_file("train"), catalog.split_file("val"), catalog.SEALED_TEST,
        catalog.MANIFEST, catalog.FINGERPRINT_DIR, catalog.DECONTAM_TRAIN,
        catalog.DECONTAM_REPORT, catalog.EXCLUDED, catalog.rollout_file("${key}"),
        catalog.SCORES, catalog.PER_TASK, catalog.VAL_METRICS, catalog.PASSK_CSV,
        catalog.PASSK_PNG, catalog.SELECTION, catalog.test_rollout_file("candidate"),
        catalog.test_rollout_file("base"), catalog.SEALED_TEST_EPISODES, catalog.ACCESS,
        catalog.RERUNS, catalog.REPORTS,
        catalog.TEST_METRICS, catalog.SENSITIVITY, catalog.SENSITIVITY_METRICS,
        catalog.SENSITIVITY_PNG,
    }
    return {str(path) for path in files}


def test_every_dvc_output_is_a_catalog_path_and_back():
    assert declared_outputs() == catalog_outputs()


def test_the_ledger_is_not_a_dvc_output():
    """DVC deletes outputs before a stage runs; the ledger must survive every run (git)."""
    assert str(catalog.LEDGER) not in declared_outputs()


def code_of(module: str) -> set[str]:
    """The project files a module runs that can shape its outputs, following its imports
    through the project (but not through code that shapes none)."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen or path_of(name) in NOT_SHAPING_OUTPUTS:
            continue
        seen.add(name)
        todo.extend(project_imports(name))
    return {path_of(name) for name in seen}


def path_of(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT))


@pytest.mark.parametrize("stage", sorted(DVC))
def test_every_stage_lists_the_code_it_runs(stage: str):
    deps = [dep.rstrip("/") for dep in stage_body(stage)["deps"]]
    for dep in deps:
        if dep.startswith(("heldout/", "stages/")):  # the rest are data, made by earlier stages
            assert (ROOT / dep).exists(), f"dvc.yaml: {stage} depends on {dep}, which is missing"

    def listed(path: str) -> bool:
        return any(path == dep or path.startswith(dep + "/") for dep in deps)

    unlisted = sorted(path for path in code_of(f"stages.{stage}") if not listed(path))
    assert unlisted == [], f"dvc.yaml: stage {stage} runs code it does not list as deps"


def test_the_deps_check_sees_what_a_stage_imports():
    assert {"heldout/custody/lock.py", "stages/catalog.py"} <= code_of("stages.test")
    assert "heldout/episodes/rollout.py" in code_of("stages.score")
    # rollouts reaches the ledger only through the guard (split now opens the store itself, for
    # the team key that unseals a sealed task source).
    assert "heldout/custody/ledger.py" not in code_of("stages.rollouts")
    assert "heldout/custody/ledger.py" in code_of("stages.split")


def test_no_metrics_column_is_named_like_a_dependency():
    """`dvc exp show` keys its columns by name: a metric named like a dependency (the test
    metrics' `tasks` and the split stage's `tasks` folder) shared one column, which showed the
    folder's hash, and `--drop` of it crashed DVC ("unexpected error - 'tasks'")."""
    from heldout.report.dvc_view import TEST_COLUMNS

    deps = {dep.rstrip("/") for name in DVC for dep in stage_body(name)["deps"]}
    assert "tasks" in deps
    assert {"verdict", *TEST_COLUMNS.values()} & deps == set()
