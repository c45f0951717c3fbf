"""The statistics API under its first name: heldout.stats re-exports heldout.statistics, their
home since the core was regrouped by concern (estimators, intervals, paired_tests, power,
summary). Import from heldout.statistics in new code; this name stays for the code and
notebooks that use it.

One change came with the move: paired_bootstrap returns an Interval, whose `estimate` is the
mean difference (PairedBootstrap and its `diff` are gone).
"""

from heldout.statistics import *  # noqa: F403 - the re-export is this module's purpose
from heldout.statistics import __all__  # noqa: F401
