"""Sweeps a person can read (issue 39 item 5): `heldout sweeps` (a row per experiment, at most
200 characters), the report a sweep prints where it can still be read, and a sweep's report
that names its own experiment. The table from plain records; DVC's own experiments from a
one-stage project (tests/tiny_dvc.py), seconds a sweep; the whole pipeline in the slow tier."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from cli.sweeps import Experiment, read_experiments, sweeps_table
from stages import report as report_stage
from tests.conftest import REPO, configure_small_project, copy_project
from tests.tiny_dvc import dvc_environment, run, tiny_project

WHEN = datetime(2026, 5, 1, 9, 30)
BASE = {"harness.n": 2, "harness.template": "t", "checkpoints.base.skill": 0.2,
        "checkpoints.step_10.skill": 0.6, "test.experiment": ""}
VAL = {"base": {"pass@1": 0.2, "pass@1_lo": 0.1, "pass@1_hi": 0.3},
       "step_10": {"pass@1": 0.6, "pass@1_lo": 0.5, "pass@1_hi": 0.7}}
ACCESS = {"verdict": "better", "diff": 0.05, "diff_lo": 0.01, "diff_hi": 0.094}


def experiment(name: str, kind: str = "experiment", **changes) -> Experiment:
    params = {**BASE, **changes.pop("params", {})}
    return Experiment(name, kind, params=params, **{"created": WHEN, "val": VAL, **changes})


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_a_row_per_experiment_with_only_the_params_it_changed():
    rows = [experiment("workspace", "workspace", created=None, test=ACCESS),
            experiment("main (abc1234)", "baseline", test=ACCESS),
            experiment("sweep-n3", params={"harness.n": 3},
                       test={"verdict": "none: a sweep (sweep-n3)"}),
            experiment("skill", params={"checkpoints.step_10.skill": 0.9},
                       val={**VAL, "step_10": {"pass@1": 0.9, "pass@1_lo": 0.8,
                                               "pass@1_hi": 0.95}}),
            experiment("old (0123456)", "baseline", params={"harness.n": 4}, val={}, test=None)]
    lines = sweeps_table(rows)
    assert cells(lines[0]) == ["experiment", "created", "best on val", "val pass@1 [95%]",
                               "test verdict", "params that differ"]
    assert cells(lines[1]) == ["workspace", "-", "step_10", "60.0% [50.0, 70.0]",
                               "better: +5.0 points [+1.0, +9.4]"]
    assert cells(lines[2]) == ["main (abc1234)", "2026-05-01 09:30", "step_10",
                               "60.0% [50.0, 70.0]", "better: +5.0 points [+1.0, +9.4]"]
    assert cells(lines[3]) == ["sweep-n3", "2026-05-01 09:30", "step_10", "60.0% [50.0, 70.0]",
                               "none: a sweep (sweep-n3)", "harness.n=3"]
    assert lines[3].startswith("  sweep-n3")  # an experiment sits under its commit
    assert cells(lines[4])[-1] == "checkpoints.step_10.skill=0.9"
    assert cells(lines[4])[2:4] == ["step_10", "90.0% [80.0, 95.0]"]
    assert cells(lines[5]) == ["old (0123456)", "2026-05-01 09:30", "-", "-", "-",
                               "harness.n=4"]
    assert lines[6].startswith("5 rows; params: the 2 of 5 that differ among them")
    assert lines[7] == "main (abc1234): checkpoints.step_10.skill=0.6 harness.n=2"


def test_an_experiment_is_read_against_its_own_commit():
    """`-S` changed it from the commit it was made from, not from the newest commit."""
    rows = [experiment("main (abc1234)", "baseline"),
            experiment("old (0123456)", "baseline", params={"harness.n": 4}),
            experiment("from-old", params={"harness.n": 4, "harness.template": "u"}),
            experiment("dropped", params={"harness.n": 4})]
    del rows[3].params["checkpoints.base.skill"]
    lines = sweeps_table(rows)
    assert cells(lines[2])[-1] == "harness.n=4"
    assert cells(lines[3])[-1] == "harness.template=u"
    assert cells(lines[4])[-1] == "~checkpoints.base.skill"


def test_the_table_keeps_to_its_width_and_cuts_cells_with_an_ellipsis():
    long = {f"sensitivity.fields.field_{i}": list(range(i, i + 8)) for i in range(30)}
    rows = [experiment("main (abc1234)", "baseline"),
            experiment("a-sweep-with-a-rather-long-name-" * 3, params=long,
                       test={"verdict": "none: a sweep (" + "x" * 150 + ")"},
                       val={f"checkpoint_{i:03}": {"pass@1": 0.5} for i in range(40)})]
    for width in (200, 120, 60):
        lines = sweeps_table(rows, width)
        assert max(map(len, lines)) <= width, width
        assert "…" in lines[2]
        assert lines[2].startswith("  a-swe")
    wide = sweeps_table(rows, 10_000)
    assert "…" not in wide[2] and len(wide[2]) > 1_000


def test_a_tie_on_val_names_every_checkpoint_and_a_broken_row_says_why():
    tied = {"a": {"pass@1": 0.5}, "b": {"pass@1": 0.5}, "c": {"pass@1": 0.4}}
    rows = [experiment("main (abc1234)", "baseline", val=tied),
            Experiment("queued-one", "experiment", state="queued"),
            Experiment("broken", "experiment", error="metrics/test.json: not JSON")]
    lines = sweeps_table(rows)
    assert cells(lines[1])[2:4] == ["a, b", "50.0%"]
    assert cells(lines[2]) == ["queued-one (queued)", "-", "-", "-", "-"]
    assert cells(lines[3]) == ["broken", "-", "-", "-", "! metrics/test.json: not JSON"]


# --- DVC's own experiments, read through its Python API ---------------------------------

SWEEP_STAGE = '''
import json, os
from pathlib import Path

import yaml

params = yaml.safe_load(Path("params.yaml").read_text())
experiment = os.environ.get("DVC_EXP_NAME")
Path("metrics/val").mkdir(parents=True, exist_ok=True)
for name, settings in params["checkpoints"].items():
    skill = settings["skill"]
    Path(f"metrics/val/{name}.json").write_text(json.dumps(
        {"pass@1": skill, "pass@1_lo": skill - 0.1, "pass@1_hi": skill + 0.05, "all_fail": 1,
         "any_fail": 2, "budget": 0.0, "error": 0.0, "truncated": 0.0}))
test = ({"verdict": f"none: a sweep ({experiment})"} if experiment else
        {"verdict": "better", "diff": 0.05, "diff_lo": 0.01, "diff_hi": 0.09, "p": 0.01})
Path("metrics/test.json").write_text(json.dumps(test))
'''
SWEEP_PARAMS = {"harness": {"n": 2, "seed": 7, "temperature": 0.8},
                "checkpoints": {"base": {"skill": 0.2}, "step_10": {"skill": 0.6}},
                "tracing": {"per_task": 1}}


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Two sweeps: one in DVC's temporary copy, one in the workspace."""
    folder = tmp_path_factory.mktemp("swept")
    environment = dvc_environment(folder / "home")
    project = tiny_project(folder / "project", environment, SWEEP_STAGE, SWEEP_PARAMS, [],
                           metrics=["metrics/val", "metrics/test.json"])
    run(["dvc", "exp", "run", "--temp", "-n", "sweep-n3", "-S", "harness.n=3"], project,
        environment)
    run(["dvc", "exp", "run", "-n", "better-step", "-S", "checkpoints.step_10.skill=0.9",
         "-S", "harness.temperature=" + "1" * 300], project, environment)
    return project, environment


