"""Regenerate the SWE-bench harness fixtures in this folder, offline, from scratch.

Run with the Python that has swebench 5.0.2 installed:

    python tests/data/sources/swebench/make_fixtures.py   (in a venv with swebench==5.0.2)

What it does (NOTES.md beside this file says what comes out):

1. Makes a git clone `heldout__<name>` of each embedded repository's `base/` under
   `tasks/repositories/` (one commit, fixed author/dates, so `base_commit` is the
   same hash every time), in a scratch folder `_work/` that is deleted at the end.
2. Builds one SWE-bench instance per repository (`heldout__<name>-1`, repo `heldout/<name>`),
   with a SWE-bench style `eval_script` (test patch applied through a heredoc, pytest run
   between the harness's start/end test-output markers) and `log_parser: parse_log_pytest`.
3. Derives FAIL_TO_PASS / PASS_TO_PASS as SWE-bench's validation does: the harness's own
   `run_instances` runs every instance once without any patch (`skip_patch=True`, the test
   patch only) and once with the reference patch ("gold"); swebench's `get_logs_eval` parses both
   `test_output.txt` files, and FAIL_TO_PASS = failing/absent before and passing after,
   PASS_TO_PASS = passing both times (swebench's `test_passed` / `test_failed`).
4. Writes predictions for two models (`base`, `candidate`) and a partial candidate run, and
   evaluates each with swebench's own `swebench.harness.run_evaluation.main` (the function
   behind `swebench eval`), which writes every `logs/run_evaluation/<run_id>/<model>/<id>/`
   folder (patch.diff, eval.sh, run_instance.log, test_output.txt, report.json) and the run
   summary `<model>.<run_id>.json` through `make_run_report`.
5. Trims to under 200 KB (unless `--full`): instances.jsonl loses `eval_script`, and the logs
   keep every report.json and run.json plus the few files listed in KEEP; then re-runs
   `make_run_report` over the trimmed tree and checks it gives the same summaries.
   `--clones DIR` also leaves the git clones as DIR/heldout__<name>.

The only thing that is not swebench's is the Docker layer: there is no Docker daemon here,
so `_docker_client` returns `LocalDockerClient` below, whose "containers" are folders
(`/testbed` is `_work/container/testbed`, a fresh clone at the base commit) and whose `exec`
runs the same commands with local processes (the test Python is heldout's .venv's). The
harness's `cleanup_container` shells out to the docker CLI, so it is replaced by one that
stops/removes the local container and logs the same lines. Log timestamps are pinned to
2025-01-01T00:00:00Z (a logging record factory, and `run.json`'s `created_at`) so that
reruns differ only in pytest's "in 0.03s" and the harness's "Test runtime" lines.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import docker
from docker.models.containers import ExecResult

import swebench
import swebench.harness.run_evaluation as run_evaluation
from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    LOG_INSTANCE,
    LOG_REPORT,
    LOG_TEST_OUTPUT,
    RUN_EVALUATION_LOG_DIR,
    START_TEST_OUTPUT,
)
from swebench.harness.grading import get_eval_report, get_logs_eval, test_failed, test_passed
from swebench.harness.utils import make_test_spec
from swebench.task.checks import expected_image

HERE = Path(__file__).resolve().parent
ROOT = Path(__file__).resolve().parents[4]  # the heldout checkout
REPOS = ROOT / "tasks" / "repositories"
TEST_BIN = str(ROOT / ".venv" / "bin")  # the Python (with pytest) the "container" runs
WORK = HERE / "_work"
OWNER = "heldout"
RUN_ID = "heldout-fx"
PARTIAL_RUN_ID = "heldout-fx-partial"
TIMEOUT = 20  # the harness's per-instance test timeout (-t), seconds
EPOCH = 1735689600  # 2025-01-01T00:00:00Z
GIT_DATE = "2025-01-01T00:00:00+00:00"
IMAGE_NAMESPACE = "heldout-fx"  # image names follow swebench's convention; none is ever pulled
HEREDOC_DELIMITER = "EOF_114329324912"  # the delimiter SWE-bench's eval scripts use
TEST_COMMAND = "python -m pytest --no-header -rA --tb=no -p no:cacheprovider tests"
# the one instance whose container is created through the real docker CLI against a socket
# with no daemon behind it: a genuine "container_unavailable" infrastructure failure
NO_DAEMON = {("candidate", "topo-sort")}

GIT = ["git", "-c", "user.name=heldout", "-c", "user.email=heldout@localhost",
       "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"]
GIT_ENV = {"GIT_AUTHOR_DATE": GIT_DATE, "GIT_COMMITTER_DATE": GIT_DATE,
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "TZ": "UTC"}


# ----------------------------------------------------------------------------- the patches
# Each model's patch per repository: "gold" (the reference fix.patch), "" (an empty patch) or
# a named wrong patch from WRONG. Every repository is in both models.
PLAN = {
    #  repository          base             candidate
    "calc-tokenizer":   ("gold",          "gold"),
    "date-range":       ("date_half",     "gold"),
    "ini-continuation": ("",              "gold"),
    "interval-merge":   ("gold",          "gold"),
    "lru-cache":        ("lru_get_only",  "gold"),
    "matrix-multiply":  ("gold",          "matrix_half"),
    "money-split":      ("money_stale",   "gold"),
    "retry-backoff":    ("retry_sleeps",  "gold"),
    "roman-numerals":   ("gold",          "roman_docs_only"),
    "semver-compare":   ("semver_import", "gold"),
    "text-wrap":        ("gold",          "wrap_breaks_justify"),
    "topo-sort":        ("topo_import",   "gold"),
}
# the mismatched run: the candidate again, over 8 of the 12 instances only
PARTIAL_DROPS = ("date-range", "money-split", "text-wrap", "topo-sort")

# name -> (repository, [patch to apply first or None], [(path, old, new), ...], stale_edits)
# `old=None` appends `new`. A "stale" patch is diffed between two edited versions, so it is
# written against a file the repository does not have and cannot apply.
WRONG = {
    "date_half": ("date-range", None, [
        ("dateiter/ranges.py",
         '    if step < 1:\n        raise ValueError("step must be a positive number of days")\n',
         '    if step == 0:\n        raise ValueError("step must not be zero")\n')], None),
    "lru_get_only": ("lru-cache", None, [
        ("lrucache/cache.py",
         "        if key in self._data:\n            self.stats.record_hit()\n",
         "        if key in self._data:\n            self._data.move_to_end(key)\n"
         "            self.stats.record_hit()\n")], None),
    "matrix_half": ("matrix-multiply", None, [
        ("minimatrix/ops.py", "    if left_rows != right_cols:\n",
         "    if left_cols != right_rows:\n")], None),
    "money_stale": ("money-split", None, [
        ("money/split.py",
         "    share = int(money.cents / parts)\n"
         "    return [Money.from_cents(share, money.currency) for _ in range(parts)]\n",
         "    share, remainder = divmod(money.cents, parts)\n    return [\n"
         "        Money.from_cents(share + (index < remainder), money.currency)\n"
         "        for index in range(parts)\n    ]\n")],
        [("money/split.py", "    share = money.cents // parts\n",
          "    share = int(money.cents / parts)\n")]),
    "retry_sleeps": ("retry-backoff", None, [
        ("retrykit/scheduler.py", '"""The retry loop."""\n', '"""The retry loop."""\n\nimport time\n'),
        ("retrykit/scheduler.py", "            if attempt > policy.max_attempts:\n",
         "            if attempt >= policy.max_attempts:\n"),
        ("retrykit/scheduler.py", "            clock.sleep(pause)\n",
         "            time.sleep(max(pause, 5.0))  # never hammer the service\n"
         "            clock.sleep(pause)\n")], None),
    "roman_docs_only": ("roman-numerals", None, [
        ("README.md", None,
         "\nOnly canonical numerals are accepted: `IIII`, `VV` and `IC` are rejected.\n")], None),
    "semver_import": ("semver-compare", None, [
        ("src/semver_lite/compare.py", "from semver_lite.version import parse\n",
         "from semver_lite.natural import natural_key\nfrom semver_lite.version import parse\n"),
        ("src/semver_lite/compare.py", "            return _sign(a, b)\n",
         "            return _sign(natural_key(a), natural_key(b))\n")], None),
    "wrap_breaks_justify": ("text-wrap", "fix.patch", [
        ("wraptext/justify.py", "(1 if index < extra else 0)",
         "(1 if index >= gaps - extra else 0)")], None),
    "topo_import": ("topo-sort", None, [
        ("depgraph/topo.py", "import heapq\n", "import heapq\n\nfrom depgraph.errors import CycleError\n"),
        ("depgraph/topo.py",
         "                heapq.heappush(ready, successor)\n    return order\n",
         "                heapq.heappush(ready, successor)\n    if len(order) < len(degrees):\n"
         "        raise CycleError(sorted(n for n, d in degrees.items() if d > 0))\n"
         "    return order\n")], None),
}

# What each (model, repository) must come out as in its run summary; checked at the end.
EXPECTED = {
    "base": {"resolved": {"calc-tokenizer", "interval-merge", "matrix-multiply",
                          "roman-numerals", "text-wrap"},
             "unresolved": {"date-range", "lru-cache", "semver-compare", "topo-sort"},
             "error": {"money-split", "retry-backoff"}, "empty": {"ini-continuation"},
             "infra": set(), "ambiguous": {"retry-backoff", "semver-compare", "topo-sort"}},
    "candidate": {"resolved": {"calc-tokenizer", "date-range", "ini-continuation",
                               "interval-merge", "lru-cache", "money-split", "retry-backoff",
                               "semver-compare"},
                  "unresolved": {"matrix-multiply", "roman-numerals", "text-wrap"},
                  "error": {"topo-sort"}, "empty": set(), "infra": {"topo-sort"},
                  "ambiguous": set()},
}


# ----------------------------------------------------------------------------- helpers
def git(cwd: Path, *args: str, check: bool = True) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=check, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def instance_id(name: str) -> str:
    return f"{OWNER}__{name}-1"


def test_files(test_patch: str) -> list[str]:
    return sorted(set(re.findall(r"^diff --git a/(\S+) b/", test_patch, flags=re.M)))


def version_of(base: Path) -> str:
    for conf in ("pyproject.toml", "setup.cfg"):
        path = base / conf
        if path.is_file():
            found = re.search(r'^version\s*=\s*"?(\d+)\.(\d+)', path.read_text(), flags=re.M)
            if found:
                return f"{found[1]}.{found[2]}"
    return "0.1"


def make_clone(name: str) -> tuple[Path, str]:
    """A one-commit git clone of base/ at _work/clones/heldout__<name>; its commit."""
    clone = WORK / "clones" / f"{OWNER}__{name}"
    shutil.copytree(REPOS / name / "base", clone,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))
    git(clone, "init", "-q", "--template=")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"{name}: base")
    return clone, git(clone, "rev-parse", "HEAD").strip()


def eval_script(base_commit: str, test_patch: str) -> str:
    """SWE-bench's eval script shape (make_eval_script_list), without conda: reset the test
    files, apply the test patch from a heredoc, run the tests between the markers, reset."""
    files = " ".join(test_files(test_patch))
    lines = [
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        "git status",
        f"git -c core.fileMode=false diff {base_commit}",
        f"git checkout {base_commit} {files}",
        f"git apply -v - <<'{HEREDOC_DELIMITER}'\n{test_patch}\n{HEREDOC_DELIMITER}",
        f": '{START_TEST_OUTPUT}'",
        TEST_COMMAND,
        f": '{END_TEST_OUTPUT}'",
        f"git checkout {base_commit} {files}",
    ]
    return "\n".join(lines) + "\n"


def wrong_patch(name: str, clones: dict[str, Path]) -> str:
    repo, first, edits, stale = WRONG[name]
    tree = WORK / "patchgen" / name
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", str(clones[repo]), str(tree)], check=True,
                   capture_output=True, env={**os.environ, **GIT_ENV})

    def edit(changes):
        for path, old, new in changes:
            file = tree / path
            text = file.read_text()
            if old is None:
                text += new
            else:
                assert text.count(old) == 1, (name, path, old)
                text = text.replace(old, new)
            file.write_text(text)

    if first:
        git(tree, "apply", str(REPOS / repo / first))
    if stale:  # the version the patch was written against, staged, then the patch's edit
        edit(stale)
        git(tree, "add", "-A")
    edit(edits)
    patch = git(tree, "diff", "--no-color", "--no-ext-diff", "--no-renames")
    assert patch.strip(), name
    shutil.rmtree(tree)
    return patch


# ----------------------------------------------------------------------------- docker shim
class LocalImage:
    def __init__(self, tag: str):
        self.tags = [tag]
        self.id = "sha256:" + hashlib.sha256(tag.encode()).hexdigest()


class LocalImages:
    def __init__(self, registry: dict[str, tuple[Path, str]]):
        self.registry = registry  # image name -> (clone, base commit)

    def get(self, name: str) -> LocalImage:
        if name not in self.registry:
            raise docker.errors.ImageNotFound(f"No such image: {name}")
        return LocalImage(name)

    def pull(self, name: str, *args, **kwargs):
        raise docker.errors.ImageNotFound(f"{name}: no registry offline")

    def list(self, all: bool = False) -> list[LocalImage]:
        return [LocalImage(name) for name in sorted(self.registry)]


class LocalContainer:
    """A "container": /testbed, /tmp, /eval.sh, ... live under `root`; processes are local."""

    MAPPED = ("/testbed", "/tmp", "/eval.sh", "/image_assets")

    def __init__(self, client: "LocalDockerClient", name: str, image: str):
        self.client, self.name, self.image = client, name, image
        self.id = hashlib.sha256(name.encode()).hexdigest()
        self.root = WORK / "container"
        self.procs: list[subprocess.Popen] = []
        self.status = "created"

    def host(self, path: str) -> str:
        for prefix in self.MAPPED:
            if path == prefix or path.startswith(prefix + "/"):
                return str(self.root) + path
        return path

    def argv(self, cmd) -> list[str]:
        return [self.host(token) for token in (shlex.split(cmd) if isinstance(cmd, str) else cmd)]

    def env(self) -> dict[str, str]:
        return {"PATH": f"{TEST_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root / "root"),
                "LANG": "C.UTF-8", "TZ": "UTC", "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "COLUMNS": "80"}

    def start(self):
        clone, _ = self.client.images.registry[self.image]
        shutil.rmtree(self.root, ignore_errors=True)
        (self.root / "tmp").mkdir(parents=True)
        (self.root / "root").mkdir()
        subprocess.run(["git", "clone", "-q", str(clone), str(self.root / "testbed")],
                       check=True, capture_output=True, env={**os.environ, **GIT_ENV})
        git(self.root / "testbed", "remote", "remove", "origin")
        self.status = "running"

    def popen(self, cmd, workdir: str | None) -> subprocess.Popen:
        proc = subprocess.Popen(self.argv(cmd), cwd=self.host(workdir or "/testbed"),
                                env=self.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def exec_run(self, cmd, workdir=None, user=None, detach=False, **kwargs) -> ExecResult:
        proc = self.popen(cmd, workdir)
        if detach:
            return ExecResult(None, None)
        output, _ = proc.communicate()
        return ExecResult(proc.returncode, output)

    def put_archive(self, path: str, data: bytes) -> bool:
        dest = self.root / path.lstrip("/")  # "/" is the container's root, never the host's
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest)
            names = tar.getnames()
        if "eval.sh" in names and path == "/":  # the script says `cd /testbed`
            script = dest / "eval.sh"
            script.write_text(script.read_text().replace("cd /testbed", f"cd {self.host('/testbed')}"))
        return True

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        self.status = "exited"

    def remove(self, force: bool = False):
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self.client.containers.live.pop(self.name, None)


class LocalContainers:
    def __init__(self, client: "LocalDockerClient"):
        self.client, self.live = client, {}

    def get(self, name: str) -> LocalContainer:
        if name in self.live:
            return self.live[name]
        raise docker.errors.NotFound(f"No such container: {name}")

    def create(self, image: str, name: str, **kwargs) -> LocalContainer:
        if image in self.client.no_daemon:
            # the real docker CLI, pointed at a socket with no daemon behind it
            sock = WORK / "docker.sock"
            done = subprocess.run(
                ["docker", "-H", f"unix://{sock}", "create", "--name", name, image,
                 "tail", "-f", "/dev/null"], capture_output=True, text=True, timeout=60,
                env={**os.environ, "DOCKER_CONFIG": str(WORK / "docker-config")})
            if done.returncode == 0:  # cannot happen: nothing listens there
                raise RuntimeError(f"a docker daemon answered at {sock}")
            raise docker.errors.APIError(done.stderr.strip())
        container = LocalContainer(self.client, name, image)
        self.live[name] = container
        return container

    def list(self, all: bool = False) -> list[LocalContainer]:
        return list(self.live.values())


class LocalAPI:
    """The low-level calls exec_run_with_timeout makes."""

    def __init__(self, client: "LocalDockerClient"):
        self.client, self.execs = client, {}

    def exec_create(self, container_id: str, cmd) -> dict:
        container = next(c for c in self.client.containers.live.values() if c.id == container_id)
        exec_id = hashlib.sha256(f"{container_id}{len(self.execs)}".encode()).hexdigest()
        self.execs[exec_id] = {"container": container, "cmd": cmd, "proc": None}
        return {"Id": exec_id}

    def exec_start(self, exec_id: str, stream: bool = False):
        record = self.execs[exec_id]
        proc = record["proc"] = record["container"].popen(record["cmd"], None)

        def chunks():
            while True:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                yield chunk
            proc.wait()

        return chunks() if stream else b"".join(chunks())

    def exec_inspect(self, exec_id: str) -> dict:
        proc = self.execs[exec_id]["proc"]
        return {"Pid": proc.pid, "Running": proc.poll() is None, "ExitCode": proc.returncode}


class LocalDockerClient:
    def __init__(self, registry: dict[str, tuple[Path, str]], no_daemon: set[str]):
        self.images = LocalImages(registry)
        self.containers = LocalContainers(self)
        self.api = LocalAPI(self)
        self.no_daemon = no_daemon


def local_cleanup_container(client, container, logger):
    """swebench's cleanup_container runs `docker stop/kill/rm`; same log lines, local stop."""
    if not container:
        return
    logger.info(f"Attempting to stop container {container.name}...")
    container.stop()
    logger.info(f"Container {container.name} stopped successfully.")
    logger.info(f"Attempting to remove container {container.name}...")
    container.remove(force=True)
    logger.info(f"Container {container.name} removed successfully.")


class PinnedDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(EPOCH, tz or timezone.utc)


def pin_log_times():
    factory = logging.getLogRecordFactory()

    def pinned(*args, **kwargs):
        record = factory(*args, **kwargs)
        record.created, record.msecs = float(EPOCH), 0.0
        return record

    logging.setLogRecordFactory(pinned)


# ----------------------------------------------------------------------------- the steps
def write_jsonl(path: Path, rows: list[dict]):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def derive_tests(instances: list[dict], registry) -> None:
    """FAIL_TO_PASS / PASS_TO_PASS from a no-patch run and a gold run, as SWE-bench derives
    them; fills them into `instances`."""
    folder = WORK / "validation"
    folder.mkdir(parents=True)
    os.chdir(folder)
    by_id = {row["instance_id"]: row for row in instances}
    nopatch = {iid: {"instance_id": iid, "model_patch": "", "model_name_or_path": "nopatch"}
               for iid in by_id}
    gold = {iid: {"instance_id": iid, "model_patch": row["patch"], "model_name_or_path": "gold"}
            for iid, row in by_id.items()}
    run_evaluation.run_instances(nopatch, instances, 1, "validation-nopatch", TIMEOUT,
                                 skip_patch=True)
    run_evaluation.run_instances(gold, instances, 1, "validation-gold", TIMEOUT)
    for iid, row in by_id.items():
        spec = make_test_spec(row)
        before, ok_before = get_logs_eval(
            spec, RUN_EVALUATION_LOG_DIR / "validation-nopatch" / "nopatch" / iid / LOG_TEST_OUTPUT)
        after, ok_after = get_logs_eval(
            spec, RUN_EVALUATION_LOG_DIR / "validation-gold" / "gold" / iid / LOG_TEST_OUTPUT)
        assert ok_before and ok_after, iid
        f2p = [t for t in after if "::" in t and test_passed(t, after) and test_failed(t, before)]
        p2p = [t for t in after if "::" in t and test_passed(t, after) and test_passed(t, before)]
        assert f2p, f"{iid}: no FAIL_TO_PASS"
        row["FAIL_TO_PASS"], row["PASS_TO_PASS"] = json.dumps(f2p), json.dumps(p2p)
        # the gold run regraded against the derived lists must be RESOLVED_FULL
        regraded = get_eval_report(make_test_spec(row), gold[iid],
                                   RUN_EVALUATION_LOG_DIR / "validation-gold" / "gold" / iid
                                   / LOG_TEST_OUTPUT, include_tests_status=False)
        assert regraded[iid]["resolved"], iid
    os.chdir(HERE)


