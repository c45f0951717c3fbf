"""The recall probe (heldout.contamination.recall, `heldout probe-recall`): a loopback server
that memorized chosen tasks is found out exactly, for the prompt and for the solution apart;
test tasks, other agents and a split that was never made are refused."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import mlflow
import pytest
import yaml
from scipy.stats import binomtest

from heldout.contamination.recall import (
    MIN_WORDS,
    chat_continuation,
    common_prefix_share,
    cut,
    max_tokens_for,
    reproduces,
    task_texts,
)
from heldout.tasks.sources import load_tasks
from tests.memorizing_server import MemorizingServer

TEXT = "def add(a, b):\n    '''Return the sum of a and b, two numbers.'''\n    return a + b\n"


# --- the cut -------------------------------------------------------------------------------


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5, 0.6, 0.8, 0.95])
def test_a_cut_ends_a_word_at_or_before_the_share_and_loses_nothing(share):
    piece = cut(TEXT, share)
    assert piece.prefix + piece.held_back == TEXT
    assert piece.held_back[0].isspace() and not piece.prefix[-1].isspace()
    assert len(piece.prefix) <= round(len(TEXT) * share)
    # The next word end is past the target: the cut is the last one before it.
    after = [i for i in range(len(piece.prefix) + 1, len(TEXT))
             if TEXT[i].isspace() and not TEXT[i - 1].isspace()]
    assert not after or after[0] > round(len(TEXT) * share)


def test_a_share_before_the_first_word_end_cuts_after_the_first_word():
    piece = cut("supercalifragilistic " + "word " * 10, 0.01)
    assert piece.prefix == "supercalifragilistic"


def test_the_held_back_part_always_holds_a_word():
    text = "one two three four five six seven eight" + " " * 200
    piece = cut(text, 0.9)
    assert piece.held_back.strip() == "eight"


def test_a_short_text_is_not_probed_and_a_share_outside_0_1_is_refused():
    assert cut(" ".join(["w"] * (MIN_WORDS - 1)), 0.6) is None
    assert cut(" ".join(["w"] * MIN_WORDS), 0.6) is not None
    for share in (0.0, 1.0, -0.2, 1.5):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            cut(TEXT, share)


def test_verbatim_means_the_held_back_text_first_whitespace_runs_aside():
    held_back = "\n    return a + b\n"
    assert reproduces("  return a +\tb\n\n# more", held_back)
    assert not reproduces("\n    return a - b\n", held_back)
    assert not reproduces("\n    return a +", held_back)
    assert common_prefix_share(held_back, held_back) == 1.0
    assert common_prefix_share("return a - b", held_back) == pytest.approx(9 / 12)
    assert common_prefix_share("", held_back) == 0.0


def test_a_chat_reply_loses_its_fence_and_a_repetition_of_the_text_shown():
    prefix = "def add(a, b):\n    '''Return"
    assert chat_continuation("```python\n the sum'''\n```", prefix) == " the sum'''"
    assert normalized(chat_continuation(f"```\n{prefix} the sum\n```", prefix)) == "the sum"
    assert chat_continuation(" the sum", prefix) == " the sum"


def test_max_tokens_covers_every_byte_of_the_rest():
    assert max_tokens_for("ab") == 18
    assert max_tokens_for("é") == 18  # two bytes of UTF-8


def normalized(text: str) -> str:
    return " ".join(text.split())


# --- the command against a server that memorized chosen tasks ------------------------------

TASKS = 24
PROMPTS = {0, 2, 3, 5, 8, 13, 21}  # memorized prompts (by position)
SOLUTIONS = {2, 5, 13}  # memorized prompts with their solutions: a subset of PROMPTS


def make_project(root: Path, url: str, endpoint: str = "completions") -> list:
    tasks = load_tasks("humaneval")[:TASKS]
    tasks[-1] = tasks[-1].model_copy(update={"reference": None})  # no reference: one text
    split = root / "data" / "split"
    split.mkdir(parents=True)
    for name, chosen in (("val", tasks), ("train", tasks[:3])):
        (split / f"{name}.jsonl").write_text(
            "".join(json.dumps(t.to_record()) + "\n" for t in chosen))
    (root / "dvc.yaml").write_text("stages: {}\n")
    (root / "params.yaml").write_text(yaml.safe_dump({"checkpoints": {
        "served": {"agent": "openai", "base_url": url, "model": "loopback",
                   "endpoint": endpoint, "max_retries": 0},
        "local": {"agent": "demo", "skill": 1.0}}}))
    return tasks


def run(root: Path, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from cli.main import main

    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "argv", ["heldout", *args])
    code = 0
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_probe_recall_finds_exactly_the_memorized_tasks(tmp_path, monkeypatch, capsys, endpoint):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'runs.db'}")
    tasks = [t for t in load_tasks("humaneval")[:TASKS]]
    texts = [task_texts(t) for t in tasks]
    server = MemorizingServer(
        known=[text for both in texts for text in both.values()],
        memorized=[texts[i]["prompt"] for i in PROMPTS]
        + [texts[i]["reference"] for i in SOLUTIONS]).start()
    try:
        tasks = make_project(tmp_path, server.url, endpoint)
        code, out, err = run(tmp_path, monkeypatch, capsys, "probe-recall", "served",
                             "--split", "val")
    finally:
        server.stop()
    assert code == 0, err
    record = json.loads((tmp_path / ".heldout/recall/served-val.json").read_text())
    summary = record["summary"]
    for kind, chosen, probed in (("prompt", PROMPTS, TASKS), ("reference", SOLUTIONS, TASKS - 1)):
        expected = sorted(tasks[i].id for i in chosen)
        assert summary[kind]["recalled_ids"] == expected, kind
        assert (summary[kind]["probed"], summary[kind]["recalled"]) == (probed, len(chosen))
        assert summary[kind]["share"] == pytest.approx(len(chosen) / probed)
        ci = binomtest(len(chosen), probed).proportion_ci(0.95, method="exact")
        assert summary[kind]["interval"] == pytest.approx([ci.low, ci.high])
        assert summary[kind]["failed"] == 0
        assert {r["task_id"] for r in record["rows"] if r["text"] == kind and r["recalled"]} \
            == set(expected)
    # The near misses match most of the way, never all of it.
    misses = [r["prefix_share"] for r in record["rows"] if not r["recalled"]]
    assert misses and max(misses) < 1.0 and sum(misses) / len(misses) > 0.3
    assert {(b["temperature"], b["seed"]) for b in server.requests} == {(0, 0)}
    assert len(server.requests) == 2 * TASKS - 1
    assert all(b["model"] == "loopback" for b in server.requests)
    assert all(r["max_tokens"] > r["held_back_chars"] for r in record["rows"])
    assert record["settings"]["prefix_share"] == 0.6
    assert record["settings"]["temperature"] == 0
    assert (record["split"], record["tasks"], record["checkpoint"]) == ("val", TASKS, "served")
    ids = ", ".join(sorted(tasks[i].id for i in SOLUTIONS))
    assert f"reference recalled ({len(SOLUTIONS)}): {ids}" in out
    # The run a reviewer finds in MLflow holds the same shares.
    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    [logged] = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        "tags.`heldout.command` = 'probe-recall'")
    assert logged.data.metrics["prompt_recalled"] == len(PROMPTS)
    assert logged.data.metrics["reference_share"] == pytest.approx(summary["reference"]["share"])
    assert logged.data.params["split"] == "val"


def test_the_prefix_share_is_the_share_shown(tmp_path, monkeypatch, capsys):
    server = MemorizingServer(known=[], memorized=[]).start()
    try:
        make_project(tmp_path, server.url)
        code, _, err = run(tmp_path, monkeypatch, capsys, "probe-recall", "served", "--split",
                           "train", "--prefix", "0.3", "--out", str(tmp_path / "r.json"),
                           "--in-flight", "1")
    finally:
        server.stop()
    assert code == 0, err
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["summary"]["prompt"]["recalled"] == 0
    for row, body in zip(record["rows"], server.requests, strict=True):
        shown = len(body["prompt"])
        assert shown == row["prefix_chars"]
        assert 0.2 < shown / (shown + row["held_back_chars"]) <= 0.3


def test_the_test_split_is_refused_as_a_test_access(tmp_path, monkeypatch, capsys):
    make_project(tmp_path, "http://127.0.0.1:9/v1")
    code, out, err = run(tmp_path, monkeypatch, capsys, "probe-recall", "served", "--split",
                         "test")
    assert code == 2
    said = " ".join(err.split())
    assert "a probe on test tasks is a test access" in said
    assert "only the test stage opens the test split" in said and "dvc repro test" in said
    assert not (tmp_path / ".heldout").exists()


def test_a_checkpoint_that_is_not_an_openai_agent_is_refused(tmp_path, monkeypatch, capsys):
    make_project(tmp_path, "http://127.0.0.1:9/v1")
    code, _, err = run(tmp_path, monkeypatch, capsys, "probe-recall", "local")
    assert code == 2
    assert "checkpoint local is agent: demo, not openai" in " ".join(err.split())


def test_a_split_never_made_is_refused_with_the_stage_to_run(tmp_path, monkeypatch, capsys):
    make_project(tmp_path, "http://127.0.0.1:9/v1")
    (tmp_path / "data/split/val.jsonl").unlink()
    code, _, err = run(tmp_path, monkeypatch, capsys, "probe-recall", "served")
    assert code == 2
    said = " ".join(err.split())
    assert "data/split/val.jsonl does not exist" in said and "dvc repro split" in said
