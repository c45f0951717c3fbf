"""From rollout rows to per-task success counts and per-checkpoint summaries.

The unit is the task: an episode only contributes to its task's count c out of n, and every
interval comes from resampling tasks, or their groups (heldout.statistics.bca).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from heldout.episodes.rows import FAILURES
from heldout.errors import HeldoutError, ParamsError
from heldout.statistics.grouping import group_labels
from heldout.statistics.power import Reruns, too_few_runs
from heldout.statistics.summary import summarize_counts

COUNT_COLUMNS = ("n", "c", *(failure.count for failure in FAILURES))
KEY_COLUMNS = ["checkpoint", "task_id"]


class IncomparableRolloutsError(HeldoutError):
    """Rollouts produced under different harnesses or on different tasks."""


class CanaryError(HeldoutError):
    """The oracle failed a task, the blind agent passed one, or the stacker's pass count was
    not the one its hashes gave: the harness is broken."""


def per_task_counts(rollouts: pd.DataFrame) -> pd.DataFrame:
    """One row per (checkpoint, task): episodes n, successes c, and what went wrong.
    Errored episodes stay in n: an error is a failure, counted separately, never dropped."""
    status = rollouts["status"]
    table = rollouts.assign(
        n=1, c=rollouts["passed"].astype(int),
        **{failure.count: (status == failure.status).astype(int) for failure in FAILURES},
    )
    return _sum_per_task(table)


def pass_at_1(rollouts: pd.DataFrame) -> float:
    """The task average of per-task pass rates of one run (errored episodes are failures)."""
    counts = per_task_counts(rollouts)
    return float((counts["c"] / counts["n"]).mean())


def combine_counts(parts: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """What per_task_counts of the concatenated rollouts gives, from per_task_counts of each
    part (a rollout file, say), so that all the episodes never have to be in memory at once.
    Keys of parts read as categoricals come back as strings, the rollout files' type."""
    table = pd.concat([part.astype(dict.fromkeys(KEY_COLUMNS, "string")) for part in parts],
                      ignore_index=True)
    return _sum_per_task(table)


def _sum_per_task(table: pd.DataFrame) -> pd.DataFrame:
    # observed=True: for categorical keys, only the (checkpoint, task) pairs that occur.
    grouped = table.groupby(KEY_COLUMNS, sort=False, observed=True)[list(COUNT_COLUMNS)].sum()
    return grouped.reset_index().sort_values(KEY_COLUMNS, ignore_index=True)


def check_comparable(rollouts: dict[str, pd.DataFrame], harness_fingerprint: str) -> None:
    """Refuse to summarize side by side what was not produced the same way."""
    for name, table in rollouts.items():
        fingerprints = set(table["harness"].unique())
        if fingerprints != {harness_fingerprint}:
            raise IncomparableRolloutsError(
                f"rollouts of '{name}' were produced under harness "
                f"{', '.join(sorted(f[:12] for f in fingerprints))}, not the current "
                f"{harness_fingerprint[:12]}: re-run its rollouts (dvc repro)"
            )
    task_sets = {name: frozenset(t["task_id"].unique()) for name, t in rollouts.items()}
    reference_name, reference = next(iter(task_sets.items()))
    for name, tasks in task_sets.items():
        if tasks != reference:
            raise IncomparableRolloutsError(
                f"'{name}' and '{reference_name}' were rolled out on different tasks "
                f"({len(tasks ^ reference)} differ): re-run their rollouts on the same split"
            )


