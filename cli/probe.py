"""`heldout probe`: an endpoint's throughput and latency at a ladder of concurrency levels, its
knee, and the `max_in_flight` it suggests (heldout.agents.probe); for a checkpoint whose agent
runs here, a timed trial of its episodes (cli/trial.py). What it measured is kept in
.heldout/probe/<name>.json, where `heldout plan` reads the pace.

Registered by cli/main.py. Imports stay inside the function: `heldout --help` must not pay
for aiohttp or numpy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cli.trial import TRIAL_EPISODES

stdout = Console()
PROBES = Path(".heldout/probe")
PROMPT = "Write a Python function add(a, b) that returns the sum of a and b."


def probe(
    target: Annotated[str, typer.Argument(
        help="A checkpoint of params.yaml (an endpoint's with agent: openai, else a local "
             "agent's trial), or an endpoint's base URL (http://host:port/v1, with --model).")],
    model: Annotated[str | None, typer.Option(help="The model, for a base URL.")] = None,
    ceiling: Annotated[int | None, typer.Option(
        "--max-in-flight", min=1,
        help="The highest level tried (default: the checkpoint's max_in_flight, 256).")] = None,
    max_tokens: Annotated[int | None, typer.Option(
        min=1, help="Tokens each request asks for (default: the harness's max_tokens, so the "
                    "probe decodes what an episode's call would).")] = None,
    timeout_s: Annotated[float, typer.Option(min=0.1, help="A request's deadline.")] = 300.0,
    episodes: Annotated[int, typer.Option(
        min=1, max=10_000, help="A local agent's trial: episodes it runs on val tasks "
                                "(at most the val split's tasks x harness.n).")] = TRIAL_EPISODES,
) -> None:
    """Measure an endpoint before a long run: throughput, p50/p95 latency and refusals at 1, 2,
    4, ... requests in flight; print the knee and the level it would use. A checkpoint whose
    agent runs here (demo, python, command) gets a timed trial of its episodes instead."""
    from heldout.agents.openai_http import Transport
    from heldout.agents.probe import knee
    from heldout.agents.probe import probe as climb
    from heldout.aio import run_blocking
    from heldout.environment import find_project_root

    root = find_project_root()
    local = _local_checkpoint(root, target)
    if local is not None:
        _trial(root, target, local, episodes)
        return
    name, settings, tokens = _endpoint(root, target, model)
    transport = Transport(settings)
    body = _body(settings, max_tokens or tokens)
    top = ceiling or settings.max_in_flight
    table = Table("in flight", "requests", "req/s", "p50 s", "p95 s", "refused", "failed",
                  title=f"{name}: {settings.base_url} ({settings.model})")
    stdout.print(f"probe: {settings.base_url}, levels 1 to {top}, {body['max_tokens']} tokens a "
                 "request; each level at least 40 requests", highlight=False)

    def report(level: Any) -> None:
        table.add_row(str(level.in_flight), str(level.requests), f"{level.throughput:.2f}",
                      f"{level.latency_p50_s:.3f}", f"{level.latency_p95_s:.3f}",
                      str(level.refused), str(level.failed))
        stdout.print(f"  {level.in_flight:>4} in flight: {level.throughput:.2f} req/s, p95 "
                     f"{level.latency_p95_s:.3f} s", highlight=False)

    try:
        levels = run_blocking(climb(transport, body, top, timeout_s, report))
    finally:
        transport.close()
    stdout.print(table)
    best = knee(levels)
    if best.throughput <= 0:
        stdout.print(f"probe: {settings.base_url} answered no request; check base_url and model",
                     highlight=False)
        raise typer.Exit(1)
    stdout.print(
        f"knee: {best.in_flight} in flight, {best.throughput:.2f} req/s (p95 "
        f"{best.latency_p95_s:.3f} s). It would use max_in_flight: {best.in_flight} for "
        f"{name}; the adaptive limit stays at or below it.", highlight=False)
    record = {"target": name, "base_url": settings.base_url, "model": settings.model,
              "max_tokens": body["max_tokens"], "measured_at": time.time(),
              "levels": [level.as_dict() for level in levels], "knee": best.as_dict()}
    _keep(root, name, record)


def _keep(root: Path, name: str, record: dict[str, Any]) -> None:
    out = root / PROBES / f"{_file_name(name)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    stdout.print(f"probe: kept in {out.relative_to(root)} (heldout plan reads it)",
                 highlight=False)


def _local_checkpoint(root: Path, target: str) -> dict[str, Any] | None:
    """The settings of checkpoint `target` when its agent runs here, else None."""
    from stages.common import read_params

    settings = (read_params(root).get("checkpoints") or {}).get(target)
    return dict(settings) if settings and settings.get("agent") != "openai" else None


def _trial(root: Path, name: str, settings: dict[str, Any], episodes: int) -> None:
    from cli.trial import local_trial

    stdout.print(f"probe: {name} runs here (agent: {settings.get('agent')}): a trial of up to "
                 f"{episodes} episodes on the val tasks under the pinned harness, in a cache "
                 "thrown away after; it keeps the pace, no outcome", highlight=False)
    record = local_trial(root, name, settings, episodes)
    stdout.print(f"trial: {record['episodes']} episodes in {record['seconds']:.1f} s, "
                 f"{record['episode_s']:.3g} s an episode; a stage starts in "
                 f"{record['stage_start_s']:.1f} s", highlight=False)
    _keep(root, name, record)


def _endpoint(root: Path, target: str, model: str | None) -> tuple[str, Any, int]:
    from pydantic import ValidationError

    from heldout.agents.openai_settings import OpenAISettings
    from heldout.episodes.harness import Harness
    from heldout.errors import ParamsError
    from stages.common import read_params, section

    params = read_params(root)
    tokens = section(params, "harness", Harness).max_tokens
    checkpoints = params.get("checkpoints") or {}
    if target in checkpoints:
        from heldout.agents.registry import kind_settings

        settings = kind_settings(dict(checkpoints[target]))
        try:
            return target, OpenAISettings.model_validate(settings), tokens
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise ParamsError(
                f"params.yaml: checkpoints.{target}.{where}: {problem['msg']}") from None
    if not target.startswith(("http://", "https://")):
        raise ParamsError(f"heldout probe: {target!r} is neither a checkpoint of params.yaml "
                          f"({', '.join(checkpoints) or 'none'}) nor a base URL")
    if not model:
        raise ParamsError("heldout probe: a base URL needs --model")
    return target, OpenAISettings(base_url=target, model=model), tokens


def _body(settings: Any, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": settings.model, "max_tokens": max_tokens,
                            "temperature": 0.0}
    if settings.endpoint == "completions":
        return body | {"prompt": PROMPT}
    return body | {"messages": [{"role": "user", "content": PROMPT}]}


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