def evaluate(predictions: str, run_id: str) -> Path:
    """`swebench eval instances.jsonl -p <predictions> --run-id <run_id> -j 1 -t TIMEOUT`."""
    os.chdir(HERE)
    return run_evaluation.main(
        dataset_name="instances.jsonl", split="test", instance_ids=None,
        predictions_path=predictions, max_workers=1, open_file_limit=4096, run_id=run_id,
        timeout=TIMEOUT, rewrite_reports=False, modal=False, report_dir=".", task_repo=None)


def check(summary: dict, model: str, names: list[str]):
    want = EXPECTED[model]
    ids = lambda group: sorted(instance_id(n) for n in want[group] if n in names)  # noqa: E731
    got = {"resolved": summary["resolved_ids"], "unresolved": summary["unresolved_ids"],
           "error": summary["error_ids"], "empty": summary["empty_patch_ids"],
           "infra": summary["infra_failure_ids"], "ambiguous": summary["ambiguous_failure_ids"]}
    for group, value in got.items():
        if value != ids(group):
            raise SystemExit(f"{model}: {group} ids {value} != expected {ids(group)}")


# Logs kept by default besides every report.json and run.json: exactly the files from which
# make_run_report classifies a failure (so re-running it over the shipped tree gives the shipped
# summaries), the not-applied patch's log, and one ordinary test log.
KEEP = {
    f"{RUN_ID}/base/{instance_id('retry-backoff')}/{LOG_TEST_OUTPUT}",     # timed out
    f"{RUN_ID}/base/{instance_id('semver-compare')}/{LOG_TEST_OUTPUT}",    # collection errors
    f"{RUN_ID}/base/{instance_id('topo-sort')}/{LOG_TEST_OUTPUT}",         # conftest ImportError
    f"{RUN_ID}/candidate/{instance_id('topo-sort')}/{LOG_INSTANCE}",       # no docker daemon
    f"{RUN_ID}/base/{instance_id('money-split')}/{LOG_INSTANCE}",          # patch apply failed
    f"{RUN_ID}/base/{instance_id('lru-cache')}/{LOG_TEST_OUTPUT}",         # ordinary, partial fix
}


