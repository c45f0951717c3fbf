"""`heldout plan`: before a long run, what it will cost. The stages `heldout pipeline` would run,
the episodes each runs (from params.yaml and the split), how many the resume cache already
holds, the model calls they make at most, the wall time each should take (at the throughput
`heldout probe` measured for an endpoint, else at the paces of the project's earlier runs,
cli/paces.py), the k the val n reads pass@k at, and what the test stage would do with its
access: read recorded results, resume, open, or be refused (by the ledger, or by the plan before
the spend), and why. Nothing runs, nothing is opened, nothing is recorded.

Registered by cli/main.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from cli.probe import PROBES, _file_name

stdout = Console()


def say(line: str) -> None:
    stdout.print(line, highlight=False, markup=False, soft_wrap=True)


@dataclass(frozen=True)
class StageWork:
    stage: str
    address: str  # the DVC stage that runs it
    checkpoint: str | None  # whose endpoint sets the pace (None: several, or none)
    episodes: int
    calls_each: int  # model calls an episode makes, at most
    done: int = 0
    batches: int = 1  # rollouts one after another, each waiting on its slowest episode

    @property
    def run_name(self) -> str:
        """Its MLflow run's name (stages/rollouts.py: `rollouts:NAME`)."""
        return self.address.replace("@", ":")


def plan() -> None:
    """Print the episodes each stage `heldout pipeline` would run (the stages DVC finds stale,
    and those downstream of one), what the resume cache holds of them, the expected wall time
    at the probed throughput, and the test access the run needs."""
    from flows.plan import stages_to_run
    from heldout.environment import find_project_root
    from stages.common import read_params

    root = find_project_root()
    params = read_params(root)
    counts, source = split_counts(root, params)
    to_run = stages_to_run(root)
    say(f"heldout plan: {counts['val']} val and {counts['test']} test tasks ({source}); a look "
        "only, it runs nothing")
    if to_run is not None and not to_run:
        say("to run: nothing: every stage is up to date with dvc.lock")
        return
    found, access = run_forecast(root, params, counts, to_run)
    width = max(len(row.work.stage) for row in found.rows)
    say(f"  {'stage':<{width}}  {'episodes':>9}  {'cached':>9}  {'calls, at most':>14}  expected")
    for row in found.rows:
        item = row.work
        numbers = (f"{item.episodes:>9,}  {item.done:>9,}  {item.episodes * item.calls_each:>14,}"
                   if item.episodes else f"{'-':>9}  {'-':>9}  {'-':>14}")
        say(f"  {item.stage:<{width}}  {numbers}  {row.expected}")
    stale = ("every stage (not a git repository yet: DVC has run none here)" if to_run is None
             else f"{len(to_run)} stale stage(s) and those downstream")
    say(f"to run: {found.episodes:,} episodes in {stale}; {found.pace()}")
    say(pass_at_k_line(params))
    if to_run is not None and "test" not in to_run:
        say("test access: none: the test stage is up to date (its recorded results stand)")
    else:
        say(access.line() if access else access_line(root, params))


@dataclass(frozen=True)
class Planned:
    work: StageWork
    left: int  # episodes it would run
    expected: str  # how long, or why unknown, or "up to date"


@dataclass(frozen=True)
class Forecast:
    rows: list[Planned]
    seconds: float  # at the measured paces, of the stages that have one
    unknown: int  # stages to run whose pace nothing measured
    # At most this much more: stages priced at a trial's pace, each rollout among them held up
    # by an episode at the program time limit (cli/paces.py, at_trial_pace).
    tail: float = 0.0

    @property
    def episodes(self) -> int:
        return sum(row.left for row in self.rows)

    def pace(self) -> str:
        expected = (f"expected {_duration(self.seconds)}" if not self.tail else
                    f"expected {_duration(self.seconds)} to {_duration(self.seconds + self.tail)} "
                    "if each rollout waits once on a program at its time limit")
        if not self.unknown:
            return expected
        if self.seconds:
            return (f"{expected} for the measured stages; "
                    f"{self.unknown} at a pace nothing measured")
        return ("no stage's pace is measured yet: no earlier run in MLflow, no `heldout probe` "
                "(run `heldout probe CHECKPOINT`: a timed trial of a local agent, an endpoint's "
                "throughput, and plan again)")


