"""Which k an n supports (issue 41, item 6): pass@k is read at k <= n/2, where the unbiased
estimator still averages over episodes; a params key asks for the k a question needs, and
params refuse an n that cannot reach it, naming the n it needs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli.plan import pass_at_k_line
from heldout.errors import ParamsError
from heldout.statistics.counts import ScoreConfig, default_ks, supported_k
from stages import score


def test_an_n_supports_k_up_to_half_of_it_and_the_default_ks_keep_to_that():
    assert [supported_k(n) for n in (1, 2, 3, 4, 9, 10, 16, 24)] == [1, 1, 1, 2, 4, 5, 8, 12]
    assert default_ks(10) == [1, 2, 4]
    assert default_ks(24) == [1, 2, 4, 8]
    for n in range(1, 200):
        assert all(k == 1 or 2 * k <= n for k in default_ks(n)), n
        assert ScoreConfig().ks(n) == default_ks(n)


def test_a_k_asked_for_is_reached_when_n_is_at_least_twice_it():
    assert ScoreConfig(max_k=8).ks(16) == [1, 2, 4, 8]
    assert ScoreConfig(max_k=5).ks(10) == [1, 2, 4, 5]  # the asked k itself, not a power of 2
    assert ScoreConfig(max_k=12).ks(40) == [1, 2, 4, 8, 12]  # up to it, not to n/2 = 20
    with pytest.raises(ParamsError) as refused:
        ScoreConfig(max_k=8).ks(15)
    assert str(refused.value) == ("params.yaml: score.max_k: pass@8 needs harness.n >= 16 "
                                  "(pass@k is read at k <= n/2); harness.n is 15")


def test_the_plan_states_which_k_the_val_n_supports():
    params = {"harness": {"n": 10}}
    assert pass_at_k_line(params) == ("val pass@k: n = 10 episodes per task supports k <= 5 (a k "
                                      "needs n >= 2k); the val curves show k = 1, 2, 4")
    asked = {"harness": {"n": 16}, "score": {"max_k": 8}}
    assert pass_at_k_line(asked).endswith("supports k <= 8 (a k needs n >= 2k); the val curves "
                                          "show k = 1, 2, 4, 8")
    with pytest.raises(ParamsError, match="score.max_k: pass@8 needs harness.n >= 16"):
        pass_at_k_line({"harness": {"n": 10}, "score": {"max_k": 8}})


def test_the_score_stage_refuses_a_k_its_n_cannot_reach_before_it_runs_anything(
        project: Path):
    params = yaml.safe_load((project / "params.yaml").read_text())
    n = params["harness"]["n"]
    params["score"] = {"max_k": n // 2 + 1}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ParamsError, match=f"needs harness.n >= {2 * (n // 2 + 1)} "):
        score.run(project)  # the project never split: it stops at the k, first
