"""Tests never touch the project's own stores or the user's home, and never leave loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

REPO = Path(__file__).resolve().parent.parent

TEST_KEY_HEX = "11" * 32
# The headline's first line in report.md: the verdict word (a voiding gate named) and its numbers.
VERDICT_LINE = re.compile(r"^\*\*(Better|Worse|No difference detected|Not decidable \([^)]+\)): "
                          r".+ — \d+ tasks.* × \d+ episodes?\*\*$", re.MULTILINE)

# Set before prefect or mlflow is imported anywhere in the test session.
_STATE = Path(tempfile.mkdtemp(prefix="heldout-tests-"))
os.environ["PREFECT_HOME"] = str(_STATE / "prefect")
os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{_STATE / 'mlflow.db'}"
os.environ.pop("PREFECT_API_URL", None)  # a server a test needs, the test starts
os.environ.update(
    {
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        "DVC_NO_ANALYTICS": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        # A fixed test key, so no test reads or creates the user's own (tests that need another
        # key, or none, set or remove it themselves).
        "HELDOUT_TEST_KEY": TEST_KEY_HEX,
        "XDG_CONFIG_HOME": str(_STATE / "config"),
    }
)

# Hypothesis' 200 ms deadline per example measures the machine's load, not the code: off for
# every property test (loaded here, before the test modules build their own @settings on it).
hypothesis_settings.register_profile("heldout", deadline=None)
hypothesis_settings.load_profile("heldout")


@pytest.fixture(autouse=True)
def _environment_as_it_was(request):
    """A test that runs a command in this process (typer's CliRunner) may set what that command
    sets for its children (the quiet console settings): later tests' subprocesses must not
    inherit it. Only a test that asks for `prefect_api_url` has a Prefect API."""
    if "prefect_api_url" not in request.fixturenames:
        os.environ.pop("PREFECT_API_URL", None)
    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(autouse=True)
def _endpoint_limits_forgotten():
    """heldout.agents.endpoint_limit keeps a limit per base_url for the process, and the fake
    servers bind port 0: a later test's server on a recycled port must not inherit a cut limit
    or a closed Retry-After window."""
    yield
    module = sys.modules.get("heldout.agents.endpoint_limit")
    if module is not None:
        with module._lock:
            module._ENDPOINTS.clear()


def task_record(task_id: str, group: str | None = None, **fields: object) -> dict:
    record = {
        "id": task_id,
        "prompt": f"def f_{len(task_id)}(x):\n    '''Return x for {task_id}.'''\n",
        "entry_point": f"f_{len(task_id)}",
        "tests": "assert True\n",
        **fields,
    }
    if group is not None:
        record["group"] = group
    return record


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


PROJECT_FILES = ("params.yaml", "dvc.yaml", "pyproject.toml", ".gitignore")
PROJECT_DIRS = ("heldout", "stages", "flows", "tasks", ".dvc", "judge")


def copy_project(destination: Path) -> Path:
    """The project's files as a fresh checkout would hold them, without stores or outputs."""
    destination.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, destination / name)
    ignore = shutil.ignore_patterns("__pycache__", "cache", "tmp", "config.local")
    for name in PROJECT_DIRS:
        shutil.copytree(REPO / name, destination / name, ignore=ignore)
    return destination


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_project(tmp_path)


@pytest.fixture(scope="session")
def _prefect_server():
    """A Prefect API server on loopback for the session (the pipeline's own, flows.server).
    prefect_api gives its URL to the whole process (os.environ and Prefect's settings): both
    are put back as they were at once, so that only the tests that ask for `prefect_api_url`
    see it, whichever ran before."""
    from prefect.context import SettingsContext, get_settings_context

    from flows.server import API_URL, UI_URL, prefect_api

    outside = get_settings_context()
    environment = {name: os.environ.get(name) for name in (API_URL, UI_URL)}
    with prefect_api() as url:
        for name, value in environment.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        with SettingsContext(profile=outside.profile, settings=outside.settings):
            yield url


