"""What a user sees (issue 17): a bad params.yaml is one message naming the file and the field,
last, exit 2, before anything runs; a good run is one line per stage between the stages' own
lines, without Prefect's per-run chatter unless asked (-v); a no-op is answered without Prefect
or MLflow; a bare `dvc repro` stage runs without a Prefect server."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from heldout.custody.guard import sealing
from heldout.errors import ParamsError
from stages import params_check
from tests.chromium import serve_mlflow
from tests.conftest import REPO, TeamRun, configure_small_project, copy_project

PYTHON_HELDOUT = [sys.executable, "-X", "importtime", "-m", "cli.main"]
GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
STATUS = re.compile(r"^(\S+): (ran in \d+\.\d s|up to date|FAILED after \d+\.\d s.*)$")


def run_env(project: Path, **extra: str) -> dict[str, str]:
    """No Prefect API (the command starts its own), this project's MLflow store."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", "HELDOUT_VERBOSE")}
    env.update(GIT, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               MLFLOW_TRACKING_URI=f"sqlite:///{project / 'mlflow.db'}")
    env.update(extra)
    return env


def git_init(project: Path) -> None:
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        subprocess.run(cmd, cwd=project, check=True, env=run_env(project),
                       capture_output=True)


def heldout(project: Path, *args: str, timeout: float = 900,
            **extra: str) -> subprocess.CompletedProcess:
    """`heldout ARGS` as a user's terminal shows it: stdout and stderr in one stream."""
    return subprocess.run([str(Path(sys.executable).parent / "heldout"), *args], cwd=project,
                          env=run_env(project, **extra), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def terminal(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`heldout ARGS` in a user's shell (`env`, nothing of the test's), one stream."""
    return subprocess.run(["heldout", *args], cwd=project, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)


def lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def lines_matching(output: str) -> list[str]:
    """The pipeline's status lines: one per stage."""
    return [line for line in lines(output) if STATUS.match(line)]


def imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


def set_params(project: Path, change) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    change(params)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


# --- the checks themselves, in process ------------------------------------------------------


def sections() -> dict:
    from flows.params import params_sections

    return params_sections()


def default_params() -> dict:
    return params_check.read_params(REPO)


BAD = {
    "fractions": (lambda p: p["split"]["fractions"].update(train=0.5),
                  "params.yaml: split.fractions sum to 1.2, not 1"),
    "agent kind": (lambda p: p["checkpoints"]["step_10"].update(agent="gpt-5"),
                   "params.yaml: checkpoints.step_10.agent: 'gpt-5' is not an agent kind"),
    "negative n": (lambda p: p["harness"].update(n=-3),
                   "params.yaml: harness.n: Input should be greater than or equal to 1"),
    "typo": (lambda p: p["harness"].update(temprature=0.3),
             "params.yaml: harness.temprature: not a field heldout reads; did you mean "
             "'temperature'?"),
    "slash": (lambda p: p["checkpoints"].update({"run/step_90": {"agent": "demo"}}),
              "params.yaml: checkpoints.run/step_90: not a usable checkpoint name"),
    "k beyond n/2": (lambda p: p.update(score={"max_k": 8}, harness={**p["harness"], "n": 15}),
                     "params.yaml: score.max_k: pass@8 needs harness.n >= 16 (pass@k is read "
                     "at k <= n/2); harness.n is 15"),
}


def test_the_default_params_pass_and_every_section_a_stage_reads_is_checked():
    params_check.check_params(default_params(), sections())
    from stages.catalog import PARAMS_FILE
    from stages.sensitivity import REFERENCE

    assert (str(PARAMS_FILE), REFERENCE) == (params_check.PARAMS_FILE, params_check.REFERENCE)
    read = set()
    for folder in ("stages", "flows"):
        for path in (REPO / folder).glob("*.py"):
            read |= set(re.findall(r"""section\(\s*\w+,\s*["'](\w+)["']""", path.read_text()))
    assert read and read <= set(sections()), read - set(sections())


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_params_file_names_the_file_and_the_field(case: str):
    change, expected = BAD[case]
    params = copy.deepcopy(default_params())
    change(params)
    with pytest.raises(ParamsError) as raised:
        params_check.check_params(params, sections())
    assert str(raised.value).startswith(expected), str(raised.value)


def test_every_problem_at_once_and_no_agent_is_made(monkeypatch):
    import heldout.agents.openai

    monkeypatch.setattr(heldout.agents.openai, "make", lambda *a: pytest.fail("agent made"))
    params = copy.deepcopy(default_params())
    params["checkpoints"]["remote"] = {"agent": "openai", "model": "m", "base_url": "http://x"}
    params["checkpoints"]["step 90"] = {"agent": "demo", "skil": 1.0}
    params["harnes"] = {}
    params["base"] = "nope"
    params["sensitivity"]["checkpoints"] = ["reference"]
    with pytest.raises(ParamsError) as raised:
        params_check.check_params(params, sections())
    assert str(raised.value).splitlines() == [
        "params.yaml: checkpoints.step 90: not a usable checkpoint name: letters, digits, '_' "
        "and '-', starting with a letter, at most 64 (it names a DVC stage, a params path and "
        "a file)",
        "params.yaml: harnes: not a section heldout reads; did you mean 'harness'?",
        "params.yaml: checkpoints.step 90.skil: not a field heldout reads; did you mean "
        "'skill'?",
        "params.yaml: base: 'nope' is not a checkpoint; the checkpoints are base, step_10, "
        "step_20, step_30, step_40, step_50, step_60, step_70, step_80, agent_tester, "
        "agent_hacker, remote, step 90",
        "params.yaml: sensitivity.checkpoints: 'reference' names the reference's row",
    ]


def test_the_tasks_kind_is_checked_against_the_harness_before_any_stage(tmp_path: Path):
    """The rollouts stage would find it after split and decontaminate (33 s), alone."""
    params = copy.deepcopy(default_params())
    shutil.copy(REPO / "tasks/examples/python_program.jsonl", tmp_path / "programs.jsonl")
    (tmp_path / "judge").mkdir()  # a project's, which the report stage depends on
    params["tasks"]["source"] = "programs.jsonl"
    params["split"]["fractions"]["train"] = 0.5
    params["select"]["rul"] = "best"
    with pytest.raises(ParamsError) as raised:
        params_check.check_params(params, sections(), tmp_path)
    assert str(raised.value).splitlines() == [
        "params.yaml: select.rul: not a field heldout reads; did you mean 'rule'?",
        "params.yaml: split.fractions sum to 1.2, not 1 (train 0.5, val 0.35, test 0.35)",
        "params.yaml: harness.scorer_version: 'python-function/2', but these tasks are scored "
        "by python-program/1; set it to python-program/1",
    ]
    params["harness"]["scorer_version"] = "python-program/1"
    del params["select"]["rul"]
    params["split"]["fractions"]["train"] = 0.3
    params_check.check_params(params, sections(), tmp_path)


# --- a bad params.yaml, as the user meets it -------------------------------------------------


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("terminal") / "project")
    configure_small_project(project, tasks=20, n=1)
    git_init(project)
    return project


