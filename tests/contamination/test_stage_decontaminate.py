"""The decontaminate stage, called as dvc.yaml's command calls it but without Prefect around it:
the embedded default's planted leaks, the policies, precision and recall on a generated set,
and the test split never opened."""

from __future__ import annotations

import json
import os
import random
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mlflow
import pytest
import yaml

from heldout.contamination.report import ContaminationError
from heldout.custody import guard
from heldout.errors import InputFileError
from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks
from heldout.tasks.split import SplitConfig, assign
from scripts.make_training_corpus import LEAKS
from stages import decontaminate, split
from tests.conftest import REPO, write_jsonl

PLANTED = json.loads((REPO / "tests" / "data" / "planted_leaks.json").read_text())
CORPUS = {"path": "tasks/training_corpus.jsonl", "fields": ["prompt", "completion"]}
# Overlaps among HumanEval's own tasks, found by the stage on the whole set, not planted:
# filter_by_substring's tests contain filter_by_prefix's, largest_prime_factor holds is_prime
# renamed, count_nums and order_by_points share a digits_sum helper, and the two
# correct_bracketing tasks differ only in their brackets (punctuation, which text folds).
NATURAL_PAIRS = [("HumanEval/7", "HumanEval/29"), ("HumanEval/31", "HumanEval/59"),
                 ("HumanEval/56", "HumanEval/61"), ("HumanEval/108", "HumanEval/145")]
# Under the default salt the train task of three of them has its eval twin across the split.
NATURAL_TRAIN_TO_EVAL = {"HumanEval/7": ("test", "HumanEval/29"),
                         "HumanEval/31": ("test", "HumanEval/59"),
                         "HumanEval/145": ("val", "HumanEval/108")}

# Precision and recall the stage must reach on the generated set (measured: 1.0 and 1.0).
MIN_PRECISION = 0.95
MIN_RECALL = 0.9
MIN_RECALL_PER_KIND = 0.8

_opened: list[str] | None = None


def _record_test_split_opens(event: str, args: tuple) -> None:
    # The guard's own reads are not the stage's: it reads the first 4 KiB of each sealed file it
    # watches (ciphertext), to know one that was renamed, of every project this process saw.
    if guard._in_hook.get():
        return
    if _opened is not None and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        path = os.fsdecode(args[0])
        if f"{os.sep}data{os.sep}split{os.sep}test" in path:
            _opened.append(path)


sys.addaudithook(_record_test_split_opens)  # inert unless a test is watching


@contextmanager
def watching_test_split() -> Iterator[list[str]]:
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def configure(project: Path, uri_owner: Path, monkeypatch, **decontaminate_params) -> str:
    uri = f"sqlite:///{uri_owner / 'own.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["decontaminate"] = decontaminate_params
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return uri


def split_then_hide_test(project: Path) -> dict:
    """Run the split, then delete the test split's file: decontamination must not need it."""
    manifest = split.run(project)
    for path in (project / "data" / "split").glob("test.*"):
        path.unlink()
    return manifest


def methods_by_pair(report: dict) -> dict[tuple[str, str, str], set[str]]:
    found = defaultdict(set)
    for m in report["matches"]:
        found[(m["training_id"], m["eval_split"], m["eval_id"])].add(m["method"])
    return found


