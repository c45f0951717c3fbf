"""The judge against hand labels and the grader-reason check (heldout.statistics.judge_trust):
known agreements, the gate at 0.8, the refusal under 60 labels, one reason at 96% and 90%."""

from __future__ import annotations

import pytest

from heldout.statistics.decision import GRADER_REASON, JUDGE_UNTRUSTED, NOT_DECIDABLE, WORSE
from heldout.statistics.judge_trust import (
    MIN_LABELED,
    failure_reason,
    grader_reason_gate,
    judge_agreement,
    one_reason,
)
from tests.statistics.test_decision import decide_on, passes


def slice_agreeing(agree: int, rows: int = 80) -> tuple[list[bool], list[bool]]:
    """Half the labels pass; the judge says the label on the first `agree` rows, the opposite
    on the rest."""
    labels = [row % 2 == 0 for row in range(rows)]
    return [label if row < agree else not label for row, label in enumerate(labels)], labels


@pytest.mark.parametrize(("agree", "trusted"), [(60, False), (72, True)])
def test_the_gate_voids_agreement_075_and_not_090(agree: int, trusted: bool):
    trust = judge_agreement(*slice_agreeing(agree))
    assert trust.estimate == agree / 80
    assert trust.trusted is trusted
    assert (trust.gate() is None) is trusted
    low, high = float(trust.agreement.interval.low), float(trust.agreement.interval.high)
    assert low < agree / 80 < high and trust.agreement.interval.method == "wilson"
    if not trusted:
        assert trust.gate().name == JUDGE_UNTRUSTED and "60 of 80" in trust.gate().message


def test_the_two_halves_kappa_and_flips():
    judged, labels = slice_agreeing(72)
    rejudged = [not verdict if row < 3 else verdict for row, verdict in enumerate(judged)]
    trust = judge_agreement(judged, labels, rejudged=rejudged)
    on_pass, on_fail = trust.labeled_pass, trust.labeled_fail
    assert (on_pass.rows, on_fail.rows) == (40, 40)
    assert on_pass.agree + on_fail.agree == 72  # the 8 disagreements: 4 in each half
    assert trust.kappa == pytest.approx(0.8)  # (0.9 - 0.5) / (1 - 0.5)
    assert (trust.rejudged, trust.flips) == (80, 3)
    assert type(trust).from_json(trust.to_json()) == trust


def test_a_threshold_is_configurable_and_fewer_than_60_labels_are_refused():
    assert judge_agreement(*slice_agreeing(60), threshold=0.7).trusted
    with pytest.raises(ValueError, match=f"at least {MIN_LABELED} hand-labeled rows"):
        judge_agreement(*slice_agreeing(50, rows=59))


def test_a_failure_reason_is_its_kind_and_a_test_assertion_keeps_its_task():
    judge = "failed: [heldout judge] "
    assert failure_reason("t1", "ok", judge + "AssertionError at tests.py line 12") == \
        "failed: AssertionError at t1 tests.py line 12"
    assert failure_reason("t1", "ok", judge + "the solution did not load: ModuleNotFoundError: "
                                              "No module named 'numpy'") == \
        "failed: the solution did not load: ModuleNotFoundError"
    assert failure_reason("t1", "ok", judge + "ModuleNotFoundError at tests.py line 10: No "
                                              "module named 'numpyy'") == \
        "failed: ModuleNotFoundError"
    assert failure_reason("t1", "timeout", "timeout: [heldout judge] the candidate used its "
                                           "10 s of CPU") == "timeout"
    assert failure_reason("t1", "error", "error: ImportError: cannot import x") == \
        "error: ImportError"


def rows_failing(one: int, other: int) -> list[tuple[str, str, str]]:
    """`one` rows that could not import, `other` rows wrong at an assertion of their task."""
    return ([(f"t{i}", "error", "error: ImportError: no module") for i in range(one)]
            + [(f"u{i}", "ok", "failed: [heldout judge] AssertionError at tests.py line 3")
               for i in range(other)])


def test_one_reason_voids_at_96_percent_and_not_at_90():
    found = one_reason(rows_failing(96, 4))
    assert found.voids and found.reason == "error: ImportError" and found.share == 0.96
    gate = grader_reason_gate("A.parquet", found)
    assert gate.name == GRADER_REASON
    assert "one grader reason covers 96% of 100 failing rows: error: ImportError" in gate.message
    assert not one_reason(rows_failing(90, 10)).voids
    assert grader_reason_gate("A.parquet", one_reason(rows_failing(90, 10))) is None
    assert not one_reason(rows_failing(19, 0)).voids  # too few failing rows to tell
    assert one_reason([("t", "ok", "")] * 50) is None  # no reason given (the test split)


def test_a_judge_gate_voids_a_worse_too():
    broken = passes(200, range(90)), passes(200, range(80))
    assert decide_on(*broken).verdict == WORSE
    gate = judge_agreement(*slice_agreeing(60)).gate()
    voided = decide_on(*broken, judge=(gate,))
    assert voided.verdict.startswith(f"{NOT_DECIDABLE}: the judge agrees")