@pytest.fixture
def prefect_api_url(_prefect_server: str, monkeypatch):
    """The session's Prefect API, for this test: flows in this process and in the processes
    they start report to it."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL, temporary_settings

    from flows.server import API_URL, UI_URL

    # No UI URL, as prefect_api sets it: no "View at" link to a server gone after the session.
    monkeypatch.setenv(API_URL, _prefect_server)
    monkeypatch.setenv(UI_URL, "")
    with temporary_settings({PREFECT_API_URL: _prefect_server, PREFECT_UI_URL: ""}):
        yield _prefect_server


TWO_DEMOS = {"base": {"agent": "demo", "skill": -0.5}, "late": {"agent": "demo", "skill": 1.5}}


def configure_small_project(
    project: Path, *, tasks: int = 40, n: int = 2, checkpoints: dict = TWO_DEMOS,
    timeout_s: float = 0.5, **sections: dict,
) -> Path:
    """Cut the project down to the first `tasks` HumanEval tasks, n episodes per task and the
    given checkpoints (the first is the base), so a whole pipeline runs in seconds. A program's
    time limit is `timeout_s` of CPU time: the demo agents' mutants include endless loops, and
    at the default 10 s the test stage's reruns spent 30 of their 43 s waiting on three of
    them. Of the 2,880 episodes of six demo agents (skill -2 to 2.9, the tester and hacker
    policies) on the first 60 tasks, n=8, every program that ends by itself takes at most
    0.04 s of CPU but HumanEval/39's slow mutant, which fails whatever the limit: at 0.5 s
    and at 1.5 s every episode's status and pass are the same (measured 2026-12-05), and 0.5 s
    halves the custody tests' time. Keyword arguments update params sections, e.g.
    rollouts={"in_flight": 1}."""
    import yaml

    from heldout.tasks.sources import load_tasks

    write_jsonl(project / "tasks" / "small.jsonl",
                [t.to_record() for t in load_tasks("humaneval")[:tasks]])
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["tasks"]["source"] = "tasks/small.jsonl"
    params["harness"]["n"] = n
    params["harness"]["timeout_s"] = timeout_s
    params["checkpoints"] = checkpoints
    params["base"] = next(iter(checkpoints))
    # Tens of tasks are too few for the plan before the test split opens
    # (heldout.custody.spend): every candidate is named, with the reason.
    params["test"]["spend"] = {"candidates": list(checkpoints),
                               "reason": f"a {tasks}-task test project, too small to decide"}
    # Four paired runs of each arm, the fewest the drift allows: the test projects check that
    # the runs happen and pair, not the verdict's power.
    params["reruns"].update(runs=4, episodes=0)  # at the harness's n, whatever the default
    # The sweep keeps the checkpoints that are still here (none: the reference alone).
    sweep = params["sensitivity"]
    sweep["checkpoints"] = [name for name in sweep["checkpoints"] if name in checkpoints]
    for name, values in sections.items():
        params[name].update(values)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project


# --- sandboxes, on both backends (shared by the suites that run hostile programs) ----------

SANDBOX_BACKENDS = ("subprocess", "docker")
NO_ENGINE = (
    'no container engine for the docker backend: run `eval "$(scripts/container-engine.sh)"` '
    "(it starts Podman and exports DOCKER_HOST), then the tests again. "
)


@pytest.fixture(scope="session")
def subprocess_sandbox():
    from heldout.sandbox.config import make_sandbox
    from heldout.sandbox.subprocess import namespaces_available

    if not namespaces_available():
        pytest.skip("the subprocess backend isolates programs only as root with util-linux "
                    "unshare; without them it runs them unisolated, which this suite would fail")
    with make_sandbox("subprocess", workers=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def docker_sandbox():
    from heldout.errors import SandboxError
    from heldout.sandbox.config import make_sandbox

    if not os.environ.get("DOCKER_HOST"):
        pytest.skip(NO_ENGINE + "DOCKER_HOST is unset.")
    try:
        sandbox = make_sandbox("docker", workers=2)
    except SandboxError as error:
        pytest.skip(NO_ENGINE + str(error))
    yield sandbox
    sandbox.close()


def reason_line(result) -> str:
    """The last line of a judged program's stderr_tail: the judge's reason."""
    return result.stderr_tail.rstrip("\n").rpartition("\n")[2]


@pytest.fixture(params=SANDBOX_BACKENDS)
def sandbox(request):
    """Each backend in turn; after the test, the sandbox must still run a program."""
    sandbox = request.getfixturevalue(f"{request.param}_sandbox")
    yield sandbox
    after = sandbox.run("print(6 * 7)", timeout_s=1.5, memory_mb=256)
    assert (after.status, after.stdout_tail) == ("ok", "42\n"), "the sandbox must go on"


# --- a project run through `select`, for the custody suites --------------------------------


@pytest.fixture(scope="session")
def selected(tmp_path_factory) -> Path:
    """A project run through select, built once per session (eleven modules use it; each built
    it, once per module, for 20-30 s): no test changes it, each gets its own copy."""
    from stages import rollouts, score, select, split

    project = copy_project(tmp_path_factory.mktemp("selected") / "project")
    configure_small_project(project)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
        split.run(project)
        for name in ("base", "late"):
            rollouts.run(name, project)
        score.run(project)
        select.run(project)
    BUILT[project] = tree_state(project)
    return project


BUILT: dict[Path, list[tuple[str, int, int]]] = {}


def tree_state(root: Path) -> list[tuple[str, int, int]]:
    """Every file under `root`, with its size and modification time."""
    return sorted((str(path.relative_to(root)), path.stat().st_size, path.stat().st_mtime_ns)
                  for path in root.rglob("*") if path.is_file())


@pytest.fixture
def selected_copy(selected: Path, tmp_path: Path, monkeypatch) -> Path:
    from heldout.custody.guard import sealing

    # Shared by the session: a test that changed it would change every later test's start.
    assert tree_state(selected) == BUILT[selected], "a test changed the shared `selected` project"
    copy = tmp_path / "selected"
    with sealing():  # this process guards `selected`; copying it is not reading it
        shutil.copytree(selected, copy)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{copy / 'own.db'}")
    return copy


@dataclass(frozen=True)
class TeamRun:
    """A team's first `heldout pipeline`, run once for the session: a project with one ledger
    store and one MLflow store for every clone and a DVC remote, cloned into `first`, planned,
    then run. The terminal's checks and a teammate's pull read it (each on a copy of `first`
    when it changes anything): one whole pipeline for both."""

    first: Path
    env: dict[str, str]
    store: Path
    plan: subprocess.CompletedProcess
    run: subprocess.CompletedProcess
    head: str
    runs: list[str]  # the MLflow runs the first run logged


@pytest.fixture(scope="session")
def team_run(tmp_path_factory) -> TeamRun:
    import mlflow

    from tests.pipeline.test_fresh_clone import ok, user_shell

    folder = tmp_path_factory.mktemp("team")
    env = user_shell(folder)
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{folder / 'team-mlflow.db'}"
    origin = copy_project(folder / "origin")
    # As a checkout holds it: without .dvcignore, the __pycache__ a sandbox program writes
    # beside heldout/sandbox's modules (under `heldout pipeline`, the clone's own) is a dep.
    shutil.copy2(REPO / ".dvcignore", origin / ".dvcignore")
    store = folder / "team-ledger.sqlite"
    configure_small_project(origin, tasks=30, n=2, reruns={"runs": 4, "episodes": 1},
                            sensitivity={"fields": {"max_turns": [3]}},
                            custody={"ledger_url": f"sqlite:///{store}"})
    for cmd in (["git", "init", "-q"], ["dvc", "remote", "add", "-d", "team",
                                        str(folder / "remote")],
                ["git", "add", "-A"], ["git", "commit", "-qm", "init"]):
        ok(cmd, origin, env)
    first = folder / "first"
    ok(["git", "clone", "-q", str(origin), str(first)], folder, env)
    plan = ok(["heldout", "plan"], first, env)
    run = ok(["heldout", "pipeline"], first, env)
    head = ok(["git", "rev-parse", "HEAD"], first, env).stdout.strip()
    client = mlflow.MlflowClient(env["MLFLOW_TRACKING_URI"])
    runs = sorted(run.info.run_id for run in client.search_runs(
        [experiment.experiment_id for experiment in client.search_experiments()]))
    return TeamRun(first, env, store, plan, run, head, runs)
