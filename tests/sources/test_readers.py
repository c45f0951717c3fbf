"""Other harnesses' results, read as the harnesses themselves scored them (issue 40). Every
fixture under tests/data/sources/ was written by the tool itself (each folder's make_fixtures.py
runs it, offline): heldout's per-task counts must equal the tool's per-sample scores, its pass@1
the tool's own figure, and a mismatched pair must be refused at its first difference."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from heldout.errors import HeldoutError, InputFileError
from heldout.sources import read_source
from heldout.sources.comparable import check_comparable
from heldout.sources.sniff import (
    EVALPLUS,
    INSPECT_EVAL,
    INSPECT_JSON,
    LM_EVAL,
    SWEBENCH_REPORTS,
    SWEBENCH_SUMMARY,
    VERIFIERS,
    source_kind,
)
from heldout.statistics.counts import IncomparableRolloutsError, per_task_counts

DATA = Path(__file__).resolve().parents[1] / "data" / "sources"
INSPECT = DATA / "inspect_ai"
LM = DATA / "lm_eval"
PLUS = DATA / "evalplus"
VF = DATA / "verifiers" / "runs"


def lm_file(run: str, task: str = "qa_mc") -> Path:
    return next((LM / run).glob(f"samples_{task}_*.jsonl"))


def read(path: Path, score_key: str | None = None, group_key: str | None = None):
    return read_source(path, source_kind(path), score_key, group_key)


def counts(imported) -> dict[str, tuple[int, int]]:
    """Each task's (samples, passes) as heldout counts them."""
    table = per_task_counts(imported.table())
    return {row.task_id: (int(row.n), int(row.c)) for row in table.itertuples()}


def pass_at_1(imported) -> float:
    return float(np.mean([c / n for n, c in counts(imported).values()]))


# --- inspect_ai ------------------------------------------------------------------------------


def inspect_reported(name: str) -> dict:
    return json.loads((INSPECT / "reported.json").read_text())[name]


@pytest.mark.parametrize("name", ["pair-base.eval", "pair-candidate.eval", "small-json.json"])
def test_an_inspect_log_counts_what_inspect_scored(name: str):
    imported = read(INSPECT / name, score_key="match")
    reported = inspect_reported(name)
    expected: dict[str, list[int]] = {}
    for sample_id, _epoch, value, error, limit in reported["samples"]:
        expected.setdefault(sample_id, [0, 0])
        expected[sample_id][0] += 1
        expected[sample_id][1] += value == "C" and not error and limit is None
    assert counts(imported) == {task: tuple(pair) for task, pair in expected.items()}
    assert imported.source.tool == "inspect_ai" and imported.source.scorer == "match"
    assert imported.source.reported["accuracy"] == reported["metrics"]["match/match/accuracy"]


def test_an_inspect_log_without_errors_has_inspects_own_accuracy():
    imported = read(INSPECT / "pair-candidate.eval", score_key="match")
    accuracy = inspect_reported("pair-candidate.eval")["metrics"]["match/match/accuracy"]
    assert pass_at_1(imported) == pytest.approx(accuracy, abs=1e-12)


def test_an_errored_or_limited_sample_is_a_failure_counted_apart():
    imported = read(INSPECT / "pair-base.eval", score_key="match")
    table = imported.table().set_index(["task_id", "sample"])
    assert table.loc[("q05", 1), "status"] == "error"  # epoch 2
    assert "the tool server went away" in table.loc[("q05", 1), "error"]
    assert table.loc[("q07", 0), "status"] == "budget"  # a token limit
    assert not table.loc[[("q05", 1), ("q07", 0)], "passed"].any()
    assert len(table) == 68  # nothing left the denominator
    assert any("errored" in note for note in imported.source.notes)


def test_inspects_json_and_eval_logs_read_alike_and_by_content():
    disguised = Path(shutil.copy(INSPECT / "small-json.json", INSPECT.parent / "x.txt"))
    try:
        assert source_kind(INSPECT / "small-json.json") == INSPECT_JSON
        assert source_kind(INSPECT / "pair-base.eval") == INSPECT_EVAL
        assert source_kind(disguised) == INSPECT_JSON
        assert counts(read(disguised, "match")) == counts(read(INSPECT / "small-json.json",
                                                              "match"))
    finally:
        disguised.unlink()


