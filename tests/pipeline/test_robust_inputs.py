"""Inputs that cannot break a stage (issue 17): what an agent reports, what the resume cache
holds and what a task file says are checked where they enter, and a bad one becomes an error row,
a rerun with one warning line, or a message naming file, line and field (exit 2), never a crash.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import sqlite3
import subprocess
from pathlib import Path
from typing import Literal

import pandas as pd
import pytest
from pydantic import field_validator

from heldout.agents.protocol import Action, Completion
from heldout.canonical import safe_text, sha256_hex
from heldout.episodes.cache import EpisodeCache, machine_cache_key, row_mac
from heldout.episodes.chunks import EpisodeWork, collect_rollouts
from heldout.episodes.episode import plan_episodes, run_episode
from heldout.episodes.harness import Harness
from heldout.episodes.rollout import RolloutsConfig, agent_context, roll_out
from heldout.episodes.rows import (
    ROW_COLUMNS,
    invalid_row,
    rollout_table,
    row_problems,
    trajectory_steps,
    validate_row,
)
from heldout.errors import InputFileError
from heldout.plugins import Plugin
from heldout.tasks.kinds import TASK_KINDS
from heldout.tasks.record import Task, TaskRuntime
from heldout.tasks.sources import load_jsonl_bytes, load_tasks
from tests.conftest import REPO, task_record, write_jsonl

TASKS = load_tasks("humaneval")[:2]
HARNESS = Harness(n=2, seed=3, timeout_s=5, retries=0)
HEX = "0123456789abcdef"


# --- text safety ------------------------------------------------------------------------------


def test_safe_text_replaces_lone_surrogates_and_keeps_valid_text():
    assert safe_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert safe_text("café 😀") == "café 😀"
    assert safe_text("\ud83d\ude00") == "\ufffd\ufffd"  # two lone halves are not a character


def test_sha256_hex_never_fails_on_text_and_keeps_valid_texts_hashes():
    assert sha256_hex("café") == hashlib.sha256("café".encode()).hexdigest()
    assert sha256_hex("\ud800") == hashlib.sha256(b"\xed\xa0\x80").hexdigest()
    hashes = {sha256_hex(text) for text in ("\ud800", "\ud801", "\ufffd", "?", "")}
    assert len(hashes) == 5


# --- row validation ---------------------------------------------------------------------------


def good_row(**changes) -> dict:
    row = {"task_id": "t", "sample": 0, "seed": 7, "harness": "h", "completion": "x",
           "completion_sha": sha256_hex("x"), "passed": True, "public_passed": None,
           "status": "ok", "error": "", "finish_reason": "stop", "tokens_in": 10,
           "tokens_out": 5, "turns": 1, "tool_calls": 1, "end_reason": "submitted",
           "agent_s": 0.1, "exec_s": 0.2, "exec_cpu_s": 0.1, "cost_usd": 0.0,
           "trajectory": "[]", "step_timings": "[]"}
    row.update(changes)
    return row


BAD_ROWS = {
    "huge tokens": ({"tokens_in": 10**30},
                    "field 'tokens_in': an integer of 31 digits is outside 0..1000000000000"),
    "tokens past the sane range": ({"tokens_out": 10**12 + 1},
                                   "field 'tokens_out': 1000000000001 is outside 0..1000000000000"),
    "negative turns": ({"turns": -1}, "field 'turns': -1 is outside 0..9223372036854775807"),
    "seed past int64": ({"seed": 2**63}, "field 'seed': 9223372036854775808 is outside "
                                         "0..9223372036854775807"),
    "float tokens": ({"tool_calls": 1.0}, "field 'tool_calls': expected an integer, got float"),
    "bool as int": ({"sample": True}, "field 'sample': expected an integer, got bool"),
    "nan cost": ({"cost_usd": math.nan}, "field 'cost_usd': nan is not a finite number"),
    "infinite time": ({"agent_s": math.inf}, "field 'agent_s': inf is not a finite number"),
    "negative cost": ({"cost_usd": -0.5}, "field 'cost_usd': -0.5 is negative"),
    "cost past a float": ({"cost_usd": 10**400},
                          "field 'cost_usd': an integer of 401 digits is too large for a number"),
    "text time": ({"exec_s": "1"}, "field 'exec_s': expected a number, got str"),
    "lone surrogate": ({"completion": "\ud800"},
                       "field 'completion': not valid UTF-8 text (it holds a lone surrogate)"),
    "unknown status": ({"status": "fine"}, "field 'status': 'fine' is not one of ok, error, "
                                           "timeout, truncated, refused, budget"),
    "passed as int": ({"passed": 1}, "field 'passed': expected true or false, got int"),
    "public passed as text": ({"public_passed": "yes"},
                              "field 'public_passed': expected true, false or null, got str"),
    "null error": ({"error": None}, "field 'error': expected a string, got NoneType"),
}


@pytest.mark.parametrize("case", BAD_ROWS, ids=list(BAD_ROWS))
def test_an_invalid_row_becomes_an_error_row_naming_the_field(case: str):
    changes, message = BAD_ROWS[case]
    row = good_row(**changes)
    assert row_problems(row) == [message]
    fixed = validate_row(row, {"task_id": "t", "sample": 0, "seed": 7, "harness": "h"})
    assert fixed["error"] == f"invalid row: {message}"
    assert (fixed["status"], fixed["passed"], fixed["public_passed"]) == ("error", False, None)
    assert {fixed[c] for c in ("tokens_in", "tokens_out", "turns", "tool_calls")} == {0}
    assert {fixed[c] for c in ("agent_s", "exec_s", "exec_cpu_s", "cost_usd")} == {0.0}
    assert (fixed["task_id"], fixed["sample"], fixed["seed"], fixed["harness"]) == ("t", 0, 7, "h")
    assert row_problems(fixed) == []


def test_a_missing_field_and_several_problems_are_all_named_in_column_order():
    row = good_row(cost_usd=math.nan, tokens_in=-1)
    del row["turns"]
    assert row_problems(row) == ["field 'tokens_in': -1 is outside 0..1000000000000",
                                 "field 'turns': missing",
                                 "field 'cost_usd': nan is not a finite number"]
    assert validate_row(good_row()) == good_row()
    negative = validate_row(good_row(cost_usd=-1))
    assert negative["error"] == "invalid row: field 'cost_usd': -1 is negative"
    with pytest.raises(ValueError, match="a row without a valid identity: field 'seed'"):
        validate_row(good_row(seed=-1))  # an error row needs the episode's identity


def test_the_table_of_valid_extreme_rows_writes_and_reads_back_as_parquet(tmp_path: Path):
    rows = [good_row(seed=2**63 - 1, tokens_in=10**12, completion="\ufffd", error="é"),
            invalid_row(good_row(sample=1), ["field 'tokens_in': x"])]
    table = rollout_table("ck", rows)
    table.to_parquet(tmp_path / "r.parquet", index=False)
    back = pd.read_parquet(tmp_path / "r.parquet")
    pd.testing.assert_frame_equal(back, table)
    assert list(back.columns) == list(ROW_COLUMNS)


# --- agents that say impossible things, end to end ------------------------------------------


class SaysAnything:
    """A single-shot agent returning what it is told to, whatever that is."""

    def __init__(self, completion: Completion):
        self.completion = completion
        self.calls = 0

    def complete(self, task, sample, seed):
        self.calls += 1
        return self.completion


class TalksInSurrogates:
    """A multi-turn agent whose messages, arguments and code hold lone surrogates: a malformed
    call first (an argument named with one), then a submit."""

    def begin(self, task, sample, seed, brief):
        return self

    def act(self, observation, deadline_s):
        code = "    return \"\ud800\"\n"
        if observation.turn == 1:
            return Action("run_public_tests", {"code": code, "note\udc00": ["\ud801"]},
                          message="thinking \udfff", tokens_in=3, tokens_out=2)
        return Action("submit", {"code": code}, message="done", tokens_in=3, tokens_out=2)

    def close(self):
        pass


@pytest.fixture(scope="module")
def sandbox():
    opened = HARNESS.sandbox.open()
    yield opened
    opened.close()


class Observer:
    def __init__(self):
        self.seen: list[bool] = []

    def start(self, total):
        pass

    def advance(self, row, cached):
        self.seen.append(cached)

    def finish(self):
        pass


def run_with(agent, sandbox):
    """An executor that runs every chunk with this in-test agent."""

    def execute(pieces):
        for index, (work, part) in enumerate(pieces):
            yield index, [run_episode(agent, sandbox, work.harness, e) for e in part]

    return execute


def refuse(pieces):
    assert pieces == [], "a finished episode was run again"
    return iter(())


def roll(root: Path, execute, observer=None):
    return roll_out(root, "ck", {"agent": "demo"}, TASKS, HARNESS, RolloutsConfig(),
                    observer or Observer(), execute)


def test_a_lone_surrogate_in_a_completion_is_replaced_hashed_judged_and_stored(
    tmp_path: Path, sandbox
):
    reference = TASKS[0].reference
    agent = SaysAnything(Completion(f"{reference}\n# \ud800 \udc00\n", tokens_in=4))
    row = run_episode(agent, sandbox, HARNESS, plan_episodes(TASKS, HARNESS)[0])
    assert row["status"] == "ok" and row["passed"], row["error"]
    assert row["completion"] == f"{reference}\n# \ufffd \ufffd\n"
    assert row["completion_sha"] == sha256_hex(row["completion"])
    steps = trajectory_steps(row)
    assert steps[0]["arguments"]["code"] == row["completion"]

    rows = roll(tmp_path, run_with(agent, sandbox))
    table = rollout_table("ck", rows)
    table.to_parquet(tmp_path / "r.parquet", index=False)
    back = pd.read_parquet(tmp_path / "r.parquet")
    pd.testing.assert_frame_equal(back, table)
    assert all(trajectory_steps(stored)[0]["arguments"]["code"].endswith("\ufffd \ufffd\n")
               for _, stored in back.iterrows())
    resumed = Observer()
    again = roll(tmp_path, refuse, resumed)
    assert all(resumed.seen) and sorted(map(str, again)) == sorted(map(str, rows))


def test_a_multi_turn_agents_surrogates_are_safe_in_the_trajectory(sandbox):
    harness = HARNESS.model_copy(update={"max_turns": 2})
    row = run_episode(TalksInSurrogates(), sandbox, harness, plan_episodes(TASKS, harness)[0])
    assert (row["status"], row["passed"], row["turns"]) == ("ok", False, 2)
    assert row["completion"] == "    return \"\ufffd\"\n"
    first, second = trajectory_steps(row)
    assert first["message"] == "thinking \ufffd"
    assert first["arguments"] == {"code": row["completion"], "note\ufffd": ["\ufffd"]}
    assert second["arguments"] == {"code": row["completion"]}
    assert row["trajectory"].isascii()
    rollout_table("ck", [row]).to_parquet(io.BytesIO(), index=False)



def test_a_public_run_that_quotes_a_lone_surrogate_the_program_returned_is_safe_text(sandbox):
    from heldout.episodes.budgets import ExecLimits
    from heldout.episodes.environments import make_environment

    task = Task(id="toy/quote", prompt="def f():\n    pass\n", entry_point="f",
                tests="assert f() == 1\n",
                public_tests="def check():\n    assert f() == 1, 'got ' + f()\n\n\ncheck()\n")
    environment = make_environment(task, sandbox, ExecLimits(5, 256), "{prompt}",
                                   ("run_public_tests", "submit"))
    # The code is valid text; what it returns, quoted by the judge's reason, is not.
    result = environment.call("run_public_tests", {"code": "    return '\\ud800'\n"})
    assert result.data["passed"] is False
    assert "got \ufffd" in result.text and "got \ufffd" in result.data["reason"]
    result.text.encode("utf-8")
    json.dumps(result.data, ensure_ascii=False).encode("utf-8")


class SendsHuge:
    """A multi-turn agent whose first call is `submit` with 40 MiB of code (a 1 MiB cap
    refuses it), then the right answer."""

    code = TASKS[0].reference + "# " + "x" * (40 * 2**20) + "\n"

    def begin(self, task, sample, seed, brief):
        return self

    def act(self, observation, deadline_s):
        if observation.turn == 1:
            return Action("submit", {"code": self.code})
        return Action("submit", {"code": TASKS[0].reference})

    def close(self):
        pass


def test_a_40_mib_tool_argument_is_refused_and_stored_cut_and_a_program_is_stored_once(sandbox):
    harness = HARNESS.model_copy(update={"max_turns": 3})
    row = run_episode(SendsHuge(), sandbox, harness, plan_episodes(TASKS, harness)[0])
    assert (row["status"], row["end_reason"], row["passed"]) == ("ok", "submitted", True)
    assert (row["turns"], row["tool_calls"]) == (2, 2)
    assert row["completion"] == TASKS[0].reference
    refused, submitted = trajectory_steps(row)
    size = len(json.dumps({"code": SendsHuge.code}, separators=(",", ":")).encode())
    assert refused["data"] == {"error": "arguments too large", "bytes": size, "limit": 2**20}
    assert "at most 1,048,576 (1 MiB). It was not run" in refused["observation"]
    code = refused["arguments"]["code"]
    assert code.startswith(TASKS[0].reference) and len(code) < 2100
    assert code.endswith(f"[... cut: {len(SendsHuge.code):,} characters in all]")
    assert submitted["arguments"] == {"code": row["completion"]}
    # The row: kilobytes, not the 2 x 40 MiB it was; the submitted code once, in `completion`.
    stored = len(json.dumps(row))
    assert stored < 2**20, stored
    assert json.loads(row["trajectory"])[1] == {
        **{k: v for k, v in submitted.items() if k != "arguments"}, "arguments": {},
        "code_from": "completion"}
    buffer = io.BytesIO()
    rollout_table("ck", [row]).to_parquet(buffer, index=False)
    assert len(buffer.getvalue()) < 2**20


def test_a_program_under_the_cap_is_run_and_stored_once_in_its_row(sandbox):
    program = TASKS[0].reference + "# " + "y" * (900 * 2**10) + "\n"
    agent = SaysAnything(Completion(program))
    row = run_episode(agent, sandbox, HARNESS, plan_episodes(TASKS, HARNESS)[0])
    assert row["end_reason"] == "submitted" and row["completion"] == program
    assert trajectory_steps(row)[0]["arguments"] == {"code": program}
    assert len(json.dumps(row)) < len(program) + 2**14  # once, not twice

IMPOSSIBLE = {
    "huge prompt tokens": (Completion("\ud800", tokens_in=10**30),
                           "field 'tokens_in': an integer of 31 digits is outside "
                           "0..1000000000000"),
    "negative output tokens": (Completion("    return 1\n", tokens_out=-5),
                               "field 'tokens_out': -5 is outside 0..1000000000000"),
    "nan cost": (Completion("    return 1\n", cost_usd=math.nan),
                 "field 'cost_usd': nan is not a finite number"),
    "tokens as text": (Completion("    return 1\n", tokens_in="many"),
                       "field 'tokens_in': expected an integer, got str"),
    "finish reason not text": (Completion("    return 1\n", finish_reason=None),
                               "field 'finish_reason': expected a string, got NoneType"),
}


@pytest.mark.parametrize("case", IMPOSSIBLE, ids=list(IMPOSSIBLE))
def test_an_agents_impossible_claim_is_an_error_row_not_a_crash(case: str, sandbox):
    completion, message = IMPOSSIBLE[case]
    agent = SaysAnything(completion)
    row = run_episode(agent, sandbox, HARNESS.model_copy(update={"retries": 1}),
                      plan_episodes(TASKS, HARNESS)[0])
    assert agent.calls == 2, "an invalid row is an error, and errors are retried"
    assert row["error"] == f"invalid row: {message}"
    assert (row["status"], row["passed"], row["tokens_in"], row["cost_usd"]) == (
        "error", False, 0, 0.0)
    rollout_table("ck", [row]).to_parquet(io.BytesIO(), index=False)


def test_a_rollout_with_an_endpoint_reporting_10_to_the_30_tokens_finishes_and_resumes(
    tmp_path: Path, sandbox
):
    agent = SaysAnything(Completion("\ud800", tokens_in=10**30))
    rows = roll(tmp_path, run_with(agent, sandbox))
    assert len(rows) == len(TASKS) * HARNESS.n
    assert {row["status"] for row in rows} == {"error"}
    assert {row["error"] for row in rows} == {
        "invalid row: field 'tokens_in': an integer of 31 digits is outside 0..1000000000000"}
    rollout_table("ck", rows).to_parquet(tmp_path / "r.parquet", index=False)
    resumed = Observer()
    assert len(roll(tmp_path, refuse, resumed)) == len(rows) and all(resumed.seen)


# --- the resume cache -------------------------------------------------------------------------


def work() -> EpisodeWork:
    return EpisodeWork("ck", {"agent": "demo"}, agent_context(HARNESS, REPO), HARNESS)


def key(episode) -> str:
    return f"{episode.task.id}/{episode.sample}"


def fake_rows(pieces):
    """A worker that returns a valid row for each episode, without running anything."""
    for index, (work_, part) in enumerate(pieces):
        yield index, [good_row(task_id=e.task.id, sample=e.sample, seed=e.seed,
                               harness=work_.harness.fingerprint()) for e in part]


def store(path: Path, key_: str, stored) -> None:
    """Put `stored` at the key with the MAC this machine's cache key gives it (a sealed store
    ignores the MAC), so that what the checks behind the MAC find is what the reader says."""
    mac = row_mac(machine_cache_key(), key_, stored) if isinstance(stored, str) else None
    with sqlite3.connect(path) as db:
        db.execute("UPDATE episodes SET row = ?, mac = ? WHERE key = ?", (stored, mac, key_))


def test_a_poisoned_cache_is_reported_once_and_its_episodes_run_again(tmp_path: Path):
    episodes = plan_episodes(TASKS, HARNESS)
    path = tmp_path / "episodes.sqlite"
    collect_rollouts(work(), episodes, fake_rows, EpisodeCache(path), key, 2)
    first, second, third, fourth = (key(e) for e in episodes)
    # What a heldout that did not check rows committed (its MAC is right: only the checks of
    # the row itself can find what is wrong), and what an editor holding the cache key left.
    store(path, first, json.dumps(good_row(tokens_in=10**30)))
    store(path, second, json.dumps(good_row(cost_usd=math.nan)))
    store(path, third, "{not json")
    store(path, fourth, json.dumps(good_row(tokens_in=10**30)))

    warnings: list[str] = []
    ran: list[str] = []

    def runs(pieces):
        ran.extend(key(e) for _, part in pieces for e in part)
        return fake_rows(pieces)

    rows = collect_rollouts(work(), episodes, runs, EpisodeCache(path), key, 2,
                            warn=warnings.append)
    assert sorted(ran) == sorted([first, second, third, fourth])
    assert warnings == [
        f"{path}: 4 stored episodes could not be used and will run again: field 'tokens_in': "
        "an integer of 31 digits is outside 0..1000000000000 (2); field 'cost_usd': nan is not "
        "a finite number (1); not JSON (JSONDecodeError) (1)"]
    assert all(row_problems(row) == [] for row in rows)
    rollout_table("ck", rows)
    # The reruns replaced the bad rows: the next resume reads everything, quietly.
    again = collect_rollouts(work(), episodes, refuse, EpisodeCache(path), key, 2,
                             warn=warnings.append)
    assert len(again) == len(episodes) and len(warnings) == 1


def test_a_cached_row_of_another_episode_or_unsealable_is_run_again(tmp_path: Path):
    episodes = plan_episodes(TASKS, HARNESS)[:2]
    path = tmp_path / "sealed.sqlite"
    sealing_key = bytes(range(32))
    collect_rollouts(work(), episodes, fake_rows, EpisodeCache(path, sealing_key), key, 2)
    garbage = "sealed:" + base64.b64encode(b"\x00" * 40).decode()
    store(path, key(episodes[0]), garbage)
    store(path, key(episodes[1]), "sealed:not base64!")
    warnings: list[str] = []
    rows = collect_rollouts(work(), episodes, fake_rows, EpisodeCache(path, sealing_key), key,
                            2, warn=warnings.append)
    assert len(rows) == 2
    assert warnings == [f"{path}: 2 stored episodes could not be used and will run again: "
                        "cannot be unsealed (another key, or altered) (2)"]

    plain = tmp_path / "plain.sqlite"
    collect_rollouts(work(), episodes, fake_rows, EpisodeCache(plain), key, 2)
    store(plain, key(episodes[0]), json.dumps(good_row(task_id="other", seed=episodes[0].seed,
                                                       harness=HARNESS.fingerprint())))
    collect_rollouts(work(), episodes, fake_rows, EpisodeCache(plain), key, 2,
                     warn=warnings.append)
    assert warnings[1].endswith(f"1 stored episode could not be used and will run again: field "
                                f"'task_id': 'other' is not this episode's "
                                f"{episodes[0].task.id!r} (1)")


def test_a_worker_returning_an_invalid_row_commits_an_error_row(tmp_path: Path):
    episodes = plan_episodes(TASKS, HARNESS)[:2]

    def lies(pieces):
        for index, (_, part) in enumerate(pieces):
            yield index, [good_row(task_id=e.task.id, sample=e.sample, seed=e.seed,
                                   harness="forged", tokens_out=10**30) for e in part]

    cache = EpisodeCache(tmp_path / "episodes.sqlite")
    rows = collect_rollouts(work(), episodes, lies, cache, key, 2)
    assert [row["error"] for row in rows] == [
        "invalid row: field 'tokens_out': an integer of 31 digits is outside 0..1000000000000"
    ] * 2
    assert {row["harness"] for row in rows} == {HARNESS.fingerprint()}
    assert list(cache.get_many([key(e) for e in episodes]).values()) == rows


# --- task files -------------------------------------------------------------------------------

GOOD = {"id": "ok", "prompt": "def f(x):\n", "entry_point": "f", "tests": "assert True\n"}


def line(**changes) -> str:
    return json.dumps({**GOOD, **changes})


def raw(fragment: str) -> str:
    """A line with a fragment of raw JSON text as its last field (NaN, escapes, depth)."""
    return json.dumps(GOOD)[:-1] + ", " + fragment + "}"


RULE = "ids and groups become file names and MLflow tags"
SURROGATE = ("holds a lone surrogate '\\ud800' at position 3, which is not text (an unpaired "
             "\\u escape)")
BAD_TASKS = {
    "nul in id": (line(id="a\x00b"), "id", "must not contain control characters, found '\\x00' "
                                           f"at position 2; {RULE}"),
    "newline in group": (line(group="g\n1"), "group", "must not contain control characters, "
                                                      f"found '\\n' at position 2; {RULE}"),
    "tab in id": (line(id="\ta"), "id",
                  f"must not contain control characters, found '\\t' at position 1; {RULE}"),
    "bidi override in id": (line(id="a\u202eb"), "id", "must not contain control characters, "
                                                       f"found '\\u202e' at position 2; {RULE}"),
    "dot-dot in id": (line(id="x/../../etc"), "id", f"must not have a '..' path part; {RULE}"),
    "dot-dot group": (line(group=".."), "group", f"must not have a '..' path part; {RULE}"),
    "absolute id": (line(id="/etc/passwd"), "id", f"must not start with '/' or '\\'; {RULE}"),
    "entry point not a name": (line(entry_point="has-close"), "entry_point",
                               "must be a Python identifier (the function's name), got "
                               "'has-close'"),
    "entry point a keyword": (line(entry_point="class"), "entry_point",
                              "'class' is a Python keyword, not a function name"),
    "zero timeout": (line(runtime={"timeout_s": 0}), "runtime.timeout_s",
                     "must be more than 0 and at most 3600 seconds, got 0.0"),
    "day-long timeout": (line(runtime={"timeout_s": 86400}), "runtime.timeout_s",
                         "must be more than 0 and at most 3600 seconds, got 86400.0"),
    "tiny memory": (line(runtime={"memory_mb": 8}), "runtime.memory_mb",
                    "must be between 16 and 65536 (MB), got 8"),
    "huge memory": (line(runtime={"memory_mb": 10**9}), "runtime.memory_mb",
                    "must be between 16 and 65536 (MB), got 1000000000"),
    "nan in metadata": (raw('"metadata": {"score": NaN}'), "metadata.score",
                        "non-finite number NaN: numbers must be finite"),
    "infinity in a list": (raw('"metadata": {"xs": [1, -Infinity]}'), "metadata.xs.1",
                           "non-finite number -Infinity: numbers must be finite"),
    "a float past the largest": (raw('"metadata": {"x": 1e999}'), "metadata.x",
                                 "non-finite number 1e999 (past the largest float): numbers "
                                 "must be finite"),
    "nan timeout": (raw('"runtime": {"timeout_s": NaN}'), "runtime.timeout_s",
                    "non-finite number NaN: numbers must be finite"),
    "lone surrogate": (raw('"reference": "ab\\ud800"'), "reference", SURROGATE),
    "deep nesting": (raw('"metadata": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}"),
                     "metadata", "nested deeper than 64 levels of arrays and objects"),
}


@pytest.mark.parametrize("case", BAD_TASKS, ids=list(BAD_TASKS))
def test_a_bad_task_line_is_one_problem_naming_line_and_field(case: str):
    text, field, message = BAD_TASKS[case]
    with pytest.raises(InputFileError) as raised:
        load_jsonl_bytes(f"{line(id='first')}\n{text}\n".encode(), "tasks.jsonl")
    assert [(p.line, p.field, p.message) for p in raised.value.problems] == [(2, field, message)]


def test_depth_is_checked_before_parsing_and_64_levels_are_allowed():
    nested = json.dumps({"x": json.loads("[" * 62 + "]" * 62)})  # 64 with record and metadata
    [task] = load_jsonl_bytes(raw(f'"metadata": {nested}').encode(), "t.jsonl")
    assert task.metadata["x"] == json.loads("[" * 62 + "]" * 62)
    with pytest.raises(InputFileError) as raised:
        load_jsonl_bytes(("[" * 200_000).encode(), "t.jsonl")
    assert raised.value.problems[0].message == "nested deeper than 64 levels of arrays and objects"
    too_deep = json.dumps({"x": json.loads("[" * 63 + "]" * 63)})
    with pytest.raises(ValueError, match="is nested deeper than 64 levels"):
        Task.model_validate({**GOOD, "metadata": json.loads(too_deep)})


class CasesTask(Task):
    """A kind whose tests are JSON text its own validator parses (as python-program's are)."""

    kind: Literal["cases"] = "cases"

    @field_validator("tests")
    @classmethod
    def _cases(cls, value: str) -> str:
        json.loads(value)
        return value


def test_a_kinds_own_parse_of_deep_json_text_is_a_problem_not_a_crash(monkeypatch):
    monkeypatch.setitem(TASK_KINDS._plugins, "cases",
                        Plugin("cases", "tests.pipeline.test_robust_inputs:CasesTask", "CasesTask"))
    text = line(kind="cases", tests="[" * 100_000)
    with pytest.raises(InputFileError) as raised:
        load_jsonl_bytes(text.encode(), "t.jsonl")
    assert [(p.line, p.field, p.message) for p in raised.value.problems] == [
        (1, None, "a field's text (JSON its kind parses, such as its tests) is nested too "
                  "deeply to parse")]


def test_tasks_validate_exits_2_naming_file_line_and_field_without_a_traceback(tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(line(id="first") + "\n" + "\n".join(text for text, _, _ in BAD_TASKS.values())
                    + "\n", encoding="utf-8")
    done = subprocess.run([str(REPO / ".venv/bin/heldout"), "tasks", "validate", str(path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for number, (_, field, message) in enumerate(BAD_TASKS.values(), start=2):
        assert f"{path}:{number}: field '{field}': {message}" in done.stderr


def test_every_currently_valid_task_stays_valid(tmp_path: Path):
    humaneval = load_tasks("humaneval")
    assert len(humaneval) == 164
    again = load_tasks(write_jsonl(tmp_path / "he.jsonl", [t.to_record() for t in humaneval]))
    assert [t.content_hash for t in again] == [t.content_hash for t in humaneval]
    edge = [task_record("a"), task_record("HumanEval/7", group="fam/a..b"),
            {**GOOD, "id": "café 😀", "entry_point": "match",
             "runtime": {"timeout_s": 3600, "memory_mb": 16},
             "metadata": {"big": 10**100, "emoji": "\ud83d\ude00", "n": None, "x": 1.5e300}},
            {**GOOD, "id": "m", "runtime": {"timeout_s": 0.001, "memory_mb": 65536}}]
    tasks = load_tasks(write_jsonl(tmp_path / "edge.jsonl", edge))
    assert [t.id for t in tasks] == ["a", "HumanEval/7", "café 😀", "m"]
    assert tasks[2].metadata["emoji"] == "😀"
    assert TaskRuntime(timeout_s=2.5, memory_mb=2048).memory_mb == 2048