def forecast(root: Path, params: dict[str, Any], counts: dict[str, int],
             to_run: set[str] | None, paces: Any, access: ForeseenAccess | None) -> Forecast:
    """What each stage would run of its episodes (nothing where DVC finds it up to date; every
    stage where `to_run` is None; none in a test stage that will read recorded results or be
    refused), and how long: at a probed endpoint's throughput, else at `paces`
    (cli.paces.Paces, the project's earlier runs)."""
    rows, seconds, unknown, tail = [], 0.0, 0, 0.0
    limit = params.get("harness", {}).get("timeout_s", 0.0)
    for item in stage_work(root, params, counts):
        runs = to_run is None or item.address in to_run
        left = item.episodes - item.done if runs else 0
        if runs and item.address == "test" and access and access.outcome in ("reads", "refused"):
            left = 0
            seconds += paces.start_cost()
            expected = ("reads the recorded results" if access.outcome == "reads" else
                        "refused: it runs no episode (below)")
        elif not runs:
            expected = "up to date"
        elif item.episodes and left == 0 and item.address.startswith("rollouts@"):
            expected = "done"
        else:
            took, how = stage_seconds(root, params, item, left, paces)
            if took is None:
                expected, unknown = how, unknown + 1
            else:
                seconds += took
                expected = f"{_duration(took)} ({how})"
                if left and paces.at_trial_pace(item.run_name):
                    tail += item.batches * limit
                    expected = (f"{_duration(took)} to {_duration(took + item.batches * limit)}"
                                f" ({how})")
        rows.append(Planned(item, left, expected))
    if seconds and (to_run is None or to_run):
        seconds += paces.pipeline_cost()
    return Forecast(rows, seconds, unknown, tail)


def stage_seconds(root: Path, params: dict[str, Any], item: StageWork, left: int,
                  paces: Any) -> tuple[float | None, str]:
    rate, how = episode_rate(root, params, item)
    if rate is not None:
        return left / rate, f"at {rate:.3g} ep/s, {how}"
    took, measured = paces.seconds(item.run_name, left)
    return (took, measured) if took is not None else (None, f"{how}; {measured}")


def run_forecast(root: Path, params: dict[str, Any], counts: dict[str, int],
                 to_run: set[str] | None) -> tuple[Forecast, ForeseenAccess | None]:
    """The forecast of what `heldout pipeline` would run now, at the measured paces, with what
    the test stage would do with its access (None when it will not run or cannot tell yet: a
    problem with its inputs is the stage's to say, in its turn)."""
    from cli.paces import Paces
    from heldout.errors import HeldoutError

    try:
        access = foreseen_access(root, params) if to_run is None or "test" in to_run else None
    except HeldoutError:
        access = None
    return forecast(root, params, counts, to_run, Paces.measured(root, params), access), access


def split_counts(root: Path, params: dict[str, Any]) -> tuple[dict[str, int], str]:
    """Tasks per split: the manifest's, or the split computed here (nothing written)."""
    from stages.catalog import MANIFEST

    if (root / MANIFEST).exists():
        return json.loads((root / MANIFEST).read_text(encoding="utf-8"))["counts"], "the split"
    from cli.split_to_come import split_to_come

    splits = split_to_come(root, params, "heldout plan")
    return {name: len(members) for name, members in splits.items()}, "the split to come"