def test_a_score_key_chooses_among_scorers_and_names_them_when_missing():
    with pytest.raises(HeldoutError, match=r"holds the scores match, graded\.correct, "
                                           r"graded\.close: choose one with --score-key"):
        read(INSPECT / "pair-base.eval")
    by_key = read(INSPECT / "pair-base.eval", score_key="correct")
    assert by_key.source.scorer == "graded.correct"
    assert counts(by_key) == counts(read(INSPECT / "pair-base.eval", score_key="match"))
    with pytest.raises(HeldoutError, match=r"--score-key 'nope' is not a score of this log"):
        read(INSPECT / "pair-base.eval", score_key="nope")


def test_an_inspect_group_key_reads_sample_metadata():
    imported = read(INSPECT / "pair-base.eval", score_key="match", group_key="family")
    groups = imported.table().groupby("task_id")["group"].first()
    assert groups["q05"] == "f1" and set(groups) == {"f0", "f1", "f2", "f3"}
    with pytest.raises(HeldoutError, match=r"no metadata field 'repo' for --group-key; its "
                                           r"metadata has family"):
        read(INSPECT / "pair-base.eval", score_key="match", group_key="repo")


def test_inspect_logs_of_other_tasks_are_refused_at_the_first_difference():
    base = read(INSPECT / "pair-base.eval", score_key="match")
    check_comparable(base, read(INSPECT / "pair-candidate.eval", score_key="match"))
    with pytest.raises(IncomparableRolloutsError,
                       match=r"task q04 is in A and not in B \(30 such task\(s\); A has 34 "
                             r"tasks, B 4\)"):
        check_comparable(base, read(INSPECT / "fewer.eval", score_key="match"))
    with pytest.raises(IncomparableRolloutsError, match="a different scorer"):
        check_comparable(base, read(INSPECT / "pair-candidate.eval", score_key="graded.close"))


def test_a_missing_inspect_ai_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    with pytest.raises(HeldoutError, match=r"needs inspect_ai: pip install 'heldout\[inspect\]'"):
        read(INSPECT / "pair-base.eval", score_key="match")


# --- lm-evaluation-harness -------------------------------------------------------------------


def test_an_lm_eval_file_counts_each_documents_metric():
    path = lm_file("seed1")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    imported = read(path)
    assert source_kind(path) == LM_EVAL
    assert counts(imported) == {str(line["doc_id"]): (1, int(line["acc"])) for line in lines}
    results = json.loads(next((LM / "seed1").glob("results_*.json")).read_text())
    assert pass_at_1(imported) == pytest.approx(results["results"]["qa_mc"]["acc,none"])
    assert imported.source.reported == {"acc": results["results"]["qa_mc"]["acc,none"]}
    assert imported.source.model == results["model_name"]


def test_lm_eval_repeats_are_one_sample_as_lm_eval_scores_them():
    """qa_gen ran with repeats: 3; lm-eval scores the first of them (filter none)."""
    path = lm_file("seed1", "qa_gen")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {len(line["resps"][0]) for line in lines} == {3}
    assert counts(read(path)) == {str(line["doc_id"]): (1, int(line["exact_match"]))
                                  for line in lines}


def test_an_lm_eval_score_that_is_not_pass_fail_is_refused_naming_the_document(tmp_path):
    path = lm_file("seed1", "qa_gen")
    lines = path.read_text().splitlines()
    record = json.loads(lines[4])
    record["exact_match"] = 0.5
    lines[4] = json.dumps(record)
    hostile = tmp_path / path.name
    hostile.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFileError, match=r":5: field 'exact_match': 0\.5 \(float\) for doc "
                                             r"4, not pass/fail \(one number over its 3 "
                                             r"repeats\)"):
        read(hostile)


