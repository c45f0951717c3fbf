"""The test split's custody as an insider or a busy user tries it: a key outside the repository,
test episodes sealed, reasons bound to one access and spent by it, no access from `dvc exp run`,
and state that survives refusals and crashes. Each case ends refused or detected."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml

from heldout.custody.guard import LEDGER, SEALED_TEST, TestSetAccessError, sealing
from heldout.custody.keys import KEY_ENV, CustodyConfig, TestKey, TestKeyError, load_keys
from heldout.custody.keys import sealing_key as public_key_for
from heldout.custody.ledger import read_ledger
from heldout.custody.seal import SealBrokenError, WrongKeyError, seal, sealed_for, unseal
from heldout.episodes.rollout import roll_outs
from heldout.errors import ParamsError
from stages import catalog, decontaminate, select, split
from stages import report as report_stage
from stages import test as test_stage
from stages.catalog import ACCESS
from tests.conftest import TEST_KEY_HEX
from tests.custody.test_lock import audit_of, crash_before_closing, set_params

OTHER_KEY = TestKey(bytes.fromhex("22" * 32))


@pytest.fixture
def project(selected_copy: Path) -> Path:
    return selected_copy


def outcomes(project: Path) -> list[str]:
    return [entry["outcome"] for entry in read_ledger(project / LEDGER)]


def error_lines(stderr: str) -> list[str]:
    """The stage's own error lines (Prefect logs its server around them)."""
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def choose_base_instead(project: Path) -> None:
    """A new candidate wins selection: the next test run is a new access key."""
    set_params(project, "select", rule="last", final="base")
    select.run(project)


# --- the key ---------------------------------------------------------------------------------


def test_the_sealed_split_opens_with_the_test_key_and_with_nothing_in_the_repository(
        project: Path):
    sealed = (project / SEALED_TEST).read_bytes()
    manifest = json.loads((project / catalog.MANIFEST).read_text())
    key = load_keys().current
    assert sealed_for(sealed) == key.key_id
    plain = unseal(sealed, key)
    assert plain.count(b"\n") == manifest["counts"]["test"]
    # What the repository holds (manifest, params, salt, digests) opens nothing: the seal
    # used to be derived from the manifest; now only the secret opens it.
    with pytest.raises(WrongKeyError, match=f"sealed for test key {key.key_id}"):
        unseal(sealed, OTHER_KEY)
    forged_header = sealed[:len(b"HELDOUT-SEALED-2\n") + 32] + OTHER_KEY.public + sealed[
        len(b"HELDOUT-SEALED-2\n") + 64:]
    with pytest.raises(SealBrokenError, match="changed since they were sealed"):
        unseal(forged_header, OTHER_KEY)


def test_sealing_needs_only_the_public_half_and_is_deterministic():
    public = OTHER_KEY.public
    assert seal(b"tasks", public) == seal(b"tasks", public)
    assert seal(b"tasks", public) != seal(b"tasks!", public)
    assert unseal(seal(b"tasks", public), OTHER_KEY) == b"tasks"
    assert public_key_for(CustodyConfig(public_key=public.hex())) == (public, None)


