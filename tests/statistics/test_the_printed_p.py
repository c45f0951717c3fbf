"""Below 100 units the p printed is the deciding procedure's own (issue 38 item 5): the
largest of the bootstrap-t's, the sign-flip test's and the betting test's, so it rejects
exactly when the verdict's interval excludes 0."""

from __future__ import annotations

import numpy as np

from heldout.statistics.betting import betting_interval
from heldout.statistics.decision import decide


def test_below_100_units_the_p_printed_rejects_exactly_when_the_interval_excludes_0():
    rng = np.random.default_rng(2)
    for shift in (0.0, 0.05, 0.1, 0.2):
        p = rng.beta(1, 1, 60)
        base = rng.binomial(10, p) / 10
        candidate = rng.binomial(10, np.clip(p + shift, 0, 1)) / 10
        decision = decide(base, candidate, n_episodes=10, base_passed=base > 0.5,
                          candidate_passed=candidate > 0.5)
        betting = betting_interval(candidate - base, seed=0)
        assert decision.test.p_value >= betting.p_value
        excludes = not decision.difference.low <= 0 <= decision.difference.high
        assert excludes == decision.test.rejects == (decision.test.p_value <= 0.05)