def test_lm_eval_files_of_other_documents_are_refused():
    seed1 = read(lm_file("seed1"), group_key="repo")
    check_comparable(seed1, read(lm_file("seed2")))
    assert set(seed1.table()["group"]) == {"r0", "r1", "r2", "r3"}
    with pytest.raises(IncomparableRolloutsError, match=r"task 10 is in A and not in B"):
        check_comparable(seed1, read(lm_file("limit8")))
    with pytest.raises(IncomparableRolloutsError, match=r"a different task"):
        check_comparable(seed1, read(lm_file("seed1", "qa_gen")))


# --- evalplus --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["samples_base", "samples_candidate", "samples_uneven"])
@pytest.mark.parametrize("key", ["base", "plus"])
def test_evalplus_results_count_what_evalplus_counts(name: str, key: str):
    summary = json.loads((PLUS / "summary.json").read_text())["files"][f"{name}.jsonl"]
    imported = read(PLUS / f"{name}_eval_results.json", score_key=key)
    assert source_kind(PLUS / f"{name}_eval_results.json") == EVALPLUS
    assert counts(imported) == {task: (row["n"], row[f"{key}_pass"])
                                for task, row in summary["per_task"].items()}
    assert pass_at_1(imported) == pytest.approx(summary["pass@1_full_precision"][key])


def test_evalplus_timeouts_are_failures_counted_apart():
    table = read(PLUS / "samples_candidate_eval_results.json").table().set_index(
        ["task_id", "sample"])
    assert table.loc[("HumanEval/3", 1), "status"] == "timeout"  # os._exit on a plus input
    assert read(PLUS / "samples_candidate_eval_results.json", "base").table().set_index(
        ["task_id", "sample"]).loc[("HumanEval/3", 1), "status"] == "ok"


def test_evalplus_files_with_other_samples_per_task_are_refused():
    base = read(PLUS / "samples_base_eval_results.json")
    check_comparable(base, read(PLUS / "samples_candidate_eval_results.json"))
    with pytest.raises(IncomparableRolloutsError, match=r"task HumanEval/0 has 3 sample\(s\) in "
                                                        r"A and 1 in B"):
        check_comparable(base, read(PLUS / "samples_uneven_eval_results.json"))
    with pytest.raises(HeldoutError, match="holds nothing per task but its id"):
        read(PLUS / "samples_base_eval_results.json", group_key="repo")


# --- verifiers -------------------------------------------------------------------------------


def rewards(run: str) -> dict[str, list[float]]:
    by_task: dict[str, list[float]] = {}
    for line in (VF / run / "traces.jsonl").read_text().splitlines():
        record = json.loads(line)
        score = sum(part["score"] * part["weight"] for trace in record["traces"]
                    for part in trace["rewards"].values())
        by_task.setdefault(record["task"]["data"]["id"], []).append(score)
    return by_task


@pytest.mark.parametrize("run", ["base", "candidate", "mismatch"])
def test_verifiers_rollouts_count_their_rewards(run: str):
    imported = read(VF / run / "traces.jsonl")
    assert source_kind(VF / run / "traces.jsonl") == VERIFIERS
    assert counts(imported) == {task: (len(scores), int(sum(scores)))
                                for task, scores in rewards(run).items()}
    figures = json.loads((VF / "summary.json").read_text())[run]
    assert pass_at_1(imported) == pytest.approx(
        figures["recomputed_from_traces"]["mean_reward_errored_as_0"], abs=5e-5)
    table = imported.table()
    ok = table[table["status"] == "ok"]
    assert f"{ok['passed'].mean():.2f}" == figures["vf_eval_printed"]["reward"]


def test_a_verifiers_provider_error_is_a_failure_counted_apart():
    table = read(VF / "candidate" / "traces.jsonl").table()
    errored = table[table["status"] == "error"]
    assert len(errored) == 1 and "ProviderError: upstream 500" in errored["error"].iloc[0]
    assert len(table) == 24


def test_verifiers_runs_of_other_examples_are_refused_and_groups_come_from_task_data():
    base = read(VF / "base" / "traces.jsonl", group_key="family")
    check_comparable(base, read(VF / "candidate" / "traces.jsonl"))
    assert set(base.table()["group"]) == {"add", "sub", "mul", "div"}
    with pytest.raises(IncomparableRolloutsError, match=r"is in A and not in B \(4 such"):
        check_comparable(base, read(VF / "mismatch" / "traces.jsonl"))