def supported_k(n: int) -> int:
    """The largest k pass@k is read at from n episodes per task: k ≤ n/2 (and 1 at any n, where
    it is c/n). The unbiased estimator's variance grows as k nears n, and at k = n it is one
    indicator per task (whether any of its n episodes passed)."""
    return max(1, n // 2)


def default_ks(n: int, asked: int = 0) -> list[int]:
    """Powers of two up to supported_k(n), or up to the k `asked` for and that k itself: a
    k above n/2 is reported only when asked for (`heldout score --ks`), and marked
    (beyond_half)."""
    top = asked or supported_k(n)
    powers = [2**i for i in range(top.bit_length())]
    return powers + ([asked] if asked and asked not in powers else [])


class ScoreConfig(BaseModel):
    """`params.score`: how far the val scores read pass@k and pass^k."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_k: int = Field(default=0, ge=0, description="the largest k of the val pass@k and "
                       "pass^k, which needs harness.n >= 2k; 0: up to n/2 of harness.n")

    def ks(self, n: int) -> list[int]:
        """The val scores' ks at n episodes per task (harness.n); a max_k above what n
        supports is refused, naming the n it needs: params cannot size the val n themselves,
        since n is part of the harness fingerprint every val number is compared under."""
        if self.max_k > supported_k(n):
            raise ParamsError(f"params.yaml: score.max_k: pass@{self.max_k} needs harness.n >= "
                              f"{2 * self.max_k} (pass@k is read at k <= n/2); harness.n is {n}")
        return default_ks(n, self.max_k)


def beyond_half(ks: Iterable[int], n: int) -> list[int]:
    """The ks above n/2, whose pass@k is close to one indicator per task."""
    return [k for k in ks if 2 * k > n and k > 1]


def summarize_checkpoint(counts: pd.DataFrame, ks: list[int], seed: int = 0,
                         groups: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every estimator for one checkpoint's per-task counts, plus the rates that sit beside
    every pass rate (errors, timeouts, truncations, refusals per episode). `groups` maps task
    id to group (heldout.statistics.grouping): pass@1's interval then rests on the groups."""
    n = counts["n"].to_numpy()
    c = counts["c"].to_numpy()
    summary = summarize_counts(c, n, [k for k in ks if k <= n.min()], seed=seed,
                               groups=group_labels(counts["task_id"], groups))
    episodes = int(n.sum())
    return {
        "n_tasks": summary.n_tasks,
        "episodes": episodes,
        "pass_at_1": summary.pass_at_1.to_json(),
        "pass_at_k": {str(k): v for k, v in summary.pass_at_k.items()},
        "pass_hat_k": {str(k): v for k, v in summary.pass_hat_k.items()},
        "failure_capable": summary.failure_capable,
        "all_fail": summary.all_fail,
        "all_pass": int(np.sum(c == n)),
        "design_effect": asdict(summary.design_effect) if summary.design_effect else None,
        **{failure.rate: float(counts[failure.count].sum() / episodes) for failure in FAILURES},
    }


def canary_failures(oracle: pd.DataFrame, blind: pd.DataFrame) -> dict[str, list[str]]:
    """Tasks the oracle failed and tasks the blind agent passed."""
    return {
        "oracle_failed": sorted(oracle.loc[oracle["c"] < oracle["n"], "task_id"]),
        "blind_passed": sorted(blind.loc[blind["c"] > 0, "task_id"]),
    }


def stacker_failures(stacker: pd.DataFrame, expected: Iterable[tuple[str, int]],
                     failures: Mapping[str, list[str]]) -> dict[str, Any]:
    """The stacker canary against what its hashes said (heldout.agents.canaries): `stacker`
    holds its episodes (task_id, sample, passed), `expected` the (task id, sample) whose
    submitted guess was the reference. Tasks the oracle failed or the blind agent passed are
    left out (`failures`, canary_failures' answer): there the extremes already report the
    harness or the task broken, and the stacker's guesses would fail or pass with them. Checked
    episode by episode, so a harness that both adds and loses passes is caught too."""
    broken = set(failures.get("oracle_failed", ())) | set(failures.get("blind_passed", ()))
    kept = stacker.loc[~stacker["task_id"].isin(broken)]
    episodes = {(str(task), int(sample)) for task, sample in zip(
        kept["task_id"], kept["sample"], strict=True)}
    passed = {(str(task), int(sample)) for task, sample, ok in zip(
        kept["task_id"], kept["sample"], kept["passed"], strict=True) if ok}
    wanted = {(task, int(sample)) for task, sample in expected} & episodes
    total = max(len(episodes), 1)
    return {
        "stacker_episodes": len(episodes),
        "stacker_expected": len(wanted),
        "stacker_passes": len(passed),
        "stacker_expected_rate": len(wanted) / total,
        "stacker_pass_rate": len(passed) / total,
        "stacker_stacked": [f"{task}#{sample}" for task, sample in sorted(passed - wanted)],
        "stacker_missed": [f"{task}#{sample}" for task, sample in sorted(wanted - passed)],
    }


def canaries_failed(canaries: Mapping[str, Any]) -> bool:
    """Whether any canary misbehaved (canary_failures and stacker_failures together)."""
    return any(canaries.get(key) for key in
               ("oracle_failed", "blind_passed", "stacker_stacked", "stacker_missed"))


def describe_canary_failures(failures: Mapping[str, Any]) -> str:
    parts = []
    if failures["oracle_failed"]:
        parts.append(f"the oracle (reference solutions) failed {len(failures['oracle_failed'])} "
                     f"tasks: {', '.join(failures['oracle_failed'][:20])}")
    if failures["blind_passed"]:
        parts.append(f"the blind agent (an empty body) passed {len(failures['blind_passed'])} "
                     f"tasks: {', '.join(failures['blind_passed'][:20])}")
    extremes = bool(parts)
    parts += _stacker_parts(failures)
    advice = (". Check the sandbox (a missing module, a too-small memory or time limit) and "
              "these tasks' tests before scoring checkpoints." if extremes else
              ". Only the program an episode submits may be judged, once: check what the "
              "harness counts as an episode's answer before scoring checkpoints.")
    return "harness canaries failed, so no score can be trusted: " + "; ".join(parts) + advice


def _stacker_parts(failures: Mapping[str, Any]) -> list[str]:
    stacked, missed = failures.get("stacker_stacked") or [], failures.get("stacker_missed") or []
    if not (stacked or missed):
        return []
    head = (f"the stacker (a skill-free guesser, its pass count known in advance) passed "
            f"{failures.get('stacker_passes')} episodes where {failures.get('stacker_expected')} "
            f"were expected")
    found = []
    if stacked:
        found.append(f"{len(stacked)} passed though the guess submitted was wrong, so the "
                     f"harness lets guesses stack (a tested program, a retry or another "
                     f"submission counted): {', '.join(stacked[:20])}")
    if missed:
        found.append(f"{len(missed)} failed though the guess submitted was the reference, so "
                     f"the harness fails right answers: {', '.join(missed[:20])}")
    return [f"{head}; {'; '.join(found)}"]


def pool_runs(base_runs: list[pd.DataFrame], candidate_runs: list[pd.DataFrame]
              ) -> tuple[pd.DataFrame, pd.DataFrame, Reruns | None]:
    """Both arms over R paired runs (each arm's own run first, then its reruns; run r of the
    two drew the same seeds): each arm's runs as one table, and each run's pass@1 as Reruns
    (None with one run each). In the pooled table the samples of run r are numbered after
    those of run r − 1, so that every episode keeps a row of its own and the exact test's
    sample index stays in the first run; rows in task and sample order. Unequal numbers of
    runs, or a rerun of other tasks than its arm's first run (it would measure the task set,
    not the seeds), are refused."""
    if len(base_runs) != len(candidate_runs):
        raise IncomparableRolloutsError(
            f"reruns pair run by run: got {len(base_runs) - 1} rerun(s) of the base and "
            f"{len(candidate_runs) - 1} of the candidate; rerun both arms as often")
    if len(base_runs) == 1:
        return base_runs[0], candidate_runs[0], None
    refused = too_few_runs(len(base_runs))
    if refused:
        raise IncomparableRolloutsError(refused)
    pooled = []
    # One numbering for both arms, so that run r's samples are the same range in each.
    width = 1 + max(int(table["sample"].max()) for table in (*base_runs, *candidate_runs))
    for arm, runs in (("base", base_runs), ("candidate", candidate_runs)):
        tasks = set(runs[0]["task_id"])
        for number, table in enumerate(runs[1:], start=1):
            if set(table["task_id"]) != tasks:
                raise IncomparableRolloutsError(
                    f"rerun {number} of the {arm} holds other tasks than its first run "
                    f"({len(set(table['task_id']) ^ tasks)} differ): a rerun is the same tasks "
                    "under new seeds")
        together = pd.concat([table.assign(sample=table["sample"] + number * width)
                              for number, table in enumerate(runs)], ignore_index=True)
        pooled.append(together.sort_values(["task_id", "sample"], kind="stable",
                                           ignore_index=True))
    scores = (tuple(pass_at_1(table) for table in runs) for runs in (base_runs, candidate_runs))
    return pooled[0], pooled[1], Reruns(*scores, samples_per_run=width)