def check_channels(report: dict) -> None:
    """One row per leakage channel: the checked ones with what they compared, the threshold
    and their counts (the report's own per-method counts, and the eval items a corpus holds by
    that channel), then the two checked elsewhere, named."""
    rows = {row["channel"]: row for row in report["channels"]}
    # The stage's matches on the embedded default, by hand: test ngram 110, 99 (corpus) and 29
    # (train split); test code 59, 99 (corpus) and 59 (train split); test minhash 99; val
    # exact 153 and normalized 153; val ngram 108, 153 (corpus) and 108 (train split); val
    # minhash 108, 137, 153 (corpus) and 108 (train split); val code 108, 153, 43 (corpus) and
    # 108 (train split). `flagged` counts the eval items a corpus holds, once each.
    found = {channel: (row["matches"], row["flagged"]) for channel, row in rows.items()}
    assert found == {
        "exact copy": ({"val": 2, "test": 0}, {"val": 1, "test": 0}),
        "n-gram overlap": ({"val": 3, "test": 3}, {"val": 2, "test": 2}),
        "MinHash near-duplicate": ({"val": 4, "test": 1}, {"val": 3, "test": 1}),
        "rename-invariant code": ({"val": 4, "test": 3}, {"val": 3, "test": 2}),
        "shared group": ({"val": 0, "test": 0}, {"val": 0, "test": 0}),
        "released before the data cutoff": (None, None),
        "recall by the checkpoint": (None, None)}
    assert list(rows) == ["exact copy", "n-gram overlap", "MinHash near-duplicate",
                          "rename-invariant code", "shared group",
                          "released before the data cutoff", "recall by the checkpoint"]
    counts = report["counts"]
    for split_name in ("val", "test"):
        assert rows["exact copy"]["matches"][split_name] == (
            counts["exact"][split_name] + counts["normalized"][split_name])
        for channel, method in (("n-gram overlap", "ngram"), ("MinHash near-duplicate",
                                "minhash"), ("rename-invariant code", "code")):
            assert rows[channel]["matches"][split_name] == counts[method][split_name]
    assert "at least 0.5 of an eval field's 13-grams" in rows["n-gram overlap"]["threshold"]
    assert rows["MinHash near-duplicate"]["threshold"] == (
        "estimated Jaccard similarity at least 0.4")
    assert "literals keep" in rows["rename-invariant code"]["compared"]
    assert rows["recall by the checkpoint"]["checked"] is False
    assert "heldout probe-recall" in rows["recall by the checkpoint"]["where"]
    assert "by_date" in rows["released before the data cutoff"]["where"]
    assert rows["released before the data cutoff"]["matches"] is None


def test_the_embedded_default_catches_each_planted_leak_by_its_method(project, monkeypatch):
    uri = configure(project, project, monkeypatch, training_corpora=[CORPUS])
    manifest = split_then_hide_test(project)
    with watching_test_split() as opened:
        report = decontaminate.run(project)
    assert opened == [], "the stage opened the test split"

    found = methods_by_pair(report)
    for leak in PLANTED:
        methods = found[(leak["training_id"], leak["eval_split"], leak["eval_id"])]
        assert set(leak["must_catch"]) <= methods, (leak["kind"], methods)
        assert not methods & set(leak["must_miss"]), (leak["kind"], methods)
    flagged = {(split_name, eval_id) for split_name, ids in report["flagged_eval_ids"].items()
               for eval_id in ids}
    corpus_copies_of_natural = {NATURAL_TRAIN_TO_EVAL["HumanEval/31"],
                                NATURAL_TRAIN_TO_EVAL["HumanEval/145"]}
    assert flagged == {(leak["eval_split"], leak["eval_id"]) for leak in PLANTED} | (
        corpus_copies_of_natural), "the corpus holds the train tasks, but not their tests"
    assert report["removed_train_ids"] == sorted(NATURAL_TRAIN_TO_EVAL)
    assert report["excluded_eval_ids"] == {"val": [], "test": []}, "policy flag keeps them"
    check_channels(report)

    decontam = project / "data" / "decontam"
    kept = load_tasks(decontam / "train.jsonl")
    train = load_tasks(project / "data" / "split" / "train.jsonl")
    assert [t.id for t in kept] == [t.id for t in train if t.id not in NATURAL_TRAIN_TO_EVAL]
    assert json.loads((decontam / "report.json").read_text()) == report
    assert json.loads((decontam / "excluded.json").read_text()) == {
        "policy": "flag", "val": [], "test": []}

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("heldout")
    (run,) = client.search_runs([experiment.experiment_id],
                                filter_string="tags.`heldout.stage` = 'decontaminate'")
    assert run.info.status == "FINISHED"
    assert run.data.tags["heldout.test_version"] == manifest["test_version"]
    assert run.data.metrics["matches_code_test"] == report["counts"]["code"]["test"] > 0
    assert run.data.metrics["flagged_val"] == len(report["flagged_eval_ids"]["val"])
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "decontam")}
    assert artifacts == {"decontam/report.json", "decontam/excluded.json"}


