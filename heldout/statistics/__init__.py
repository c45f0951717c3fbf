"""Estimators, intervals and paired tests that every number heldout reports rests on.

The unit of uncertainty is the task, never the episode (DESIGN §5): episodes of one task are
correlated, so treating them as independent draws makes intervals too narrow by the square root
of the design effect (Miller 2024, "Adding Error Bars to Evals: A Statistical Approach to
Language Model Evaluations", arXiv:2411.00640). Everything here is a pure function of arrays,
vectorized with numpy over tasks; results are small frozen dataclasses or arrays. Each module
cites its sources in its docstrings.

- estimators: pass@k and pass^k per task
- intervals: Interval, Wilson and Clopper-Pearson intervals, the task bootstrap
- bca: BCa intervals over tasks or groups (the cluster bootstrap), one arm's pass@1 interval
- paired_tests: the sign-flip permutation test (over tasks or groups), Newcombe's paired score
  interval, the paired bootstrap of a difference, the exact McNemar test
- power: design effect, minimum detectable effect, tasks required, run-level drift of reruns
- summary: one version's per-task counts summarized; estimate_intervals, the one function
  behind every pass@k and pass^k interval shown (pass@1 is its k = 1)
- pvalues: how a p-value (exact, or Monte Carlo with its resolution) and α are written
- decision: the verdict on a candidate against its base, and the gates it must pass
- counts, selection: per-task counts from rollout rows; choosing a checkpoint on validation
- pick_stability: how often the rule picks each checkpoint over resamples of the val set,
  and the winner's curse of the pick

The names below are the statistics API (also importable from heldout.stats, its former home).
"""

from heldout.statistics.bca import arm_interval, bca_interval
from heldout.statistics.estimators import pass_at_k, pass_hat_k
from heldout.statistics.intervals import (
    Interval,
    clopper_pearson_interval,
    task_bootstrap_ci,
    task_bootstrap_se,
    wilson_interval,
)
from heldout.statistics.paired_tests import (
    McNemarResult,
    PermutationTest,
    mcnemar_exact,
    paired_bootstrap,
    paired_permutation_test,
    paired_score_interval,
)
from heldout.statistics.power import (
    DesignEffect,
    Reruns,
    RunDrift,
    design_effect,
    mde,
    required_tasks,
    run_drift,
)
from heldout.statistics.summary import CountsSummary, summarize_counts

__all__ = [
    "CountsSummary",
    "DesignEffect",
    "Interval",
    "McNemarResult",
    "PermutationTest",
    "Reruns",
    "RunDrift",
    "arm_interval",
    "bca_interval",
    "clopper_pearson_interval",
    "design_effect",
    "mcnemar_exact",
    "mde",
    "paired_bootstrap",
    "paired_permutation_test",
    "paired_score_interval",
    "pass_at_k",
    "pass_hat_k",
    "required_tasks",
    "run_drift",
    "summarize_counts",
    "task_bootstrap_ci",
    "task_bootstrap_se",
    "wilson_interval",
]
