"""Whether a judge's verdicts can be quoted: its agreement with people on a labeled slice, and
whether its failing rows fail for one reason only (003 §3).

A judge is a program here, and "a program judge is held to the same bar" as a model judge:
measured against hand labels (a person's pass or fail for a row), and "under 0.8 agreement, fix
the judge before quoting any number it produced". Agreement is the share of labeled rows whose
verdict equals the label, with its Wilson interval; the two halves are that share on the rows
people passed (how many right answers the judge passes) and on those they failed (how many
wrong answers it fails), each with its n and interval, since a judge that passes everything
agrees with a slice of mostly right answers. Re-judge flips count the labeled rows whose verdict
changed when judged again: a flaky judge. Rows are taken as independent draws: label one sample
per task where the tasks' samples are alike.

The gate compares the point estimate with the threshold (the issue's words: "agreement is below
0.8"); the interval's lower bound is reported beside it, not gated on, so a slice of 60 rows
that agrees on 50 (0.83, lower bound 0.72) is trusted, and says how little it rests on.

The grader-reason check: "post no score when one grader reason covers ≥ 95% of rows". A failing
row's reason is its status and what the judge said, reduced to its kind (failure_reason): a
sandbox that cannot import, a judge whose every program times out, or a task file whose tests
never load fail every row alike, which is a broken grader, not a weak model. A failed assertion
of the task's own tests is that task's verdict on a wrong answer, so its reason keeps the task
and the line: a model that is wrong everywhere fails at many places, and does not trip the
check. An exception the candidate raised when called is its type alone: a missing module
fails every task alike.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator

from heldout.errors import HeldoutError
from heldout.statistics.decision import GRADER_REASON, JUDGE_UNTRUSTED, Gate
from heldout.statistics.intervals import Interval, wilson_interval

MIN_LABELED = 60  # the slice: fewer labels measure agreement to ±10 points or worse
TRUST_THRESHOLD = 0.8
ONE_REASON_SHARE = 0.95
# Below this many failing rows one reason covering them all is as likely chance as a broken
# grader (a strong model's few failures can all be one timeout).
ONE_REASON_MIN_FAILURES = 20
JUDGE_PREFIX = "[heldout judge] "
SCHEMA = "heldout.judge_trust/1"  # TRUST.json, as `heldout judge-trust` writes it
JUDGE_DIR = "judge"  # where a project keeps its TRUST.json: a dependency of the report stage
# "AssertionError at tests.py line 12: message": an assert of the task's tests failed there.
# Another exception "at tests.py line 12" is one the candidate raised when called: its type.
TEST_ASSERTION = re.compile(r"^AssertionError at tests\.py line (\d+)")
EXCEPTION_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Exit|Interrupt))\b")


@dataclass(frozen=True)
class Share:
    """Rows that agree out of the rows counted, with the Wilson interval of the share."""

    agree: int
    rows: int
    interval: Interval | None  # None when no row was counted

    def to_json(self) -> dict[str, Any]:
        return {"agree": self.agree, "rows": self.rows,
                "interval": None if self.interval is None else self.interval.to_json()}


def share(agree: int, rows: int) -> Share:
    return Share(agree, rows, wilson_interval(agree, rows) if rows else None)


@dataclass(frozen=True)
class JudgeTrust:
    """The judge measured against hand labels. `flips`: labeled rows judged again whose verdict
    changed, of `rejudged` (None when not judged again)."""

    agreement: Share
    labeled_pass: Share  # the rows people passed: how many of them the judge passed
    labeled_fail: Share  # the rows people failed: how many of them the judge failed
    kappa: float | None  # Cohen's kappa: agreement beyond what the two base rates give by chance
    threshold: float
    rejudged: int | None = None
    flips: int | None = None

    @property
    def trusted(self) -> bool:
        return self.estimate >= self.threshold

    @property
    def estimate(self) -> float:
        assert self.agreement.interval is not None  # judge_agreement refuses an empty slice
        return float(self.agreement.interval.estimate)

    def describe(self) -> str:
        interval = self.agreement.interval
        assert interval is not None
        return (f"the judge agrees with hand labels on {self.agreement.agree} of "
                f"{self.agreement.rows} labeled rows ({100 * self.estimate:.1f}%, 95% interval "
                f"{100 * float(interval.low):.1f}-{100 * float(interval.high):.1f}%)")

    def gate(self) -> Gate | None:
        """The voiding gate of a verdict scored by this judge, or None when it is trusted."""
        if self.trusted:
            return None
        return Gate(JUDGE_UNTRUSTED, f"{self.describe()}, below {100 * self.threshold:.0f}%: "
                                     "fix the judge before quoting any number it produced", True)

    def to_json(self) -> dict[str, Any]:
        return {"agreement": self.agreement.to_json(), "labeled_pass": self.labeled_pass.to_json(),
                "labeled_fail": self.labeled_fail.to_json(), "kappa": self.kappa,
                "threshold": self.threshold, "trusted": self.trusted,
                "rejudged": self.rejudged, "flips": self.flips}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeTrust:
        def read(part: Mapping[str, Any]) -> Share:
            return share(int(part["agree"]), int(part["rows"]))

        return cls(read(data["agreement"]), read(data["labeled_pass"]), read(data["labeled_fail"]),
                   data.get("kappa"), float(data["threshold"]), data.get("rejudged"),
                   data.get("flips"))


class JudgeConfig(BaseModel):
    """`params.judge`: the TRUST.json of the pinned harness's judge (written by `heldout
    judge-trust` on hand-labeled val rows; under judge/, which the report stage depends on),
    and the agreement below which the report voids the verdict. Empty: not measured, and the
    protocol card says so."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trust: str = ""
    min_agreement: float = Field(default=TRUST_THRESHOLD, gt=0, le=1)

    @field_validator("trust")
    @classmethod
    def _under_judge(cls, value: str) -> str:
        parts = PurePosixPath(value).parts
        if value and (parts[:1] != (JUDGE_DIR,) or ".." in parts or len(parts) < 2):
            raise ValueError(f"{value!r}: keep TRUST.json under {JUDGE_DIR}/ (e.g. "
                             f"{JUDGE_DIR}/trust.json), which the report stage depends on, so "
                             "a new measurement re-draws the report")
        return value


def trust_from_record(record: Any, source: str) -> JudgeTrust:
    """The JudgeTrust a TRUST.json holds (its shares' intervals recomputed); a HeldoutError
    naming `source` when it is not one."""
    refused = HeldoutError(f"{source}: not a TRUST.json `heldout judge-trust` wrote")
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise refused
    try:
        return JudgeTrust.from_json(record)
    except (KeyError, TypeError, ValueError):
        raise refused from None


def judge_agreement(judged: Sequence[bool], labels: Sequence[bool], *,
                    threshold: float = TRUST_THRESHOLD,
                    rejudged: Sequence[bool] | None = None) -> JudgeTrust:
    """The judge's verdicts against people's labels, row for row; `rejudged`: the same rows'
    verdicts from judging them again. Fewer than MIN_LABELED rows is a ValueError naming the
    rule."""
    if len(judged) != len(labels) or (rejudged is not None and len(rejudged) != len(judged)):
        raise ValueError("one verdict, one label (and one verdict judged again) per row")
    if len(labels) < MIN_LABELED:
        raise ValueError(f"{len(labels)} labeled rows: judge trust needs at least {MIN_LABELED} "
                         "hand-labeled rows (fewer measure agreement to ±10 points or worse)")
    if not 0 < threshold <= 1:
        raise ValueError(f"the agreement threshold must be in (0, 1], got {threshold}")
    pairs = list(zip(map(bool, judged), map(bool, labels), strict=True))
    on_pass = [verdict for verdict, label in pairs if label]
    on_fail = [not verdict for verdict, label in pairs if not label]
    flips = None if rejudged is None else sum(
        bool(again) != first for again, (first, _) in zip(rejudged, pairs, strict=True))
    return JudgeTrust(
        agreement=share(sum(verdict == label for verdict, label in pairs), len(pairs)),
        labeled_pass=share(sum(on_pass), len(on_pass)),
        labeled_fail=share(sum(on_fail), len(on_fail)),
        kappa=cohen_kappa(pairs), threshold=threshold,
        rejudged=None if rejudged is None else len(rejudged), flips=flips)


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """(observed − chance agreement) / (1 − chance), chance from the two pass rates; None when
    both judge and people gave one verdict to every row (chance is then 1)."""
    rows = len(pairs)
    observed = sum(a == b for a, b in pairs) / rows
    judge_pass, people_pass = (sum(side) / rows for side in zip(*pairs, strict=True))
    chance = judge_pass * people_pass + (1 - judge_pass) * (1 - people_pass)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def failure_reason(task_id: str, status: str, error: str) -> str:
    """A failing row's reason, reduced to its kind: "timeout", "error: ImportError", "failed:
    the solution did not load: NameError", "failed: TypeError" (the candidate raised it when
    called), or, for an assert of the task's tests, "failed: AssertionError at HumanEval/3
    tests.py line 12" (the task's own verdict on a wrong answer: see the module).
    `error` is the row's, "<result status>: <the judge's last word>" for a judged program."""
    line = error.strip().splitlines()[-1] if error.strip() else ""
    kind, colon, said = line.partition(": ")
    if not colon or " " in kind:  # not a judged program's text (an agent's, a budget's)
        kind, said = status, line
    said = said.removeprefix(JUDGE_PREFIX)
    if kind == "timeout" or not said:
        return kind
    if assertion := TEST_ASSERTION.match(said):
        return f"{kind}: AssertionError at {task_id} tests.py line {assertion[1]}"
    lead = said.partition(":")[0]
    exception = EXCEPTION_NAME.search(said)
    if exception is None:
        return f"{kind}: {lead}"
    if said.startswith(exception[1]):
        return f"{kind}: {exception[1]}"
    return f"{kind}: {lead}: {exception[1]}"


@dataclass(frozen=True)
class OneReason:
    """The most common reason among failing rows, and how many of them it covers."""

    reason: str
    covers: int
    failing: int

    @property
    def share(self) -> float:
        return self.covers / self.failing

    @property
    def voids(self) -> bool:
        return self.failing >= ONE_REASON_MIN_FAILURES and self.share >= ONE_REASON_SHARE

    def describe(self) -> str:
        return (f"one grader reason covers {100 * self.share:.0f}% of {self.failing} failing "
                f"rows: {self.reason}")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "share": self.share, "voids": self.voids,
                "says": self.describe()}


def one_reason(rows: Sequence[tuple[str, str, str]]) -> OneReason | None:
    """The top reason among failing rows, each (task_id, status, error); None when none fail
    with a reason given. A row with no error text is left out: the test split's rollout files
    hold `error` empty (it quotes the hidden tests), so their reasons cannot be checked."""
    reasons = Counter(failure_reason(*row) for row in rows if row[2].strip())
    if not reasons:
        return None
    reason, covers = reasons.most_common(1)[0]
    return OneReason(reason, covers, sum(reasons.values()))


def failing_reasons(table: pd.DataFrame) -> OneReason | None:
    """one_reason over a rollout table's failing rows (heldout.episodes.rows columns)."""
    failing = table[~table["passed"].astype(bool)]
    # Files another harness wrote may have no `error`: their reasons are not checked.
    errors = failing["error"] if "error" in failing else pd.Series("", index=failing.index)
    return one_reason(list(zip(failing["task_id"].astype(str), failing["status"].astype(str),
                               errors.fillna("").astype(str), strict=True)))


def grader_reason_gate(arm: str, found: OneReason | None) -> Gate | None:
    """The voiding gate of a comparison whose arm's failing rows fail for one reason."""
    if found is None or not found.voids:
        return None
    return Gate(GRADER_REASON, f"{found.describe()} ({arm}): a broken grader, not a score", True)
