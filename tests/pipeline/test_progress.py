"""Progress that is right (issue 39 item 3): no ETA before a pace is measured, and the pace
measured from the first finished episode, so a slow start-up never reads as hours to go."""

from __future__ import annotations

from flows.fanout import chunk_numbers, progress_line, works_label
from stages.progress import PACE_AFTER, EpisodeProgress, Pace


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_no_eta_before_a_pace_then_the_pace_after_the_start_up():
    clock = Clock()
    pace = Pace(clock)
    clock.now = 600.0  # ten minutes of start-up before the first episode finished
    for _ in range(PACE_AFTER - 1):
        pace.ran_one()
        assert pace.eta(1_000) == "-" and pace.rate() is None
        clock.now += 1.0
    pace.ran_one()  # then one a second
    assert pace.rate() == 1.0
    assert pace.eta(1_000) == "16m40s" and pace.eta(30) == "30s"
    # Measured from the start instead, 5 episodes in 604 s would have said 33 hours.


def test_episode_progress_counts_only_episodes_that_ran_toward_the_pace():
    progress = EpisodeProgress("t")
    clock = Clock()
    progress.pace = Pace(clock)
    progress.start(100)
    for _ in range(50):  # resumed from the cache: no pace from them
        progress.advance({"passed": True, "status": "ok"}, cached=True)
    assert progress.eta() == "-"
    for _ in range(PACE_AFTER + 1):
        clock.now += 2.0
        progress.advance({"passed": False, "status": "ok"}, cached=False)
    assert progress.eta() == "1m28s"  # 44 left at one every 2 s


def test_the_flow_run_progress_line_says_no_eta_before_a_pace():
    pace = Pace(Clock())
    assert progress_line("rollouts:base", 0, 100, pace).endswith("ETA -")
    assert " - ep/s" in progress_line("rollouts:base", 0, 100, pace)


def test_work_run_together_is_named_by_its_own_label_and_chunk_number():
    from types import SimpleNamespace

    works = [SimpleNamespace(label=label) for label in ("canary:oracle", "canary:blind",
                                                        "canary:oracle", "canary:oracle")]
    assert chunk_numbers(works) == [0, 0, 1, 2]
    assert works_label(works) == "canary:oracle and 1 other"
    assert works_label([*works, SimpleNamespace(label="x")]) == "canary:oracle and 2 others"
    assert works_label(works[:1]) == "canary:oracle"