def stage_work(root: Path, params: dict[str, Any], counts: dict[str, int]) -> list[StageWork]:
    from heldout.episodes.harness import Harness
    from heldout.episodes.sweep import SensitivityConfig, plan_settings
    from heldout.statistics.recipe import RecipesConfig
    from stages.common import section
    from stages.reruns import RerunsConfig
    from stages.score import CANARIES
    from stages.test_recipes import recipe_episodes

    harness = section(params, "harness", Harness)
    checkpoints = params.get("checkpoints") or {}
    val, test = counts["val"], counts["test"]
    cache = Cached(root, params)
    work = [StageWork(stage, stage, None, 0, 0) for stage in ("split", "decontaminate")]
    work += [StageWork(f"rollouts:{name}", f"rollouts@{name}", name, val * harness.n,
                       calls_each(settings, harness), cache.count(settings, harness))
             for name, settings in checkpoints.items()]
    single = harness.model_copy(update={"n": 1})  # the canaries' (stages/score.py)
    work.append(StageWork(f"score ({', '.join(CANARIES)} canaries)", "score", None,
                          len(CANARIES) * val, 0,
                          sum(cache.count(agent, single) for agent in CANARIES.values())))
    work.append(StageWork("select", "select", None, 0, 0))
    if "sensitivity" in params:
        sweep = section(params, "sensitivity", SensitivityConfig)
        arms = [checkpoints.get(name, {}) for name in sweep.checkpoints] + [sweep.reference]
        settings = plan_settings(harness, sweep.fields, sweep.n)
        work.append(StageWork(
            "sensitivity", "sensitivity", None,
            sum(val * setting.harness.n for setting in settings) * len(arms), harness.max_turns,
            sum(cache.count(agent, setting.harness) for agent in arms for setting in settings)))
    reruns = section(params, "reruns", RerunsConfig)
    base, per_run = params.get("base"), reruns.harness(harness).n
    recipes = section(params, "recipes", RecipesConfig)
    seeds = (f", {len(recipes.checkpoints())} recipe seeds x {harness.n} episodes"
             if recipes.root else "")
    work.append(StageWork(f"test (2 arms x {reruns.runs} runs x {per_run} episodes{seeds}, and "
                          "the oracle)", "test", base, 2 * reruns.runs * test * per_run + test
                          + recipe_episodes(recipes, harness, test),
                          calls_each(checkpoints.get(base, {}), harness),
                          batches=reruns.runs))
    work.append(StageWork("report", "report", None, 0, 0))
    return work


def pass_at_k_line(params: dict[str, Any]) -> str:
    """The k the val n supports and the ks the val curves show (score.max_k, else up to n/2);
    a max_k the n cannot reach is the ParamsError the score stage would raise."""
    from heldout.episodes.harness import Harness
    from heldout.statistics.counts import ScoreConfig, supported_k
    from stages.common import section

    n = section(params, "harness", Harness).n
    ks = section(params, "score", ScoreConfig).ks(n)
    return (f"val pass@k: n = {n} episodes per task supports k <= {supported_k(n)} (a k needs "
            f"n >= 2k); the val curves show k = {', '.join(map(str, ks))}")


def calls_each(settings: dict[str, Any], harness: Any) -> int:
    """Model calls an episode makes at most: one for a single-shot agent."""
    single = settings.get("agent") != "openai" or settings.get("protocol", "completion") == (
        "completion")
    return 1 if single and settings.get("policy") in (None, "") else harness.max_turns


class Cached:
    """How many of an agent's val episodes under a harness the resume cache holds (0 before
    the split): keyed as the rollouts and the sweep key them (heldout.episodes.episode)."""

    def __init__(self, root: Path, params: dict[str, Any]):
        from heldout.episodes.rollout import RolloutsConfig
        from heldout.tasks.sources import load_tasks
        from stages.catalog import split_file
        from stages.common import section

        val = root / split_file("val")
        self.tasks = load_tasks(val) if val.exists() else []
        self.folder = root / section(params, "rollouts", RolloutsConfig).cache

    def count(self, settings: dict[str, Any], harness: Any) -> int:
        from heldout.agents.registry import identity_settings
        from heldout.canonical import content_digest
        from heldout.episodes.cache import EpisodeCache
        from heldout.episodes.episode import episode_key_for, plan_episodes

        if not self.tasks:
            return 0
        key = episode_key_for(harness, content_digest(identity_settings(settings)))
        cache = EpisodeCache(self.folder)
        try:
            return len(cache.read([key(e) for e in plan_episodes(self.tasks, harness)]).rows)
        finally:
            cache.close()


