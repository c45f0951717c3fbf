"""The harness sweep: its plan of one-field settings, its refusals, and the sensitivity stage on a
small project (val only): a budget that binds moves the tester beyond its interval, a
single-shot reference stays put, a reference that depends on the budget is reported moved, and
a `dvc exp run -S` override of params changes what runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest
import yaml

from heldout.episodes.harness import Harness
from heldout.episodes.sweep import (
    MOVED,
    PINNED,
    STAYED_PUT,
    UNSWEPT,
    SensitivityConfig,
    harness_difference,
    invariant_fields,
    plan_settings,
    reference_verdict,
)
from heldout.errors import ParamsError
from stages import catalog, decontaminate, sensitivity, split
from stages.common import read_params, section
from tests.conftest import REPO, configure_small_project, copy_project
from tests.test_architecture import project_imports
from tests.test_catalog import code_of

PINNED_HARNESS = Harness.model_validate(
    yaml.safe_load((REPO / "params.yaml").read_text())["harness"])
TESTER = {"agent": "demo", "policy": "tester", "skill": 0.3}
SINGLE_SHOT = {"agent": "demo", "skill": 1.0}


# --- the plan --------------------------------------------------------------------------------


def test_the_plan_is_the_pinned_setting_then_each_field_changed_alone():
    fields = {"max_turns": [2, 5, 3, 3], "temperature": [0, 1.3], "tools": [["submit"]]}
    settings = plan_settings(PINNED_HARNESS, fields, n=4)
    # 5 is the pinned max_turns (the pinned setting, run once) and 3 is listed twice.
    assert [s.name for s in settings] == [PINNED, "max_turns=2", "max_turns=3",
                                          "temperature=0.0", "temperature=1.3",
                                          'tools=["submit"]']
    base = settings[0].harness
    assert base == PINNED_HARNESS.model_copy(update={"n": 4})
    for setting in settings[1:]:
        assert harness_difference(base, setting.harness) == {
            setting.field: (setting.pinned_value, setting.value)}
        assert (setting.harness.n, setting.harness.seed) == (4, PINNED_HARNESS.seed)
    fingerprints = [s.fingerprint for s in settings]
    assert len(set(fingerprints)) == len(settings)
    assert PINNED_HARNESS.fingerprint() not in fingerprints  # the sweep's n is its own harness
    # At the harness's own n the pinned setting is the rollouts' harness: its episodes resume.
    assert plan_settings(PINNED_HARNESS, fields)[0].fingerprint == PINNED_HARNESS.fingerprint()


@pytest.mark.parametrize(("fields", "message"), [
    ({"max_turn": [2]}, "sensitivity.fields.max_turn: not a harness field; the fields a sweep "
                        "may change are agent_timeout_s"),
    ({"max_turns": [3, 0]}, r"sensitivity.fields.max_turns\[1\]: 0 is not a valid "
                            "harness.max_turns: Input should be greater than or equal to 1"),
    ({"top_p": [0.5, 1.5]}, r"sensitivity.fields.top_p\[1\]: 1.5 is not a valid harness.top_p"),
    ({"tools": [["run_public_tests"]]}, r"sensitivity.fields.tools\[0\]: .*must include submit"),
    ({"on_budget": ["retry"]}, r"sensitivity.fields.on_budget\[0\]: 'retry' is not a valid"),
    ({"template": ["no prompt here"]}, r"sensitivity.fields.template\[0\]: .*must contain"),
    ({"max_turns": 3}, "sensitivity.fields.max_turns: expected a non-empty list"),
    ({"max_turns": []}, "sensitivity.fields.max_turns: expected a non-empty list"),
    ({}, "sensitivity.fields: expected a mapping"),
    *[({field: [1]}, f"sensitivity.fields.{field}: the sweep does not change {field}: ")
      for field in UNSWEPT],
])
def test_bad_fields_and_values_are_refused_with_their_params_path(fields, message):
    with pytest.raises(ParamsError, match=f"^params.yaml: {message}"):
        plan_settings(PINNED_HARNESS, fields, n=4)


def test_the_refused_fields_are_harness_fields_each_with_a_reason():
    assert set(UNSWEPT) <= set(Harness.model_fields)
    assert all(len(reason) > 40 for reason in UNSWEPT.values())


def test_the_sensitivity_section_is_checked_like_every_section():
    params = {"sensitivity": {"reference": SINGLE_SHOT, "fields": {"max_turns": [2]},
                              "episodes": 3}}
    with pytest.raises(ParamsError, match="params.yaml: sensitivity.episodes: not a field "
                                          "heldout reads; the fields are "):
        section(params, "sensitivity", SensitivityConfig)
    with pytest.raises(ParamsError, match="params.yaml: sensitivity.reference: Field required"):
        section({"sensitivity": {"fields": {"max_turns": [2]}}}, "sensitivity",
                SensitivityConfig)
    config = SensitivityConfig(reference=SINGLE_SHOT, fields={"max_turns": [2], "top_p": [0.5]},
                               reference_invariant_to=["temperature", "max_turns"])
    # What the reference ignores, whatever this sweep changes: only swept fields are checked.
    assert invariant_fields(config) == ["max_turns"]
    assert invariant_fields(config.model_copy(update={"reference_invariant_to": None})) == [
        "max_turns", "top_p"]
    with pytest.raises(ParamsError, match="sensitivity.reference_invariant_to: 'max_turn' is "
                                          "not a harness field"):
        invariant_fields(config.model_copy(update={"reference_invariant_to": ["max_turn"]}))


def test_the_project_params_plan_a_valid_sweep():
    params = read_params(REPO)
    config = section(params, "sensitivity", SensitivityConfig)
    settings = plan_settings(PINNED_HARNESS, config.fields, config.n)
    assert len(settings) == 1 + sum(len(values) for values in config.fields.values())
    assert set(config.checkpoints) <= set(params["checkpoints"])
    assert set(invariant_fields(config)) <= set(config.fields)


def interval(estimate: float, low: float, high: float) -> SimpleNamespace:
    return SimpleNamespace(estimate=estimate, low=low, high=high)


def test_the_reference_verdict_reads_only_the_fields_it_should_ignore():
    settings = plan_settings(PINNED_HARNESS, {"max_turns": [2], "max_tokens": [16]}, n=2)
    still = {"max_turns=2": interval(0.0, -0.1, 0.1), "max_tokens=16": interval(-0.5, -0.6, -0.4)}
    verdict = reference_verdict(settings, still, ["max_turns"])
    assert (verdict["verdict"], verdict["checked"], verdict["drifted"]) == (
        STAYED_PUT, ["max_turns=2"], [])
    moved = reference_verdict(settings, still, ["max_turns", "max_tokens"])
    assert (moved["verdict"], moved["drifted"]) == (MOVED, ["max_tokens=16"])


# --- the stage on a small project ------------------------------------------------------------


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A small project split and decontaminated once; each test gets its own copy."""
    project = copy_project(tmp_path_factory.mktemp("sweep") / "project")
    configure_small_project(project, tasks=40, n=2,
                            checkpoints={"base": {"agent": "demo", "skill": -0.5},
                                         "tester": TESTER},
                            rollouts={"in_flight": 2})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
        split.run(project)
        decontaminate.run(project)
    return project