# --- SWE-bench -------------------------------------------------------------------------------

SWE = DATA / "swebench"
RUNS = SWE / "logs" / "run_evaluation"


def summary_of(name: str) -> dict:
    return json.loads((SWE / name).read_text())


@pytest.mark.parametrize("name", ["base.heldout-fx.json", "candidate.heldout-fx.json",
                                  "candidate.heldout-fx-partial.json"])
def test_a_swebench_summary_counts_every_instance_as_swebench_does(name: str):
    summary = summary_of(name)
    imported = read(SWE / name)
    assert source_kind(SWE / name) == SWEBENCH_SUMMARY
    assert len(counts(imported)) == summary["total_instances"] == 12
    assert {task for task, (_n, c) in counts(imported).items() if c} == set(
        summary["resolved_ids"])
    assert pass_at_1(imported) == pytest.approx(imported.source.reported["resolved_rate"])
    assert imported.source.reported["resolved_rate"] == (summary["resolved_instances"]
                                                        / summary["total_instances"])
    apart = set(imported.table().query("status == 'error'")["task_id"])
    assert apart == set(summary["error_ids"]) | set(summary["infra_failure_ids"]) | set(
        summary["ambiguous_failure_ids"]) | set(summary["incomplete_ids"])


def test_swebench_failures_apart_say_why():
    table = read(SWE / "base.heldout-fx.json").table().set_index("task_id")
    assert table.loc["heldout__retry-backoff-1", "error"] == (
        "ambiguous failure: tests_timed_out")
    assert table.loc["heldout__money-split-1", "error"] == (
        "the harness could not run or grade it")
    assert table.loc["heldout__ini-continuation-1", ["status", "error"]].tolist() == [
        "ok", "empty patch"]
    partial = read(SWE / "candidate.heldout-fx-partial.json").table().set_index("task_id")
    assert (partial.loc[summary_of("candidate.heldout-fx-partial.json")["incomplete_ids"],
                        "error"] == "no prediction").all()
    candidate = read(SWE / "candidate.heldout-fx.json").table().set_index("task_id")
    assert candidate.loc["heldout__topo-sort-1", "error"] == (
        "likely infrastructure failure: container_unavailable")


def test_a_swebench_run_folder_reads_each_report_and_groups_by_repository():
    folder = read(RUNS / "heldout-fx" / "base", group_key="repo")
    assert source_kind(RUNS / "heldout-fx" / "base") == SWEBENCH_REPORTS
    reports = {path.parent.name: json.loads(path.read_text())[path.parent.name]
               for path in (RUNS / "heldout-fx" / "base").glob("*/report.json")}
    by_task = counts(folder)
    assert {task for task, (_n, c) in by_task.items() if c} == {
        task for task, report in reports.items() if report["resolved"]}
    assert set(by_task) == set(reports) | {"heldout__money-split-1",
                                           "heldout__retry-backoff-1"}
    assert "heldout__ini-continuation-1" not in by_task  # an empty patch leaves no folder
    assert any("empty patch leaves no folder" in note for note in folder.source.notes)
    groups = folder.table().set_index("task_id")["group"]
    assert groups["heldout__lru-cache-1"] == "heldout__lru-cache"
    one = RUNS / "heldout-fx" / "base" / "heldout__topo-sort-1" / "report.json"
    assert read(one).table()["error"].tolist() == ["ambiguous failure: missing_module"]


def test_swebench_results_of_other_instances_are_refused():
    base = read(SWE / "base.heldout-fx.json")
    check_comparable(base, read(SWE / "candidate.heldout-fx-partial.json"))  # 4 incomplete
    with pytest.raises(IncomparableRolloutsError, match=r"task heldout__date-range-1 is in A "
                                                        r"and not in B"):
        check_comparable(base, read(RUNS / "heldout-fx-partial" / "candidate"))
    with pytest.raises(HeldoutError, match="groups by repo only"):
        read(SWE / "base.heldout-fx.json", group_key="family")