def test_without_a_key_the_embedded_default_creates_one_and_says_where(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    with pytest.raises(TestKeyError, match="no test key: set HELDOUT_TEST_KEY"):
        load_keys()
    public, note = public_key_for(CustodyConfig())
    path = tmp_path / "config" / "heldout" / "test-key"
    assert note.startswith(f"created your test key in {path} (mode 0600)")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert public_key_for(CustodyConfig()) == (public, None), "created once, then reused"
    assert load_keys().current.public == public


def test_a_key_given_by_file_and_an_older_key_after_a_rotation(tmp_path, monkeypatch):
    key_file = tmp_path / "team.key"
    key_file.write_text("33" * 32 + "\n")
    monkeypatch.setenv(KEY_ENV, f"{key_file},{TEST_KEY_HEX}")
    ring = load_keys()
    assert ring.current.secret == bytes.fromhex("33" * 32)
    assert ring.by_id(TestKey(bytes.fromhex(TEST_KEY_HEX)).key_id) is not None
    monkeypatch.setenv(KEY_ENV, "not-a-key")
    with pytest.raises(TestKeyError, match="entry 1: neither 64 hex digits nor a readable key"):
        load_keys()


def test_the_test_stage_without_the_key_stops_with_one_line_and_records_nothing(
        project: Path, tmp_path):
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "empty-config")}
    env.pop(KEY_ENV)
    result = subprocess.run([sys.executable, "-m", "cli.main", "stage", "test"], cwd=project,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (error,) = error_lines(result.stderr)
    assert error.startswith("error: no test key: set HELDOUT_TEST_KEY")
    assert outcomes(project) == []


def test_a_key_that_is_not_the_one_the_split_was_sealed_for_is_named(project: Path,
                                                                     monkeypatch):
    sealed_for_id = TestKey(bytes.fromhex(TEST_KEY_HEX)).key_id
    monkeypatch.setenv(KEY_ENV, "22" * 32)
    with pytest.raises(TestKeyError, match=f"sealed for test key {sealed_for_id}, and the key "
                                           f"here is {OTHER_KEY.key_id}"):
        test_stage.run(project)
    assert outcomes(project) == []


# --- sealed test episodes --------------------------------------------------------------------


def test_test_completions_never_sit_in_plain_text(project: Path):
    test_stage.run(project)
    key = load_keys().current
    episodes = pd.read_parquet(io.BytesIO(unseal(
        (project / catalog.SEALED_TEST_EPISODES).read_bytes(), key)))
    completions = {c for c in episodes["completion"] if len(c) > 20}
    assert len(completions) > 10
    for arm in test_stage.ARMS:
        table = pd.read_parquet(project / catalog.test_rollout_file(arm))
        assert "completion" not in table.columns and len(table) == (
            episodes["checkpoint"] == table["checkpoint"].iloc[0]).sum()
    with sqlite3.connect(project / ".heldout" / "episodes.sqlite") as db:
        stored = [row for (row,) in db.execute("SELECT row FROM episodes")]
    in_plain = [c for c in completions if any(json.dumps(c)[1:-1] in row for row in stored)]
    assert in_plain == []
    assert json.loads((project / catalog.RERUNS).read_text())["runs"] == 4
    # The reference solutions judged on the test tasks (stages/test_oracle.py) are test
    # content too: sealed, one episode a task.
    assert sum(row.startswith("sealed:") for row in stored) == len(episodes) + episodes[
        "task_id"].nunique(), "every test episode, the reruns of both arms and the oracle's"
    # The clocks the outcome files leave out are the test stage's MLflow run's: each arm's
    # per-task mean, averaged over tasks, recomputed from every episode's timings.
    timings = pd.read_parquet(project / "data/test/timings.parquet")
    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    [run] = client.search_runs([client.get_experiment_by_name("heldout").experiment_id],
                               "tags.`heldout.stage` = 'test'")
    access = json.loads((project / ACCESS).read_text())
    for role in test_stage.ARMS:
        arm = timings[timings["checkpoint"] == access[role]]
        assert run.data.metrics[f"effort.{role}_agent_s"] == pytest.approx(
            arm.groupby("task_id")["agent_s"].mean().mean())


def test_the_outcome_files_quote_nothing_of_the_hidden_tests_and_the_seal_keeps_it(
        project: Path):
    test_stage.run(project)
    episodes = pd.read_parquet(io.BytesIO(unseal(
        (project / catalog.SEALED_TEST_EPISODES).read_bytes(), load_keys().current)))
    # What the judge said about failed programs: it quotes the hidden tests.
    quoted = {text for text in episodes["error"] if text}
    assert any("tests.py line" in text for text in quoted), sorted(quoted)[:3]
    markers = ("tests.py line", "AssertionError", "[heldout judge]")
    for arm in test_stage.ARMS:
        path = project / catalog.test_rollout_file(arm)
        table = pd.read_parquet(path)
        assert len(table) and set(table["error"]) == {""}
        assert set(table["status"]) <= set(episodes["status"])
        cells = [str(value) for column in table.columns for value in table[column]]
        assert [c for c in cells if c in quoted or any(m in c for m in markers)] == []
        # Not in the file's bytes either (a column's statistics hold values in plain text).
        raw = path.read_bytes()
        assert [m for m in markers if m.encode() in raw] == []
        arm_episodes = episodes[episodes["checkpoint"] == table["checkpoint"].iloc[0]]
        assert list(arm_episodes.sort_values(["task_id", "sample"])["passed"]) == list(
            table["passed"]), "the outcomes are the sealed episodes' own"


def test_a_resumed_access_reads_its_sealed_episodes_back(project: Path, monkeypatch):
    first = crash_before_closing(project, monkeypatch)

    def no_new_episodes(*args, **kwargs):
        raise AssertionError("a resume must come from the sealed cache")

    monkeypatch.setattr("heldout.episodes.chunks.run_chunk_async", no_new_episodes)
    again = test_stage.run(project)
    assert again["resumed"] and again["result_digest"] == first["result_digest"]


def test_outcome_files_are_byte_identical_at_any_episodes_in_flight_and_one_access(
    project: Path, monkeypatch
):
    """In flight is how fast, never what: the same access (no new ledger open) and the same
    bytes, episodes run again from nothing at one in flight after 256."""
    first = crash_before_closing(project, monkeypatch)
    files = {arm: (project / f"data/test/rollouts/{arm}.parquet").read_bytes()
             for arm in ("candidate", "base")}
    set_params(project, "rollouts", in_flight=1, chunk_episodes=5)
    (project / ".heldout/episodes.sqlite").unlink()  # every episode runs again
    again = test_stage.run(project)
    assert again["access_id"] == first["access_id"] and again["resumed"]
    assert again["result_digest"] == first["result_digest"]
    assert {arm: (project / f"data/test/rollouts/{arm}.parquet").read_bytes()
            for arm in files} == files
    assert outcomes(project) == ["opened", "resumed", "closed"]


# --- no access by habit ----------------------------------------------------------------------


def test_a_reason_is_bound_to_the_access_it_names_and_spent_by_it(project: Path):
    test_stage.run(project)
    choose_base_instead(project)
    set_params(project, "test", reaccess={"access": "late", "reason": "audit of the release"})
    with pytest.raises(TestSetAccessError, match="a reason justifies only the access it names"):
        test_stage.run(project)
    set_params(project, "test", reaccess={"access": "base", "reason": "base-vs-base check"})
    access = test_stage.run(project)
    assert access["accesses_of_this_test_version"] == 2
    assert access["reason"] == "base-vs-base check"

    # The reason stays in params.yaml; the next new key (another base) cannot reuse it.
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["base"] = "late"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(TestSetAccessError, match=r"was spent by ledger line 4 \(.*candidate "
                                                 r"base\): a new access needs a new reason"):
        test_stage.run(project)
    assert outcomes(project) == ["opened", "closed", "refused", "opened", "closed", "refused"]


def test_the_first_access_records_no_reason_and_spends_none(project: Path):
    set_params(project, "test", reaccess={"access": "late", "reason": "left over from before"})
    access = test_stage.run(project)
    assert access["reason"] == "" and read_ledger(project / LEDGER)[0]["reason"] == ""


def test_dvc_exp_run_does_not_reach_the_test_split_unless_it_names_the_test(
        project: Path, monkeypatch, capsys):
    """A sweep's test stage ends at once and succeeds (the experiment is saved): no access, no
    ledger line, no MLflow run, the outputs as they were."""
    monkeypatch.setenv("DVC_EXP_NAME", "sweep-n3")
    runs_before = len(mlflow.search_runs(search_all_experiments=True))
    assert test_stage.run(project) == {"not_run": "sweep-n3"}
    assert re.search(r"test: not run in experiment sweep-n3: .*test split stays closed.*"
                     r"dvc exp run -n sweep-n3 -S test.experiment=sweep-n3",
                     capsys.readouterr().out)
    assert not (project / LEDGER).exists() or read_ledger(project / LEDGER) == []
    assert not (project / ACCESS).exists()
    assert len(mlflow.search_runs(search_all_experiments=True)) == runs_before
    set_params(project, "test", experiment="another-one")
    assert test_stage.run(project) == {"not_run": "sweep-n3"}
    set_params(project, "test", experiment="sweep-n3")
    assert test_stage.run(project)["accesses_of_this_test_version"] == 1
    assert outcomes(project) == ["opened", "closed"]


# --- refusals and crashes --------------------------------------------------------------------


def test_a_missing_test_split_is_a_clean_error_before_any_ledger_line(project: Path):
    with sealing():
        (project / SEALED_TEST).unlink()
    result = subprocess.run([sys.executable, "-m", "cli.main", "stage", "test"], cwd=project,
                            env=os.environ, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    (error,) = error_lines(result.stderr)
    assert "data/split/test.sealed is missing: restore it (`dvc checkout " in error
    assert error.endswith("nothing was recorded")
    assert outcomes(project) == []


def test_a_damaged_test_split_is_a_clean_error_before_any_ledger_line(project: Path):
    sealed = bytearray((project / SEALED_TEST).read_bytes())
    sealed[-5] ^= 0xFF
    with sealing():
        (project / SEALED_TEST).write_bytes(bytes(sealed))
    with pytest.raises(TestSetAccessError, match="changed since they were sealed; re-run the "
                                                 "split stage"):
        test_stage.run(project)
    assert outcomes(project) == []


def test_a_crash_mid_access_is_found_and_resumed(project: Path, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("the machine went away")

    with monkeypatch.context() as patch:
        patch.setattr(test_stage, "roll_outs", crash)
        with pytest.raises(RuntimeError):
            test_stage.run(project)
    assert outcomes(project) == ["opened"]
    assert not audit_of(project).ok
    assert any("never closed" in problem for problem in audit_of(project).problems)
    access = test_stage.run(project)
    assert access["resumed"] and outcomes(project) == ["opened", "resumed", "closed"]
    assert audit_of(project).ok, audit_of(project).problems


def test_the_split_is_sealed_for_a_team_public_key_it_cannot_open(project: Path, monkeypatch):
    set_params(project, "custody", public_key=OTHER_KEY.public.hex())
    with sealing():
        split.run(project)
        assert sealed_for((project / SEALED_TEST).read_bytes()) == OTHER_KEY.key_id
    with pytest.raises(TestKeyError, match=f"sealed for test key {OTHER_KEY.key_id}"):
        test_stage.run(project)
    monkeypatch.setenv(KEY_ENV, "22" * 32)
    select.run(project)
    assert test_stage.run(project)["tasks"] > 0


def test_heldout_key_shows_the_public_half_and_never_the_secret(monkeypatch):
    monkeypatch.setenv(KEY_ENV, f"{'22' * 32},{TEST_KEY_HEX}")
    shown = subprocess.run([sys.executable, "-m", "cli.main", "key"], env=os.environ,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == (f"test key {OTHER_KEY.key_id} (current, from HELDOUT_TEST_KEY): public "
                        f"key {OTHER_KEY.public.hex()}")
    assert "older (verifies ledger lines only)" in lines[1]
    assert "22" * 32 not in shown.stdout and TEST_KEY_HEX not in shown.stdout


# --- the run-level drift, inside the access ------------------------------------------------


def test_both_arms_rerun_under_paired_seeds_inside_the_one_access(project: Path, monkeypatch):
    calls = []

    def together(root, jobs, *args, **kwargs):
        calls.append([(job.label, job.rerun) for job in jobs])
        return roll_outs(root, jobs, *args, **kwargs)

    monkeypatch.setattr(test_stage, "roll_outs", together)
    access = test_stage.run(project)
    # Run r of the candidate and of the base under way at once (a slow episode of one holds up
    # the other's none: heldout.episodes.chunks.collect_together), run after run.
    assert calls == [[(f"test:{arm}" + (f":rerun{run}" if run else ""), run)
                      for arm in ("late", "base")] for run in range(4)]
    reruns = json.loads((project / catalog.RERUNS).read_text())
    tables = {arm: pd.read_parquet(project / catalog.test_rollout_file(arm))
              for arm in test_stage.ARMS}
    assert (reruns["runs"], reruns["checkpoints"]["base"]) == (4, "base")
    harness_n = yaml.safe_load((project / "params.yaml").read_text())["harness"]["n"]
    for arm, table in tables.items():
        # The rollout file holds the four runs pooled, each episode a row of its own.
        assert len(table) == 4 * harness_n * table["task_id"].nunique()
        first = table[table["sample"] < harness_n]
        assert reruns["pass_at_1"][arm][0] == pytest.approx(
            first.groupby("task_id")["passed"].mean().mean())
        assert table["seed"].nunique() == len(table), "new seeds in every run"
    # Run r of the two arms drew the same seeds, episode by episode.
    keys = ["task_id", "sample"]
    seeds = tables["base"][[*keys, "seed"]].merge(tables["candidate"][[*keys, "seed"]], on=keys)
    assert len(seeds) == len(tables["base"]) and (seeds["seed_x"] == seeds["seed_y"]).all()
    assert len(set(reruns["pass_at_1"]["base"])) > 1, "new seeds, new outcomes"
    assert outcomes(project) == ["opened", "closed"]
    assert access["accesses_of_this_test_version"] == 1
    decontaminate.run(project)  # the report reads what decontamination flagged
    drift = report_stage.run(project)["headline"]["run_drift"]
    differences = np.subtract(reruns["pass_at_1"]["candidate"], reruns["pass_at_1"]["base"])
    assert drift["n_runs"] == 4
    assert drift["run_sd"] == pytest.approx(float(np.std(differences, ddof=1)), abs=1e-12)
    # The runs' per-task rates were read back from the pooled file: the noise is netted.
    assert reruns["samples_per_run"] == harness_n and drift["noise"] > 0
    # The episodes' clocks interleave, and the report, whose rollout files leave the clocks
    # out, takes the access's word for it.
    assert reruns["interleaved"] is True
    timings = pd.read_parquet(project / "data/test/timings.parquet")
    assert timings["started_at"].notna().all()
    assert report_stage.run(project)["headline"]["timing"] == {"apart": None, "unknown": None,
                                                               "reference": None}


def test_the_runs_can_hold_fewer_episodes_than_the_harness(project: Path):
    set_params(project, "reruns", runs=4, episodes=1)
    test_stage.run(project)
    reruns = json.loads((project / catalog.RERUNS).read_text())
    assert (reruns["runs"], reruns["episodes_per_run"], reruns["samples_per_run"]) == (4, 1, 1)
    for arm in test_stage.ARMS:
        table = pd.read_parquet(project / catalog.test_rollout_file(arm))
        assert (table.groupby("task_id").size() == 4).all()
        assert sorted(table["sample"].unique()) == [0, 1, 2, 3]
    decontaminate.run(project)
    written = report_stage.run(project)
    card = written["protocol"]["test_access"]
    assert (card["runs"], card["episodes_per_run"]) == (4, 1)
    # The card declares the harness the runs ran under (n = 1), which the rollouts carry: no
    # "protocol's harness is …, but the rollouts were produced under …" on the default run.
    table = pd.read_parquet(project / catalog.test_rollout_file("base"))
    assert written["protocol"]["harness"]["n"] == 1
    assert set(table["harness"]) == {written["protocol"]["harness"]["fingerprint"]}
    assert not [w for w in written["headline"]["warnings"] if "protocol's harness" in w]


def test_reruns_arm_is_refused_with_what_changed(project: Path):
    set_params(project, "reruns", arm="base")
    with pytest.raises(ParamsError, match="reruns.arm is gone: both arms are rerun"):
        test_stage.run(project)
    assert outcomes(project) == []


def test_two_runs_are_not_enough_to_measure_drift(project: Path):
    set_params(project, "reruns", runs=2)
    with pytest.raises(ParamsError, match=r"reruns.runs: .*at least 4: 2 paired runs of each "
                                          "arm"):
        test_stage.run(project)
    assert outcomes(project) == []


@pytest.mark.parametrize("runs", [0, 1])
def test_one_run_of_each_arm_is_refused_as_run_apart(project: Path, runs: int):
    # One run each: the base's episodes, then the candidate's, with no drift control.
    set_params(project, "reruns", runs=runs)
    with pytest.raises(ParamsError, match=r"reruns.runs: .*at least 4: with one run of each "
                                          "arm .* the arms ran at different times"):
        test_stage.run(project)
    assert outcomes(project) == []
