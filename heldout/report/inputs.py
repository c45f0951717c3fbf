"""From two rollout tables to two arms on the same tasks: checked, matched on common task ids,
refused when their harnesses differ (unless allowed), errored episodes made failures."""

from __future__ import annotations

import filecmp
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from heldout.episodes.rows import STATUSES, TEST_CONTENT_COLUMNS, TEST_TEXT_COLUMNS
from heldout.errors import HeldoutError
from heldout.report.formatting import short_fingerprint
from heldout.report.parquet_bounds import UnpacksTooLarge, read_parquet_bounded
from heldout.report.sections import ROLES, Dropped, EpisodeSpan, Harness, PerArm, Tasks
from heldout.statistics.counts import (
    IncomparableRolloutsError,
    per_task_counts,
)
from heldout.statistics.timing import Span, span

REQUIRED_COLUMNS = ("task_id", "sample", "harness", "passed", "status")


class ReportInputError(HeldoutError):
    """Rollout tables the report cannot compare: missing columns, duplicate episodes, no
    common task, a sample index some task lacks."""


@dataclass(frozen=True)
class Arm:
    """One arm restricted to the compared tasks, in the same task order as the other arm."""

    name: str
    counts: pd.DataFrame  # per task: n, c, and a count per failure (rows.FAILURES)
    at_sample: np.ndarray  # per task: did the episode at the exact test's sample index pass?
    # per episode of the compared tasks: task_id, sample and whether it passed (an error fails)
    episodes: pd.DataFrame | None = None
    span: Span | None = None  # when its episodes started; None: not recorded

    @property
    def rates(self) -> np.ndarray:
        return (self.counts["c"] / self.counts["n"]).to_numpy(float)

    def run_rates(self, samples_per_run: int, runs: int) -> np.ndarray:
        """Each task's pass rate in each of `runs` pooled runs, shape (runs, tasks) in the
        arm's task order: run r holds samples r·samples_per_run onward
        (heldout.statistics.counts.pool_runs)."""
        if self.episodes is None:
            raise ValueError(f"{self.name}: no episodes kept to split into runs")
        run = (self.episodes["sample"] // samples_per_run).clip(upper=runs - 1)
        table = self.episodes.assign(run=run).pivot_table(
            index="run", columns="task_id", values="passed", aggfunc="mean")
        return table.reindex(index=range(runs), columns=self.counts.index).to_numpy(float)

    def first_rates(self, episodes: np.ndarray) -> np.ndarray:
        """Each task's pass rate over its first `episodes[i]` episodes in sample order, in the
        arm's task order."""
        if self.episodes is None:
            raise ValueError(f"{self.name}: no episodes kept")
        ordered = self.episodes.sort_values(["task_id", "sample"], kind="stable")
        rank = ordered.groupby("task_id").cumcount().to_numpy()
        keep = pd.Series(episodes, index=self.counts.index).reindex(ordered["task_id"])
        first = ordered[rank < keep.to_numpy()]
        return first.groupby("task_id")["passed"].mean().reindex(self.counts.index).to_numpy(
            float)


def same_input_warning(base: Path, candidate: Path) -> str | None:
    """Why comparing these two files compares one set of samples with itself (one file given
    twice, or two files of identical bytes), or None. Such a comparison runs, trivially: every
    difference is 0, so it says nothing of either model, and is most often a slip of the
    command line rather than a question."""
    try:
        if base.samefile(candidate):
            what = f"A and B are the same file: {base}"
        elif filecmp.cmp(base, candidate, shallow=False):
            what = f"A and B have identical content ({base} and {candidate})"
        else:
            return None
    except OSError:  # a file that cannot be read is read_rollouts' to report
        return None
    return (f"{what}; the comparison is of identical samples, so every difference is 0 and the "
            "verdict says nothing about either")


# What the report reads of a rollout file: all but the free text no estimate uses, a file's
# bulk (what the agent wrote and was shown, the judge's messages, each step's clock).
UNREAD_COLUMNS = (*TEST_CONTENT_COLUMNS, *TEST_TEXT_COLUMNS, "step_timings")
# The most the columns read may unpack to: a file of a few KiB can hold gigabytes.
MAX_READ_BYTES = 256 << 20


def read_rollouts(path: Path, read_too: tuple[str, ...] = ()) -> pd.DataFrame:
    """A rollout Parquet file, checked to hold what the report needs; its UNREAD_COLUMNS but
    `read_too` (the judge's messages, the completions to judge again) are never unpacked, and
    the rest no more than MAX_READ_BYTES."""
    try:
        table = read_parquet_bounded(
            path, tuple(c for c in UNREAD_COLUMNS if c not in read_too), MAX_READ_BYTES)
    except FileNotFoundError:
        raise ReportInputError(f"{path}: no such file") from None
    except UnpacksTooLarge as large:
        raise ReportInputError(
            f"{path}: its columns unpack to {large.size:,} bytes; heldout reads at most "
            f"{MAX_READ_BYTES:,} (256 MiB) of a rollout file, its completions left out") from None
    except Exception as error:  # noqa: BLE001 - pyarrow raises several unrelated types
        raise ReportInputError(f"{path}: not a readable Parquet file: {error}") from None
    check_passed(table, str(path))
    check_rollouts(table, str(path))
    return table.assign(passed=table["passed"].astype(bool))


# Statuses a passing row may have: a verdict was reached ("ok"), or reached on a text the
# token budget cut ("truncated": heldout.episodes.episode scores it and keeps its verdict).
# Any other status means no verdict, so a file saying such an episode passed is wrong.
VERDICT_STATUSES = ("ok", "truncated")
SHOWN_AT_MOST = 5


def _is_flag(value: object) -> bool:
    return isinstance(value, (bool, np.bool_)) or (
        isinstance(value, (int, np.integer)) and int(value) in (0, 1))


def _where(table: pd.DataFrame, index: int) -> str:
    row = table.iloc[index]
    return f"row {index} (task {row['task_id']!r}, sample {row['sample']})"


def check_passed(table: pd.DataFrame, label: str) -> None:
    """A rollout file's `passed` holds booleans (or integers 0/1) only, and is true only where
    the episode reached a verdict: the strings "True"/"False", 2, -1, 0.5 or a missing value
    would otherwise be counted as whatever `astype(bool)` makes of them."""
    if not {"task_id", "sample", "passed", "status"} <= set(table.columns) or table.empty:
        return  # check_rollouts names what is missing
    column = table["passed"]
    if pd.api.types.is_bool_dtype(column.dtype) or pd.api.types.is_integer_dtype(column.dtype):
        bad = (column.isna() | ~column.isin([0, 1])).to_numpy(bool)
    else:
        bad = ~np.fromiter(map(_is_flag, column), bool, len(column))
    lines = [f"{label}: {_where(table, i)}: field 'passed' is {_value(column.iloc[i])}; "
             "passed must be a boolean (or an integer 0/1)" for i in np.flatnonzero(bad)]
    if not lines:
        status = table["status"]
        claims = (column.astype(bool) & status.notna() & ~status.isin(VERDICT_STATUSES))
        lines = [f"{label}: {_where(table, i)}: passed is true but status is "
                 f"{status.iloc[i]!r}: an episode that ended in {status.iloc[i]!r} has no "
                 f"verdict to pass (only {' or '.join(VERDICT_STATUSES)} rows may pass)"
                 for i in np.flatnonzero(claims.to_numpy(bool))]
    if lines:
        more = len(lines) - SHOWN_AT_MOST
        raise ReportInputError("\n".join(lines[:SHOWN_AT_MOST]
                                          + ([f"... and {more} more rows"] if more > 0 else [])))


def _value(value: object) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return "missing (null)"
    if isinstance(value, np.generic):
        value = value.item()
    return f"{value!r} ({type(value).__name__})"


def check_rollouts(table: pd.DataFrame, label: str) -> None:
    missing = [column for column in REQUIRED_COLUMNS if column not in table.columns]
    if missing:
        raise ReportInputError(
            f"{label}: missing column(s) {', '.join(missing)}; a rollout table has one row per "
            f"episode with at least {', '.join(REQUIRED_COLUMNS)}"
        )
    if table.empty:
        raise ReportInputError(f"{label}: no episodes")
    for column in REQUIRED_COLUMNS:
        if table[column].isna().any():
            row = int(np.flatnonzero(table[column].isna().to_numpy())[0])
            raise ReportInputError(f"{label}: row {row}: field '{column}' is missing")
    unknown = sorted(set(table["status"]) - set(STATUSES))
    if unknown:
        raise ReportInputError(
            f"{label}: field 'status' holds {', '.join(unknown)}; expected one of "
            f"{', '.join(STATUSES)}"
        )
    duplicated = table.duplicated(["task_id", "sample"])
    if duplicated.any():
        row = table[duplicated].iloc[0]
        raise ReportInputError(
            f"{label}: task '{row['task_id']}' has sample {row['sample']} more than once; "
            "a rollout table holds each episode once"
        )


def _arm_names(
    tables: tuple[pd.DataFrame, pd.DataFrame], given: tuple[str | None, str | None]
) -> tuple[str, str]:
    names = []
    for table, name, role in zip(tables, given, ROLES, strict=True):
        checkpoints = table["checkpoint"].unique() if "checkpoint" in table.columns else []
        default = str(checkpoints[0]) if len(checkpoints) == 1 else role
        names.append(name or default)
    if names[0] == names[1]:  # two runs of one checkpoint: the labels must still tell them apart
        return f"{names[0]} (base)", f"{names[1]} (candidate)"
    return names[0], names[1]


def _harnesses(
    tables: tuple[pd.DataFrame, pd.DataFrame], names: tuple[str, str], allow_mismatch: bool
) -> Harness:
    fingerprints = [sorted(set(table["harness"].astype(str))) for table in tables]
    match = fingerprints[0] == fingerprints[1] and len(fingerprints[0]) == 1
    if not match and not allow_mismatch:
        described = " and ".join(
            f"{name} under {', '.join(map(short_fingerprint, found))}"
            for name, found in zip(names, fingerprints, strict=True)
        )
        raise IncomparableRolloutsError(
            f"different harnesses: {described}. Numbers produced under different templates, "
            "sampling, budgets, sandboxes or scorers are not comparable; re-run one arm under "
            "the other's harness, or allow the mismatch (heldout compare "
            "--allow-harness-mismatch) and the report prints it in its headline"
        )
    return Harness(match, PerArm(*fingerprints))


def _episode_passes(table: pd.DataFrame) -> pd.Series:
    """An errored episode is a failure whatever its `passed` says (DESIGN §3)."""
    return table["passed"].astype(bool) & (table["status"] != "error")


def _task_counts(table: pd.DataFrame) -> pd.DataFrame:
    scored = table.assign(checkpoint="arm", passed=_episode_passes(table))
    return per_task_counts(scored).drop(columns="checkpoint").set_index("task_id")


def _compared_episodes(table: pd.DataFrame, task_ids: list[str]) -> pd.DataFrame:
    kept = table["task_id"].isin(task_ids)
    return pd.DataFrame({"task_id": table.loc[kept, "task_id"].to_numpy(),
                         "sample": table.loc[kept, "sample"].to_numpy(int),
                         "passed": _episode_passes(table[kept]).to_numpy(float)})


def _passes_at_sample(
    table: pd.DataFrame, sample: int, task_ids: list[str], name: str
) -> np.ndarray:
    at_sample = table[table["sample"] == sample]
    passes = pd.Series(_episode_passes(at_sample).to_numpy(bool), index=at_sample["task_id"])
    missing = [task for task in task_ids if task not in passes.index]
    if missing:
        raise ReportInputError(
            f"{name} has no episode with sample index {sample} for {len(missing)} compared "
            f"task(s) (first: {missing[0]}); choose a sample index every task has (--sample)"
        )
    return passes.reindex(task_ids).to_numpy(bool)


def _match_tasks(
    counts: tuple[pd.DataFrame, pd.DataFrame], names: tuple[str, str]
) -> tuple[list[str], Tasks]:
    ids = [set(table.index) for table in counts]
    common = sorted(ids[0] & ids[1])
    if not common:
        raise ReportInputError(
            f"{names[0]} ({len(ids[0])} tasks) and {names[1]} ({len(ids[1])} tasks) share no "
            "task id: compare rollouts of the same split"
        )
    dropped = (
        Dropped(len(only), sorted(only), f"not in {other}'s rollouts" if only else "")
        for only, other in ((ids[0] - ids[1], names[1]), (ids[1] - ids[0], names[0]))
    )
    episodes = (
        EpisodeSpan(int(table.loc[common, "n"].min()), int(table.loc[common, "n"].max()))
        for table in counts
    )
    tasks = Tasks(len(common), PerArm(*map(len, ids)), PerArm(*dropped), PerArm(*episodes))
    return common, tasks


def read_span(table: pd.DataFrame) -> Span | None:
    """When a rollout table's episodes started, or None where its rows do not say."""
    return span(table["started_at"]) if "started_at" in table.columns else None


@dataclass(frozen=True)
class PairedArms:
    arms: PerArm[Arm]
    tasks: Tasks
    harness: Harness


def pair_arms(
    base: pd.DataFrame,
    candidate: pd.DataFrame,
    *,
    names: tuple[str | None, str | None],
    sample: int,
    allow_harness_mismatch: bool,
) -> PairedArms:
    tables = (base, candidate)
    for table, role in zip(tables, ROLES, strict=True):
        check_rollouts(table, f"the {role}'s rollouts")
    arm_names = _arm_names(tables, names)
    harness = _harnesses(tables, arm_names, allow_harness_mismatch)
    counts = (_task_counts(base), _task_counts(candidate))
    task_ids, tasks = _match_tasks(counts, arm_names)
    arms = (
        Arm(name, table_counts.loc[task_ids], _passes_at_sample(table, sample, task_ids, name),
            _compared_episodes(table, task_ids), read_span(table))
        for name, table_counts, table in zip(arm_names, counts, tables, strict=True)
    )
    return PairedArms(PerArm(*arms), tasks, harness)