def test_drop_excludes_leaked_eval_items_and_fail_stops_with_the_evidence(project, monkeypatch):
    uri = configure(project, project, monkeypatch, policy="drop", training_corpora=[CORPUS])
    split_then_hide_test(project)
    report = decontaminate.run(project)
    excluded = json.loads((project / "data" / "decontam" / "excluded.json").read_text())
    assert {"val": excluded["val"], "test": excluded["test"]} == report["flagged_eval_ids"]
    assert excluded["policy"] == "drop" and excluded["val"] and excluded["test"]

    configure(project, project, monkeypatch, policy="fail", training_corpora=[CORPUS])
    for path in (project / "data" / "decontam").iterdir():
        path.unlink()
    with pytest.raises(ContaminationError) as error:
        decontaminate.run(project)
    for leak in PLANTED:
        assert f"{leak['eval_split']}/{leak['eval_id']}" in str(error.value)
    assert not any((project / "data" / "decontam").iterdir()), "a failed stage writes nothing"
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("heldout")
    failed = client.search_runs([experiment.experiment_id], filter_string="status = 'FAILED'")
    (run,) = failed
    assert {a.path for a in client.list_artifacts(run.info.run_id, "decontam")} == {
        "decontam/report.json"}, "the reviewer of the failed run still gets the evidence"


def test_a_missing_corpus_names_the_file(project, monkeypatch):
    configure(project, project, monkeypatch,
              training_corpora=[{"path": "tasks/nowhere.jsonl", "fields": ["text"]}])
    split.run(project)
    with pytest.raises(InputFileError, match=r"nowhere\.jsonl: no such file"):
        decontaminate.run(project)


# --- Precision and recall on a generated set -------------------------------------------------

LEAKS_PER_KIND = 6


def generated_corpus(tasks: list[Task], salt: str, fractions: dict) -> tuple[list, set, dict]:
    """Every kind of leak of LEAKS_PER_KIND eval tasks, hidden among the same transformations
    of every train task (hard negatives: a renamed copy of a *train* task must not match)."""
    rng = random.Random(6)
    splits = assign(tasks, salt, fractions)
    eligible = [t for name in ("val", "test") for t in splits[name]
                if len(t.prompt.split()) >= 60 and len((t.reference or "").split()) >= 15]
    records, leaked, kind_of = [], set(), {}
    for kind, (generate, _, _) in LEAKS.items():
        for task in rng.sample(eligible, LEAKS_PER_KIND):
            records.append((generate(task), task.id, kind))
        for task in splits["train"]:
            records.append((generate(task), None, kind))
    rng.shuffle(records)
    corpus = []
    for number, ((prompt, completion), target, kind) in enumerate(records):
        corpus.append({"id": f"g{number}", "prompt": prompt, "completion": completion})
        if target is not None:
            leaked.add(f"g{number}")
            kind_of[f"g{number}"] = (kind, target)
    return corpus, leaked, kind_of


def test_precision_and_recall_on_leaks_hidden_among_hard_negatives(project, monkeypatch):
    natural = {task_id for pair in NATURAL_PAIRS for task_id in pair}
    tasks = [t for t in load_tasks("humaneval") if t.id not in natural]
    write_jsonl(project / "tasks" / "mine.jsonl", [t.to_record() for t in tasks])
    config = SplitConfig.model_validate(yaml.safe_load((project / "params.yaml").read_text())[
        "split"])
    corpus, leaked, kind_of = generated_corpus(tasks, config.salt, config.fractions)
    write_jsonl(project / "tasks" / "corpus.jsonl", corpus)
    params = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(params.replace("source: humaneval",
                                                        "source: tasks/mine.jsonl"))
    configure(project, project, monkeypatch, training_corpora=[
        {"path": "tasks/corpus.jsonl", "fields": ["prompt", "completion"]}])
    split_then_hide_test(project)
    with watching_test_split() as opened:
        report = decontaminate.run(project)
    assert opened == []

    predicted = {m["training_id"] for m in report["matches"] if m["source"] != "train-split"}
    true_positives = predicted & leaked
    precision = len(true_positives) / len(predicted)
    recall = len(true_positives) / len(leaked)
    assert precision >= MIN_PRECISION, sorted(predicted - leaked)
    assert recall >= MIN_RECALL, sorted(leaked - predicted)
    for kind in LEAKS:
        ids = [i for i, (k, _) in kind_of.items() if k == kind]
        assert sum(i in predicted for i in ids) / len(ids) >= MIN_RECALL_PER_KIND, kind
    for match in report["matches"]:
        if match["training_id"] in true_positives:
            assert match["eval_id"] == kind_of[match["training_id"]][1], "found, and rightly"
    assert report["removed_train_ids"] == [], "no train task overlaps an eval task here"