def trim(instances: list[dict]):
    """Under 200 KB: the instances without `eval_script` (each holds its test patch again), and
    of the logs only the reports, run.json and KEEP."""
    write_jsonl(HERE / "instances.jsonl",
                [{k: v for k, v in row.items() if k != "eval_script"} for row in instances])
    for path in sorted(RUN_EVALUATION_LOG_DIR.rglob("*")):
        relative = path.relative_to(RUN_EVALUATION_LOG_DIR).as_posix()
        if path.is_file() and path.name not in (LOG_REPORT, "run.json") and relative not in KEEP:
            path.unlink()


def recheck(summaries: dict, predictions_files) -> None:
    """make_run_report again over the tree as shipped (no docker client): the same summary,
    less the three keys only a docker client adds."""
    dataset = [json.loads(line) for line in (HERE / "instances.jsonl").read_text().splitlines()]
    client_keys = {"unstopped_instances", "unstopped_containers", "unremoved_images"}
    for model, preds, run_id in predictions_files:
        rows = [json.loads(line) for line in (HERE / preds).read_text().splitlines()]
        again = run_evaluation.make_run_report({row["instance_id"]: row for row in rows},
                                               dataset, run_id, None, str(WORK / "recheck"))
        shipped = summaries[f"{model}.{run_id}.json"]
        assert json.loads(Path(again).read_text()) == {
            k: v for k, v in shipped.items() if k not in client_keys}, (model, run_id)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true",
                        help="keep every log file and the instances' eval_script (over 200 KB)")
    parser.add_argument("--clones", type=Path, metavar="DIR",
                        help="also leave the git clones as DIR/heldout__<name> (what heldout's "
                             "`tasks import-swebench --repos DIR` reads)")
    arguments = parser.parse_args()
    full = arguments.full
    if arguments.clones:
        arguments.clones = arguments.clones.resolve()  # before the chdir below
    assert swebench.__version__ == "5.0.2", swebench.__version__
    assert shutil.which("docker") and shutil.which("patch"), "needs the docker CLI and patch"
    os.chdir(HERE)
    for stale in ("logs", "predictions", "_work", "instances.jsonl"):
        path = HERE / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    for summary in HERE.glob("*.heldout-fx*.json"):
        summary.unlink()
    pin_log_times()
    run_evaluation.datetime = PinnedDatetime  # write_run_metadata's created_at
    run_evaluation.cleanup_container = local_cleanup_container

    names = sorted(PLAN)
    clones, instances, registry = {}, [], {}
    for name in names:
        clone, base_commit = make_clone(name)
        clones[name] = clone
        iid = instance_id(name)
        test_patch = (REPOS / name / "tests.patch").read_text()
        image = expected_image(iid, namespace=IMAGE_NAMESPACE)
        registry[image] = (clone, base_commit)
        instances.append({
            "repo": f"{OWNER}/{name}", "instance_id": iid, "base_commit": base_commit,
            "patch": (REPOS / name / "fix.patch").read_text(), "test_patch": test_patch,
            "problem_statement": (REPOS / name / "issue.md").read_text(), "hints_text": "",
            "created_at": "2025-01-01T00:00:00Z", "version": version_of(REPOS / name / "base"),
            "FAIL_TO_PASS": "[]", "PASS_TO_PASS": "[]", "environment_setup_commit": base_commit,
            "image": image, "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail",
            "eval_script": eval_script(base_commit, test_patch),
        })

    # validation never goes through the no-daemon path
    run_evaluation._docker_client = lambda: LocalDockerClient(registry, set())
    derive_tests(instances, registry)
    write_jsonl(HERE / "instances.jsonl", instances)

    patches = {name: wrong_patch(name, clones) for name in WRONG}
    gold = {row["instance_id"]: row["patch"] for row in instances}
    predictions = {}
    for column, model in enumerate(("base", "candidate")):
        rows = []
        for name in names:
            choice = PLAN[name][column]
            patch = gold[instance_id(name)] if choice == "gold" else patches.get(choice, "")
            rows.append({"instance_id": instance_id(name), "model_name_or_path": model,
                         "model_patch": patch})
        predictions[model] = rows
        write_jsonl(HERE / "predictions" / f"{model}.jsonl", rows)
    write_jsonl(HERE / "predictions" / "candidate-partial.jsonl",
                [row for row in predictions["candidate"]
                 if row["instance_id"] not in {instance_id(n) for n in PARTIAL_DROPS}])

    summaries = {}
    predictions_files = (("base", "predictions/base.jsonl", RUN_ID),
                         ("candidate", "predictions/candidate.jsonl", RUN_ID),
                         ("candidate", "predictions/candidate-partial.jsonl", PARTIAL_RUN_ID))
    for model, preds, run_id in predictions_files:
        daemonless = {expected_image(instance_id(n), namespace=IMAGE_NAMESPACE)
                      for m, n in NO_DAEMON if m == model}
        run_evaluation._docker_client = lambda d=daemonless: LocalDockerClient(registry, d)
        path = Path(evaluate(preds, run_id))
        summaries[path.name] = json.loads(path.read_text())

    check(summaries[f"base.{RUN_ID}.json"], "base", names)
    check(summaries[f"candidate.{RUN_ID}.json"], "candidate", names)
    partial_names = [n for n in names if n not in PARTIAL_DROPS]
    check(summaries[f"candidate.{PARTIAL_RUN_ID}.json"], "candidate", partial_names)
    # the patch that must not apply did not, and left no report.json
    money = RUN_EVALUATION_LOG_DIR / RUN_ID / "base" / instance_id("money-split")
    assert APPLY_PATCH_FAIL in (money / LOG_INSTANCE).read_text()
    assert not (money / LOG_REPORT).exists()

    if not full:
        trim(instances)
    recheck(summaries, predictions_files)
    if arguments.clones:
        arguments.clones.mkdir(parents=True, exist_ok=True)
        for clone in clones.values():
            shutil.copytree(clone, arguments.clones / clone.name)
    shutil.rmtree(WORK)
    for name, summary in summaries.items():
        print(f"{name}: resolved {summary['resolved_instances']} of "
              f"{summary['total_instances']} (submitted {summary['submitted_instances']})")


if __name__ == "__main__":
    sys.exit(main())