def episode_rate(root: Path, params: dict[str, Any], item: StageWork) -> tuple[float | None, str]:
    """Episodes a second for this stage's work, and where the number comes from."""
    settings = (params.get("checkpoints") or {}).get(item.checkpoint or "", {})
    if not item.episodes:
        return None, "no episodes"
    if settings.get("agent") != "openai":
        return None, "no endpoint: a local agent" if item.checkpoint else "several agents"
    probed = root / PROBES / f"{_file_name(item.checkpoint)}.json"
    if not probed.exists():
        return None, f"unmeasured: heldout probe {item.checkpoint}"
    knee = json.loads(probed.read_text(encoding="utf-8"))["knee"]
    in_flight = min(knee["in_flight"], _rollouts_in_flight(params))
    rate = knee["throughput"] * in_flight / knee["in_flight"] / max(item.calls_each, 1)
    return rate, f"probe: {knee['throughput']:.3g} req/s at {knee['in_flight']} in flight"


def _rollouts_in_flight(params: dict[str, Any]) -> int:
    from heldout.episodes.rollout import RolloutsConfig
    from stages.common import section

    return section(params, "rollouts", RolloutsConfig).in_flight


@dataclass(frozen=True)
class ForeseenAccess:
    key: Any  # heldout.custody.lock.AccessKey
    outcome: str  # heldout.custody.foresight.OUTCOMES
    why: str

    def line(self) -> str:
        key = self.key
        arms = f"{key.candidate} against {key.base} (if select keeps choosing {key.candidate})"
        return {"reads": f"test access: none: {self.why}",
                "resumes": f"test access: resumed, {arms}: {self.why}",
                "opens": f"test access: opens, {arms}: {self.why}",
                "refused": f"test access: REFUSED, {arms}: {self.why}"}[self.outcome]


def foreseen_access(root: Path, params: dict[str, Any]) -> ForeseenAccess | None:
    """What the test stage would do with its access, from the ledger and the files in place
    (heldout.custody.foresight): read recorded results, resume, open, or be refused, and why;
    refused first by the plan before the spend, as the stage checks it before the lock
    (heldout.custody.spend). None before the split and select have run: the access is not
    known yet."""
    from heldout.custody.foresight import forecast_access
    from heldout.custody.guard import LEDGER
    from heldout.custody.identity import ParamsReads
    from heldout.custody.ledger import read_ledger
    from heldout.custody.spend import spend_refusal
    from heldout.errors import StageError
    from stages.access_inputs import access_inputs
    from stages.access_record import results_in_place
    from stages.catalog import MANIFEST, SELECTION
    from stages.val_plan import spend_plan

    if not (root / MANIFEST).exists() or not (root / SELECTION).exists():
        return None
    inputs = access_inputs(root, ParamsReads(params))
    in_place = results_in_place(root)
    found = forecast_access(
        read_ledger(root / LEDGER) if (root / LEDGER).exists() else [], inputs.key,
        inputs.identity, reason=inputs.test.reaccess.reason,
        reason_for=inputs.test.reaccess.access, source=str(inputs.manifest["source"]),
        excluded=inputs.excluded,
        results_in_place=in_place.get("access_id") if in_place else None)
    if found.outcome != "reads":
        try:
            refused = spend_refusal(spend_plan(root, inputs), inputs.names["candidate"],
                                    inputs.test.spend)
        except StageError:
            refused = None  # an arm not scored on val yet: the score stage runs first
        if refused:
            return ForeseenAccess(inputs.key, "refused", refused)
    return ForeseenAccess(inputs.key, found.outcome, found.why)


def access_line(root: Path, params: dict[str, Any]) -> str:
    foreseen = foreseen_access(root, params)
    if foreseen is None:
        return ("test access: one, for the checkpoint select will choose against "
                f"{params.get('base')}; what it opens is known once the split and select have "
                "run (`heldout plan` again then)")
    return foreseen.line()


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds <= 0:
        return "0 s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else (
        f"{minutes} min {secs:02d} s" if minutes else f"{secs} s")
