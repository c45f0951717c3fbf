"""DVC's own views of a scored project serve as they are: `dvc plots show` draws one line per
checkpoint in a page that renders with the network off (Vega inlined from the npm registry by
scripts/vendor_vega.sh, pinned by hash), and `dvc metrics show` gives each checkpoint a row."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stages import catalog, score
from tests import chromium as browser
from tests.conftest import REPO, configure_small_project, copy_project

CHECKPOINTS = {"base": {"agent": "demo", "skill": -0.5},
               "step_10": {"agent": "demo", "skill": 0.5},
               "late": {"agent": "demo", "skill": 1.5}}
VENDOR = REPO / "scripts" / "vendor_vega.sh"
PAGE_TEMPLATE = Path(".dvc/plots/index.html")
# Chromium with no way out: no name resolves and every request goes to a closed local port.
NETWORK_OFF = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9")
REMOTE_LOAD = re.compile(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?"""
                         r"""(?:https?:)?//""", re.IGNORECASE)


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", **extra}


def dvc(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["dvc", *args], cwd=project, env=environment(), capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> Path:
    """A cut-down project run through `score` (in this process), in a git repository."""
    from stages import rollouts, split

    project = copy_project(tmp_path_factory.mktemp("views") / "project")
    configure_small_project(project, checkpoints=CHECKPOINTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{project / 'own.db'}")
        split.run(project)
        for name in CHECKPOINTS:
            rollouts.run(name, project)
        score.run(project)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return project


def vendored(project: Path) -> None:
    """What `make venv` does: Vega inlined into DVC's page template, which .dvc/config.local
    names. Quick when the page came with the project (copy_project copies .dvc/plots/); it
    downloads only where `make venv` has not run. Skips, saying why, where it cannot."""
    done = subprocess.run([str(VENDOR), str(project)], env=environment(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    if not (project / PAGE_TEMPLATE).is_file():
        pytest.skip(f"Vega is not vendored, so `dvc plots show` needs a CDN: {done.stderr.strip()}")


def test_dvc_plots_show_draws_every_checkpoint_with_the_network_off(scored: Path, monkeypatch):
    browser.find_chromium()  # skips, saying why, where Chromium is missing
    vendored(scored)
    template = (scored / PAGE_TEMPLATE).read_text(encoding="utf-8")
    assert "{scripts}" not in template and not REMOTE_LOAD.search(template)

    shown = dvc(scored, "plots", "show")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    page = scored / "dvc_plots" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert not REMOTE_LOAD.search(html), "the page loads something from the network"
    assert "cdn.jsdelivr.net" not in html

    monkeypatch.setattr(browser, "QUIET_FLAGS", (*browser.QUIET_FLAGS, *NETWORK_OFF))
    dom = browser.render(page.as_uri(), virtual_time_budget_ms=10_000).dom
    assert re.search(r'<svg\b[^>]*class="marks"', dom), "no chart in the rendered page"
    lines = re.findall(r'<path aria-label="([^"]*)"[^>]*aria-roledescription="line mark"', dom)
    for name in CHECKPOINTS:
        assert sum(f"checkpoint: {name};" in line for line in lines) == 1, f"{name}: {lines}"
    legend = re.findall(r'class="mark-text role-legend-label".*?<text\b[^>]*>([^<]*)</text>', dom)
    assert set(CHECKPOINTS) <= set(legend), legend


def test_dvc_metrics_show_gives_each_checkpoint_a_readable_row(scored: Path):
    shown = dvc(scored, "metrics", "show")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    assert lines and max(len(line) for line in lines) <= 200, shown.stdout
    header = lines[0].split()
    assert header[0] == "Path" and {"pass@1", "pass@1_lo", "pass@1_hi"} <= set(header)
    assert "pass@2" not in header  # n = 2: the default k stop at n/2
    for name in CHECKPOINTS:
        rows = [line.split() for line in lines if line.startswith(f"metrics/val/{name}.json ")]
        assert len(rows) == 1 and len(rows[0]) == len(header), shown.stdout

    # The rows are the scores, in DVC's own reading of them.
    shown = json.loads(dvc(scored, "metrics", "show", "--json").stdout)
    read = shown[""]["data"] if "" in shown else next(iter(shown.values()))["data"]
    scores = json.loads((scored / catalog.SCORES).read_text())["checkpoints"]
    for name in CHECKPOINTS:
        row = read[str(catalog.val_metrics_file(name))]["data"]
        assert row["pass@1"] == round(scores[name]["pass_at_1"]["estimate"], 6)
        assert row["pass@1_lo"] <= row["pass@1"] <= row["pass@1_hi"]
        assert row["any_fail"] == scores[name]["failure_capable"]


def test_the_plot_data_is_long_form_one_row_per_checkpoint_and_k(scored: Path):
    rows = list(csv.DictReader(io.StringIO((scored / catalog.PASSK_CSV).read_text())))
    scores = json.loads((scored / catalog.SCORES).read_text())["checkpoints"]
    assert [(row["checkpoint"], int(row["k"])) for row in rows] == [
        (name, int(k)) for name in CHECKPOINTS for k in sorted(scores[name]["pass_at_k"], key=int)]
    for row in rows:
        assert float(row["pass_at_k"]) == pytest.approx(
            scores[row["checkpoint"]]["pass_at_k"][row["k"]], abs=1e-6)
    # A name CSV would split is quoted, not split.
    text = score.passk_csv({"a,b": {1: 0.5}})
    assert list(csv.reader(io.StringIO(text)))[1] == ["a,b", "1", "0.500000"]


def test_every_mlflow_metric_keeps_its_own_dvc_column():
    keys = {"pass_at_1", "pass_at_1_low", "pass_at_1_high", "pass_at_2", "pass_at_16",
            "pass_hat_2", "pass_hat_16", "failure_capable", "all_fail", "error_rate",
            "truncation_rate", "budget_rate", "timeout_rate", "refusal_rate", "public_pass",
            "hidden_pass_on_public_tasks", "public_not_hidden"}
    names = {key: score.dvc_key(key) for key in keys}
    assert len(set(names.values())) == len(keys), names
    assert names["pass_at_16"] == "pass@16" and names["pass_hat_2"] == "pass^2"
    assert names["failure_capable"] == "any_fail" and names["error_rate"] == "error"


def test_stale_checkpoint_rows_go_when_a_checkpoint_does(tmp_path: Path):
    folder = tmp_path / catalog.VAL_METRICS
    folder.mkdir(parents=True)
    for name in ("base", "gone"):
        (folder / f"{name}.json").write_text("{}")
    score.remove_other_metrics(tmp_path, ["base"])
    assert sorted(path.name for path in folder.iterdir()) == ["base.json"]


# --- the vendoring script, without the network -----------------------------------------------


def fake_npm(folder: Path) -> Path:
    """An `npm` whose `pack` writes tarballs with the right names and the wrong bytes."""
    folder.mkdir()
    npm = folder / "npm"
    npm.write_text("#!/usr/bin/env bash\n"
                   "mkdir -p package/build\n"
                   "echo 'window.vega = {};' > package/build/vega.min.js\n"
                   "for spec in \"${@: -3}\"; do\n"
                   "  name=${spec%@*}; version=${spec##*@}\n"
                   "  cp package/build/vega.min.js package/build/$name.min.js\n"
                   "  tar -czf $name-$version.tgz package\n"
                   "done\n")
    npm.chmod(0o755)
    return folder


def test_a_download_that_does_not_match_its_pinned_hash_is_refused(project: Path,
                                                                   tmp_path: Path):
    if subprocess.run(["sh", "-c", "command -v node"], capture_output=True).returncode != 0:
        pytest.skip("node not found (the script hashes with node, which comes with npm)")
    (project / PAGE_TEMPLATE).unlink(missing_ok=True)
    stub = fake_npm(tmp_path / "stub")
    done = subprocess.run([str(VENDOR), str(project)], capture_output=True, text=True,
                          env=environment(PATH=f"{stub}:{environment()['PATH']}"), timeout=60)
    assert done.returncode == 1
    assert re.search(r"vega@5\.\d+\.\d+: the tarball's hash is sha512-\S+, the pinned one "
                     r"sha512-\S+: not using it", done.stderr), done.stderr
    assert not (project / PAGE_TEMPLATE).exists()
    assert not (project / ".dvc" / "config.local").exists()


def test_without_npm_vendoring_says_so_and_leaves_dvc_its_own_page(project: Path,
                                                                     tmp_path: Path):
    (project / PAGE_TEMPLATE).unlink(missing_ok=True)
    tools = tmp_path / "tools"  # a PATH with the shell and coreutils only
    tools.mkdir()
    for tool in ("bash", "dirname", "sed", "env", "cksum"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True,
                               text=True).stdout.strip()
        (tools / tool).symlink_to(found)
    done = subprocess.run(["bash", str(VENDOR), str(project)], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(tools)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "npm not found: skipped vendoring Vega" in done.stderr
    assert not (project / PAGE_TEMPLATE).exists()
    assert not (project / ".dvc" / "config.local").exists()