def test_heldout_sweeps_reads_dvcs_experiments(swept):
    project, environment = swept
    done = run([sys.executable, "-m", "cli.main", "sweeps"], project, environment)
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 200
    rows = {cells(line)[0]: cells(line) for line in lines[1:5]}
    assert set(rows) == {"workspace", "better-step", "sweep-n3"} | {
        name for name in rows if name.startswith("master (")}
    assert rows["sweep-n3"][2:] == ["step_10", "60.0% [50.0, 65.0]",
                                    "none: a sweep (sweep-n3)", "harness.n=3"]
    assert rows["better-step"][2:5] == ["step_10", "90.0% [80.0, 95.0]",
                                        "none: a sweep (better-step)"]
    assert rows["better-step"][5].startswith("checkpoints.step_10.skill=0.9 harness.temperatur")
    assert rows["better-step"][5].endswith("…")  # 300 digits: cut, not wrapped
    master = next(row for name, row in rows.items() if name.startswith("master ("))
    assert master[4:] == ["better: +5.0 points [+1.0, +9.0]"]  # the commit changed nothing
    narrow = run([sys.executable, "-m", "cli.main", "sweeps", "--width", "90"], project,
                 environment).stdout.splitlines()
    assert max(map(len, narrow)) <= 90 and len(narrow) == len(lines)