@pytest.fixture
def small(committed: Path, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(committed, project, symlinks=True)
    return project


@pytest.mark.parametrize("case", sorted(BAD))
def test_heldout_pipeline_with_a_bad_params_file_says_one_thing_last_and_runs_nothing(
    small: Path, case: str
):
    change, expected = BAD[case]
    if case == "agent kind":  # the cut-down project has base and late
        expected = expected.replace("step_10", "late")
        change = lambda p: p["checkpoints"]["late"].update(agent="gpt-5")  # noqa: E731
    set_params(small, change)
    started = time.monotonic()
    done = heldout(small, "pipeline")
    took = time.monotonic() - started
    shown = lines(done.stdout)
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stdout
    assert shown[-1].startswith(f"error: {expected}"), done.stdout
    assert len(shown) == 1, done.stdout  # nothing before it either: no stage, no server
    assert not (small / "data").exists() and not (small / "mlflow.db").exists()
    assert took < 15, f"{took:.1f} s"


def test_a_bad_checkpoint_name_hides_no_other_problem(small: Path):
    def change(params: dict) -> None:
        BAD["slash"][0](params)
        BAD["negative n"][0](params)
        BAD["typo"][0](params)

    set_params(small, change)
    done = heldout(small, "pipeline")
    assert done.returncode == 2, done.stdout
    shown = "\n".join(lines(done.stdout))
    for case in ("slash", "negative n", "typo"):
        assert BAD[case][1] in shown, shown
    assert not (small / "data").exists()


def test_a_bare_split_stage_checks_the_whole_file_first(small: Path):
    set_params(small, BAD["typo"][0])
    done = subprocess.run([*PYTHON_HELDOUT, "stage", "split"], cwd=small, env=run_env(small),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert lines(done.stderr)[-1] == f"error: {BAD['typo'][1]}", done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "prefect" not in imported(done.stderr)
    assert not (small / "data").exists()


def test_a_user_error_inside_a_stage_under_the_pipeline_is_one_message_last(
    small: Path, prefect_api_url: str
):
    """A file params.yaml names but that is not there: only the split stage finds out."""
    set_params(small, lambda p: p["tasks"].update(source="tasks/missing.jsonl"))
    done = heldout(small, "pipeline", PREFECT_API_URL=prefect_api_url)  # the server: the good run's
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stdout and "ReproductionError" not in done.stdout
    shown = lines(done.stdout)
    assert shown[-3].startswith("split: FAILED after ") and "not run: decontaminate" in shown[-3]
    assert shown[-2:] == [
        f"error: split failed: {small / 'tasks/missing.jsonl'}: no such file",
        "A task source is 'humaneval' or the path of a JSONL file, one task a line."]
    assert sum("no such file" in line for line in shown) == 1, done.stdout


def test_a_stage_that_fails_leaves_the_outputs_of_its_last_good_run(
    tmp_path: Path, team_run: TeamRun, prefect_api_url: str
):
    """A broken task file: DVC deletes the split's outputs before the stage finds out, and the
    pipeline brings back those dvc.lock names (issue 27, item 6). On a copy of the team's run,
    against the session's Prefect API (the server a run starts itself is the good run's)."""
    small = tmp_path / "copy"
    with sealing():  # this process guards the run's test split; copying it is not reading it
        shutil.copytree(team_run.first, small, symlinks=True)

    def split_files() -> dict[str, bytes]:
        return {str(path.relative_to(small)): path.read_bytes()
                for path in sorted((small / "data" / "split").rglob("*")) if path.is_file()}

    before = split_files()
    assert len(before) >= 4
    source = small / yaml.safe_load((small / "params.yaml").read_text())["tasks"]["source"]
    source.write_text(source.read_text() + "{not json\n")
    done = terminal(small, {**team_run.env, "PREFECT_API_URL": prefect_api_url},
                    "pipeline", "split")
    assert done.returncode == 2, done.stdout
    assert "split: FAILED after" in done.stdout, done.stdout
    assert "its previous outputs are back (dvc.lock's)" in done.stdout
    with sealing():
        assert split_files() == before


# --- a good run ---------------------------------------------------------------------------


def pipeline_runs(uri: str) -> list:
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("heldout")
    return client.search_runs([experiment.experiment_id], "tags.`heldout.stage` = 'pipeline'")


STAGES = ["split", "decontaminate", "rollouts@base", "rollouts@late", "score", "select",
          "sensitivity", "test", "report"]


def test_a_good_run_is_one_line_per_stage_and_a_no_op_starts_nothing(tmp_path: Path,
                                                                     team_run: TeamRun):
    """The team's first run (tests/conftest.py, shared with the teammate's pull), as the
    terminal showed it; then a copy of its clone, run again."""
    to_run = int(re.search(r"to run: ([\d,]+) episodes", team_run.plan.stdout).group(1)
                 .replace(",", ""))
    out, first, env = team_run.run.stdout, team_run.first, team_run.env
    for noise in ("Task run", "Finished in state", "Beginning flow run", "View at",
                  "git add dvc.lock", "autostage", "Running stage", "Traceback",
                  "INFO mlflow"):
        assert noise not in out, f"{noise!r} in:\n{out}"
    status = dict(m.groups() for m in map(STATUS.match, lines(out)) if m)
    assert sorted(status) == sorted(STAGES) and len(lines_matching(out)) == len(STAGES), out
    assert all(what.startswith("ran in") for what in status.values())
    assert lines(out)[-1].startswith("pipeline: 9 stages ran, 0 up to date, in ")
    # Before the first stage's line (tens of seconds on a fresh clone): what is happening.
    # The cost before the spend, as `heldout plan` counts it (issue 39 item 3).
    assert lines(out)[0].startswith(f"pipeline: 9 stages, DVC runs what is stale from split on, "
                                    f"about {to_run:,} episodes ("), out
    assert "; starting a Prefect server of its own" in lines(out)[0]
    ran = sum(len(pd.read_parquet(path)) for path in (first / "data/rollouts/val").glob(
        "*.parquet")) + len(pd.read_parquet(first / "data/test/timings.parquet"))
    assert ran < to_run  # the canaries and the sweep's episodes are the rest
    assert f"report: {first / 'reports' / 'report.html'} (and report.md, report.json)" in out
    uri = env["MLFLOW_TRACKING_URI"]
    assert len([run for run in pipeline_runs(uri) if run.info.run_id in team_run.runs]) == 1

    small = tmp_path / "copy"
    with sealing():  # this process guards the run's test split; copying it is not reading it
        shutil.copytree(first, small, symlinks=True)
    before = len(pipeline_runs(uri))
    # Nothing stale: DVC says so, and nothing else starts (no Prefect, no MLflow run).
    started = time.monotonic()
    noop = subprocess.run([*PYTHON_HELDOUT, "pipeline"], cwd=small, env=env,
                          capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    assert noop.returncode == 0, noop.stderr[-3000:]
    assert noop.stdout == "pipeline: nothing to do, 9 stages up to date\n"
    assert "to run: nothing: every stage is up to date with dvc.lock" in terminal(
        small, env, "plan").stdout
    assert not {"prefect", "mlflow"} & imported(noop.stderr)
    assert len(pipeline_runs(uri)) == before
    assert took < 15, f"{took:.1f} s"

    # -v: Prefect's lines are back (only the report is stale: its code changed; a deleted output
    # would not do, DVC restores a cached one without running the stage).
    code = small / "stages" / "report.py"
    code.write_text(code.read_text() + "\n# edited\n")
    loud = terminal(small, env, "-v", "pipeline")
    assert loud.returncode == 0, loud.stdout
    assert "Beginning flow run" in loud.stdout and "Finished in state Completed" in loud.stdout
    assert "Task run 'report'" in loud.stdout and "Running stage 'report'" in loud.stdout
    assert "View at" not in loud.stdout  # the run's own server is gone when it ends
    status = dict(m.groups() for m in map(STATUS.match, lines(loud.stdout)) if m)
    assert len(lines_matching(loud.stdout)) == len(STAGES), loud.stdout
    assert status.pop("report").startswith("ran in")
    assert status == {stage: "up to date" for stage in STAGES if stage != "report"}
    assert len(pipeline_runs(uri)) == before + 1

    # The plan prices what is stale at its last run's pace, from MLflow (issue 39 item 2).
    code.write_text(code.read_text() + "# again\n")
    again = terminal(small, env, "plan")
    assert again.returncode == 0, again.stdout
    rows = {line.split()[0]: line for line in again.stdout.splitlines() if line.startswith("  ")}
    assert re.search(r" \d+ s \(its last run\)$", rows["report"]), again.stdout
    assert rows["split"].endswith("up to date") and rows["test"].endswith("up to date")
    assert re.search(r"^to run: 0 episodes in 1 stale stage\(s\) and those downstream; "
                     r"expected \d+ s$", again.stdout, re.MULTILINE), again.stdout


def test_a_bare_stage_runs_without_prefect_and_still_logs_to_mlflow(small: Path):
    done = subprocess.run([*PYTHON_HELDOUT, "stage", "split"], cwd=small, env=run_env(small),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    modules = imported(done.stderr)
    assert "prefect" not in modules and "mlflow" in modules
    client = mlflow.MlflowClient(f"sqlite:///{small / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("heldout")
    assert len(client.search_runs([experiment.experiment_id],
                                  "tags.`heldout.stage` = 'split'")) == 1


def test_runs_on_a_tracking_server_print_no_view_run_links(small: Path):
    """Against a real `mlflow server`, MLflow writes a "View run" and a "View experiment" link
    to stdout as every run ends; a stage's terminal shows neither (and -v shows them)."""
    store = f"sqlite:///{small / 'served.db'}"
    mlflow.MlflowClient(store).create_experiment(
        "heldout", artifact_location=(small / "mlartifacts").as_uri())
    with serve_mlflow(store) as url:
        quiet = heldout(small, "stage", "split", timeout=300, MLFLOW_TRACKING_URI=url)
        loud = heldout(small, "-v", "stage", "split", timeout=300, MLFLOW_TRACKING_URI=url)
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stdout[-3000:]
    assert "View run" not in quiet.stdout and "View experiment" not in quiet.stdout
    assert "View run" in loud.stdout
    client = mlflow.MlflowClient(store)
    experiment = client.get_experiment_by_name("heldout")
    assert len(client.search_runs([experiment.experiment_id],
                                  "tags.`heldout.stage` = 'split'")) == 2