@pytest.fixture
def swept(prepared: Path, tmp_path: Path, monkeypatch) -> Path:
    from heldout.custody.guard import sealing

    copy = tmp_path / "project"
    with sealing():  # this process guards `prepared`; copying it is not reading it
        shutil.copytree(prepared, copy)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{copy / 'own.db'}")
    return copy


def set_sensitivity(project: Path, **values) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["sensitivity"].update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def sealed_state(project: Path) -> tuple:
    info = (project / catalog.SEALED_TEST).stat()
    return info.st_ino, info.st_size, info.st_mtime_ns


def test_a_binding_budget_moves_the_tester_and_the_single_shot_reference_stays_put(
        swept: Path, capsys):
    set_sensitivity(swept, checkpoints=["tester"], reference=SINGLE_SHOT, n=3,
                    fields={"max_turns": [2, 5], "temperature": [0.0, 1.3]},
                    reference_invariant_to=["max_turns", "temperature"])
    before = sealed_state(swept)
    sweep = sensitivity.run(swept)

    names = [PINNED, "max_turns=2", "temperature=0.0", "temperature=1.3"]
    assert [s["name"] for s in sweep["settings"]] == names  # 5 is the pinned max_turns
    assert sweep["n"] == 3 and sweep["split"] == "val"
    tester = sweep["checkpoints"]["tester"]["settings"]
    assert list(tester) == names
    # Two turns are a read and a tested draft: never a submit. Its pass@1 falls beyond the
    # paired interval, and the episodes it lost ended on the budget.
    short = tester["max_turns=2"]
    assert short["excludes_zero"] and short["difference"]["high"] < 0
    assert short["pass_at_1"]["estimate"] < tester[PINNED]["pass_at_1"]["low"]
    assert short["budget_rate"] > tester[PINNED]["budget_rate"]
    assert sweep["checkpoints"]["tester"]["largest_move"]["setting"] == "max_turns=2"
    assert "max_turns=2" in sweep["checkpoints"]["tester"]["moved"]
    episodes = sweep["n_tasks"] * 3
    assert all(row["episodes"] == episodes for row in tester.values())

    # The single-shot demo ignores turns and sampling: at the same seeds, the same outcomes.
    reference = sweep["reference"]
    assert (reference["verdict"], reference["drifted"]) == (STAYED_PUT, [])
    assert reference["checked"] == names[1:] and reference["agent"] == SINGLE_SHOT
    for name in names[1:]:
        difference = reference["settings"][name]["difference"]
        assert difference["estimate"] == 0.0 and difference["low"] < 0 < difference["high"]
        assert not reference["settings"][name]["excludes_zero"]

    # The files, as documented.
    assert json.loads((swept / catalog.SENSITIVITY).read_text()) == sweep
    metrics = json.loads((swept / catalog.SENSITIVITY_METRICS).read_text())
    assert set(metrics) == {"tester", "reference"}
    assert all(isinstance(value, float) for row in metrics.values() for value in row.values())
    assert metrics["tester"]["moved.max_turns_2"] == 1.0
    assert metrics["tester"]["difference.max_turns_2"] < 0
    assert metrics["reference"]["stayed_put"] == 1.0
    assert (swept / catalog.SENSITIVITY_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "sensitivity: tester: pinned pass@1" in out and "largest move max_turns=2" in out
    assert "sensitivity: reference:" in out and "stayed put" in out

    # MLflow has the run: params, a metric per setting, the three files.
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("heldout")
    [run] = client.search_runs([experiment.experiment_id],
                               'tags."heldout.stage" = "sensitivity"')
    assert run.data.params["sensitivity.fields.max_turns"] == "[2, 5]"
    assert run.data.metrics["tester.pass_at_1.max_turns_2"] == pytest.approx(
        short["pass_at_1"]["estimate"], abs=1e-6)
    assert run.data.tags["heldout.reference_verdict"] == STAYED_PUT
    logged = {a.path for a in client.list_artifacts(run.info.run_id, "sensitivity")}
    assert logged == {f"sensitivity/{p.name}" for p in (catalog.SENSITIVITY,
                                                          catalog.SENSITIVITY_METRICS,
                                                          catalog.SENSITIVITY_PNG)}

    # Val only: the guard refused nothing (no ledger line) and the sealed split is as it was.
    assert not (swept / catalog.LEDGER).exists()
    assert sealed_state(swept) == before


def test_the_stage_never_imports_the_custody_room():
    assert not {name for name in project_imports("stages.sensitivity")
                if name.startswith("heldout.custody")}
    reached = code_of("stages.sensitivity")
    assert not {path for path in reached if path.startswith("heldout/custody/")}
    assert "stages/test.py" not in reached


def test_a_reference_that_depends_on_the_budget_is_reported_moved(swept: Path):
    """Set the way `dvc exp run -S` sets params (DVC's own override code), then run."""
    from dvc.utils.hydra import apply_overrides

    apply_overrides(swept / "params.yaml", [
        "sensitivity.checkpoints=[]", "sensitivity.n=2",
        "+sensitivity.reference.policy=tester", "sensitivity.reference.skill=0.3",
        # A mapping given whole is merged into the one in params.yaml: `~` removes a key.
        "sensitivity.fields={max_turns: [2]}", "~sensitivity.fields.temperature",
        "sensitivity.reference_invariant_to=null",
    ])
    sweep = sensitivity.run(swept)
    assert sweep["checkpoints"] == {}
    assert [s["name"] for s in sweep["settings"]] == [PINNED, "max_turns=2"]
    reference = sweep["reference"]
    assert (reference["verdict"], reference["drifted"]) == (MOVED, ["max_turns=2"])
    assert reference["invariant_to"] == ["max_turns"]
    assert reference["settings"]["max_turns=2"]["difference"]["high"] < 0
    metrics = json.loads((swept / catalog.SENSITIVITY_METRICS).read_text())
    assert metrics == {"reference": metrics["reference"]}
    assert metrics["reference"]["stayed_put"] == 0.0


def test_a_params_override_changes_the_settings_run(swept: Path):
    from dvc.utils.hydra import apply_overrides

    def planned() -> list[str]:
        params = read_params(swept)
        config = section(params, "sensitivity", SensitivityConfig)
        return [s.name for s in plan_settings(section(params, "harness", Harness),
                                              config.fields, config.n)]

    assert planned() == [PINNED, "max_turns=3", "max_turns=4", "temperature=0.0",
                         "temperature=1.3"]
    apply_overrides(swept / "params.yaml", ["sensitivity.fields.max_turns=[2,3]",
                                            "+sensitivity.fields.top_p=[0.5]"])
    assert planned() == [PINNED, "max_turns=2", "max_turns=3", "temperature=0.0",
                         "temperature=1.3", "top_p=0.5"]
    # The override reaches the stage's params in dvc.yaml, so DVC re-runs it for the change.
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["sensitivity"]
    assert {"harness", "checkpoints", "sensitivity"} <= set(stage["params"])


def test_a_checkpoint_that_is_not_one_is_refused_before_anything_runs(swept: Path):
    set_sensitivity(swept, checkpoints=["tester", "step_99"])
    with pytest.raises(ParamsError, match="params.yaml: sensitivity.checkpoints: 'step_99' is "
                                          "not a checkpoint; the checkpoints are base, tester"):
        sensitivity.run(swept)
    set_sensitivity(swept, checkpoints=["tester"], reference={"agent": "demo", "skil": 1})
    with pytest.raises(ParamsError, match="params.yaml: sensitivity.reference.skil"):
        sensitivity.run(swept)


def test_no_stage_depends_on_the_sweep():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    outputs = {str(p) for p in (catalog.SENSITIVITY, catalog.SENSITIVITY_METRICS,
                                catalog.SENSITIVITY_PNG)}
    for name, stage in stages.items():
        body = stage.get("do", stage)
        assert not outputs & {str(dep) for dep in body["deps"]}, name
        assert "sensitivity" not in body.get("params", []) or name == "sensitivity", name


# --- `dvc exp run --queue -S` itself (about a minute: excluded by default, -m slow) ----------


def queued_sweeps(project: Path, env: dict[str, str]) -> dict[str, dict]:
    """Each queued experiment's name → its metrics/sensitivity.json, from `dvc exp show`."""
    import subprocess

    shown = subprocess.run(["dvc", "exp", "show", "--json"], cwd=project, env=env,
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    found = {}
    for baseline in json.loads(shown.stdout):
        for experiment in baseline.get("experiments") or []:
            for rev in experiment["revs"]:
                metrics = (rev.get("data") or {}).get("metrics") or {}
                found[rev["name"]] = metrics.get(str(catalog.SENSITIVITY_METRICS), {}).get("data")
    return found


@pytest.mark.slow
def test_dvc_exp_run_queue_with_set_params_sweeps_what_each_experiment_says(
        project: Path, tmp_path: Path):
    import os
    import subprocess
    import sys

    configure_small_project(project, tasks=30, n=1,
                            checkpoints={"base": {"agent": "demo", "skill": -0.5},
                                         "tester": TESTER})
    set_sensitivity(project, checkpoints=["tester"], n=1, fields={"max_turns": [3]})
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "HOME": str(tmp_path), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
           "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'own.db'}"}

    def run(*cmd: str) -> None:
        done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr

    run("git", "init", "-q")
    run("git", "add", "-A")
    run("git", "commit", "-qm", "init")
    run("dvc", "exp", "run", "--queue", "sensitivity", "-n", "turns-2-3",
        "-S", "sensitivity.fields.max_turns=[2,3]")
    run("dvc", "exp", "run", "--queue", "sensitivity", "-n", "top-p",
        "-S", "+sensitivity.fields.top_p=[0.5]")
    run("dvc", "exp", "run", "--run-all", "-j", "1")

    sweeps = queued_sweeps(project, env)
    assert set(sweeps["turns-2-3"]["tester"]) >= {"pass_at_1.max_turns_2", "moved.max_turns_2",
                                                  "pass_at_1.max_turns_3"}
    assert sweeps["turns-2-3"]["tester"]["moved.max_turns_2"] == 1.0
    assert {"pass_at_1.max_turns_3", "pass_at_1.top_p_0.5"} <= set(sweeps["top-p"]["tester"])
    assert "pass_at_1.max_turns_2" not in sweeps["top-p"]["tester"]
    # The sweep asked for nothing downstream of it: no test access, here or in the queue.
    assert not (project / "data" / "test").exists() and not (project / catalog.LEDGER).exists()