def test_heldout_sweeps_reads_what_dvc_exp_show_reads(swept):
    from cli import sweeps
    from stages import catalog

    catalogued = (f"{catalog.VAL_METRICS}/", str(catalog.TEST_METRICS))
    assert catalogued == (sweeps.VAL_METRICS, sweeps.TEST_METRICS)
    project, environment = swept
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project, environment).stdout)
    from_dvc = {row["name"] for baseline in shown for found in baseline.get("experiments") or []
                for row in found["revs"]}
    ours = read_experiments(project)
    assert {row.name for row in ours if row.kind == "experiment"} == from_dvc == {
        "sweep-n3", "better-step"}
    (workspace,) = [row for row in ours if row.kind == "workspace"]
    assert workspace.params["checkpoints.step_10.skill"] == 0.9  # DVC left it in the workspace


def test_heldout_sweeps_outside_git_is_one_line_and_exit_2(tmp_path: Path):
    project = copy_project(tmp_path / "project")
    environment = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's cli/, not another
    done = subprocess.run([sys.executable, "-m", "cli.main", "sweeps"], cwd=project,
                          env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"error: DVC cannot list the experiments of {project}: {project} is not a git "
        "repository"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    done = subprocess.run([sys.executable, "-m", "cli.main", "sweeps"], cwd=project,
                          env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {project}: no commit yet; DVC keeps experiments "
                                        "against a commit (git add -A && git commit)"]


# --- the report a sweep prints ------------------------------------------------------------

SELECTION = {"chosen": "late", "rule": "best", "metric": "pass@1", "note": "",
             "table": [{"checkpoint": "base", "value": 0.3, "low": 0.2, "high": 0.4},
                       {"checkpoint": "late", "value": 0.6, "low": 0.5, "high": 0.7}]}


def selected_at(root: Path) -> Path:
    project = copy_project(root)
    (project / "data").mkdir()
    (project / "data" / "selection.json").write_text(json.dumps(SELECTION))
    return project


def test_a_sweep_in_a_temporary_copy_prints_how_to_see_its_report(tmp_path, monkeypatch,
                                                                   capsys):
    """`dvc exp run --temp` (and a queued run) runs in .dvc/tmp/exps/..., which DVC deletes
    when the experiment ends: the path inside it would be gone before anyone read it."""
    monkeypatch.setenv("DVC_EXP_NAME", "sweep-n3")
    copy = selected_at(tmp_path / "project" / ".dvc" / "tmp" / "exps" / "standalone" / "tmpx")
    assert report_stage.run(copy) == {"verdict": "none: a sweep (sweep-n3)"}
    (line,) = capsys.readouterr().out.splitlines()
    assert str(copy) not in line
    assert line == ("report: experiment sweep-n3 chose late on val; no test verdict in a sweep; "
                    "the report is saved with experiment sweep-n3, not in this temporary copy: "
                    "`dvc exp apply sweep-n3` puts it in the workspace at reports/report.html; "
                    "`heldout sweeps` lists the experiments")
    # In the workspace the path is the report's, and it is there.
    project = selected_at(tmp_path / "workspace")
    report_stage.run(project)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.endswith(f"; {project / 'reports' / 'report.html'} (and report.md)")
    assert (project / "reports" / "report.html").is_file()
    # A named experiment's access report, in a copy: the same advice.
    assert report_stage.where_to_read(copy, "acc2").startswith(
        "the report is saved with experiment acc2, not in this temporary copy: "
        "`dvc exp apply acc2`")


# --- a sweep's report names the experiment DVC saved ---------------------------------------

NAMING_STAGE = '''
import json, os
from pathlib import Path

Path("named.json").write_text(json.dumps({"experiment": os.environ.get("DVC_EXP_NAME", "")}))
'''


@pytest.mark.parametrize("persist", [True, False])
def test_a_persisted_output_keeps_a_stage_out_of_dvcs_run_cache(tmp_path: Path, persist: bool):
    """The report names its experiment (DVC_EXP_NAME), which DVC does not hash: a second
    experiment with the same inputs got the first one's report from DVC's run cache, unless the
    stage has a persisted output, as the report stage has (dvc.yaml)."""
    report = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["report"]
    assert [entry for entry in report["metrics"] if isinstance(entry, dict)] == [
        {"metrics/test.json": {"persist": True}}]
    environment = dvc_environment(tmp_path / "home")
    project = tiny_project(tmp_path / "project", environment, NAMING_STAGE, {"x": 1}, [],
                           metrics=[{"named.json": {"persist": persist}}])
    run(["dvc", "exp", "run", "--temp", "-n", "first", "-S", "x=3"], project, environment)
    second = run(["dvc", "exp", "run", "-n", "second", "-S", "x=3"], project, environment)
    named = json.loads((project / "named.json").read_text())["experiment"]
    if persist:
        assert named == "second", second.stdout
    else:  # DVC's run cache, as it restored t3's report into w3
        assert named == "first" and "is cached - skipping run" in second.stdout


# --- all of it through the real pipeline (the slow tier; the tests above keep each guarantee
# on a one-stage project in seconds) ---------------------------------------------------------

# docs/running.md's `dvc exp show` line: dependency hashes, every val key but pass@1, the
# sensitivity sweep's keys and the test numbers but the verdict and its difference dropped.
DVC_SHOW_DROP = ("(data|heldout|stages|tasks)(/|$)|metrics/val/.*:(?!pass@1$)|[^.:]+\\.(difference"
                 "|moved|pass_at_1|largest_move|settings_moved|stayed_put)|(base|candidate)@1|"
                 "diff_|flagged|groups|improved|regressed|p$|test_tasks")


@pytest.mark.slow
def test_sweeps_through_dvc_exp_run(project: Path, tmp_path: Path):
    environment = dvc_environment(tmp_path / "home")
    configure_small_project(project, tasks=30)
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "a"],
                    ["dvc", "repro"], ["git", "add", "-A"], ["git", "commit", "-qm", "b"]):
        run(command, project, environment)
    ledger = (project / "ledger/test_access.jsonl").read_text()

    # --temp: the copy the report was written in is gone; the line says how to get it back.
    temporary = run(["dvc", "exp", "run", "--temp", "-n", "t3", "-S", "harness.n=3"], project,
                    environment)
    (said,) = [line for line in temporary.stdout.splitlines() if line.startswith("report:")]
    assert ".dvc/tmp/exps" not in said and "`dvc exp apply t3`" in said
    # The same inputs in the workspace: its own report, not t3's from DVC's run cache.
    run(["dvc", "exp", "run", "-n", "w3", "-S", "harness.n=3"], project, environment)
    assert json.loads((project / "metrics/test.json").read_text()) == {
        "verdict": "none: a sweep (w3)"}
    assert (project / "reports/report.md").read_text().startswith("# Experiment w3:")
    assert run(["git", "status", "--porcelain"], project, environment).stdout.split() == [
        "M", "dvc.lock", "M", "params.yaml"]

    # An experiment named to open the test split, in the workspace: the ledger it wrote stays
    # staged through DVC's reset of the index.
    run(["git", "checkout", "params.yaml", "dvc.lock"], project, environment)
    run(["dvc", "checkout"], project, environment)
    chosen = json.loads((project / "data/selection.json").read_text())["chosen"]
    access = run(["dvc", "exp", "run", "-n", "acc2", "-S", "test.experiment=acc2",
                  "-S", f"test.reaccess.access={chosen}", "-S", "test.reaccess.reason=again",
                  "-S", "checkpoints.base.skill=-0.4"], project, environment)
    assert "is staged again once it has" in access.stdout
    status = run(["git", "status", "--porcelain"], project, environment).stdout.splitlines()
    assert "M  ledger/test_access.jsonl" in status, status
    assert (project / "ledger/test_access.jsonl").read_text().startswith(ledger)

    table = run(["heldout", "sweeps"], project, environment).stdout.splitlines()
    assert max(map(len, table)) <= 200
    rows = {cells(line)[0]: cells(line) for line in table[1:6]}
    assert {"t3", "w3", "acc2", "workspace"} <= set(rows)
    assert rows["w3"][4:] == ["none: a sweep (w3)", "harness.n=3"]
    assert rows["acc2"][4] != "-" and not rows["acc2"][4].startswith("none")  # an access's
    shown = run(["dvc", "exp", "show", "--md", "--only-changed", "--drop", DVC_SHOW_DROP],
                project, environment).stdout.splitlines()
    header = [cell.strip() for cell in shown[0].strip("|").split("|")]
    assert header[:2] == ["Experiment", "Created"] and "verdict" in header
    assert not [cell for cell in header if cell.startswith(("data/", "heldout/", "stages/"))]
    assert max(map(len, shown)) < 400, header
    # The crash the issue met (a column named `tasks` twice) is gone with the name.
    run(["dvc", "exp", "show", "--md", "--drop", ".*", "--keep", "Experiment|.*:pass@1$"],
        project, environment)
