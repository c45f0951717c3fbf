"""`heldout probe-recall CHECKPOINT`: does a served model complete the split's tasks verbatim
from their first part (heldout.contamination.recall)? The check for a checkpoint trained on data
nobody can read: the model is asked, at temperature 0, through the openai agent's own
transport (heldout.agents.openai_http: its retries, deadlines and adaptive limit).

Train and val only: a probe on test tasks is a test access, which only the test stage makes.
Writes .heldout/recall/<checkpoint>-<split>.json (the rows, the summary, the settings).

Registered by cli/main.py. Imports stay inside the functions: `heldout --help` must not pay
for aiohttp or scipy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

if TYPE_CHECKING:
    from heldout.agents.openai_http import Transport
    from heldout.agents.openai_settings import OpenAISettings
    from heldout.contamination.recall import Cut, RecallRow

stdout = Console()
SAY = {"markup": False, "highlight": False, "soft_wrap": True}
RECALLS = Path(".heldout/recall")
SEED = 0


def probe_recall(
    checkpoint: Annotated[str, typer.Argument(
        help="A checkpoint of params.yaml with agent: openai.")],
    split: Annotated[str, typer.Option(help="The split probed: train or val (never test).")]
    = "val",
    prefix: Annotated[float, typer.Option(
        help="The share of each text's characters the model is shown (cut at a word's end); "
             "it must write the rest.")] = 0.6,
    out: Annotated[Path | None, typer.Option(
        dir_okay=False, help="The JSON file written (default: "
                             ".heldout/recall/<checkpoint>-<split>.json).")] = None,
    in_flight: Annotated[int, typer.Option(
        min=1, max=256, help="Requests sent at once (the endpoint's adaptive limit may hold "
                             "fewer).")] = 8,
    mlflow: Annotated[bool, typer.Option(
        "--mlflow/--no-mlflow", help="Log an MLflow run: the shares recalled, their intervals, "
                                     "the JSON file.")] = True,
) -> None:
    """Ask a served model whether it memorized the split's tasks: each task's prompt, and its
    prompt with its reference solution, is cut at PREFIX of its characters; the model's
    continuation at temperature 0 must reproduce the rest verbatim (whitespace runs aside).
    Prints how many tasks it recalled, with a Clopper-Pearson interval, and which."""
    from heldout.canonical import sha256_hex
    from heldout.contamination import recall
    from heldout.environment import find_project_root
    from heldout.errors import ParamsError
    from heldout.files import write_json_atomic
    from heldout.tasks.sources import load_tasks

    root = find_project_root()
    path = split_path(root, split)
    if not 0.0 < prefix < 1.0:
        raise ParamsError(f"--prefix must be strictly between 0 and 1 (a share of each text), "
                          f"got {prefix}")
    settings = openai_settings(root, checkpoint)
    tasks = load_tasks(path)
    pieces = [(task.id, kind, piece) for task in tasks
              for kind, text in recall.task_texts(task).items()
              if (piece := recall.cut(text, prefix)) is not None]
    stdout.print(f"probe-recall: {checkpoint} ({settings.model} at {settings.base_url}, "
                 f"{settings.endpoint}), {len(tasks)} {split} tasks, {len(pieces)} texts cut "
                 f"at {prefix:g} of their characters, temperature 0", **SAY)
    rows = probe_all(settings, pieces, in_flight)
    summary = recall.summarize(rows)
    record = {
        "schema": recall.SCHEMA, "checkpoint": checkpoint, "split": split,
        "split_file": str(path.relative_to(root)), "split_sha256": sha256_hex(path.read_bytes()),
        "tasks": len(tasks),
        "settings": request_settings(settings, prefix),
        "summary": {kind: found.as_dict() for kind, found in summary.items()},
        "rows": [row.as_dict() for row in rows],
    }
    target = out if out is not None else root / RECALLS / f"{_file_name(checkpoint)}-{split}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target, record)
    show(checkpoint, split, summary)
    stdout.print(f"probe-recall: wrote {target}", **SAY)
    if mlflow:
        stdout.print(f"MLflow run {log_recall(record, target)}", **SAY)


def log_recall(record: dict[str, Any], target: Path) -> str:
    """The probe's MLflow run: per text kind, the tasks probed and recalled, the share and its
    interval; the split file's digest; the JSON file."""
    from cli.command_runs import log_run

    metrics = {}
    for kind, found in record["summary"].items():
        metrics |= {f"{kind}_probed": found["probed"], f"{kind}_recalled": found["recalled"]}
        if found["share"] is not None:
            metrics |= {f"{kind}_share": found["share"], f"{kind}_share_low":
                        found["interval"][0], f"{kind}_share_high": found["interval"][1]}
    params = {"checkpoint": record["checkpoint"], "split": record["split"],
              "split_sha256": record["split_sha256"], **record["settings"]}
    return log_run(f"probe-recall {record['checkpoint']} on {record['split']}",
                   {"command": "probe-recall", "split": record["split"]}, params, metrics,
                   [target])


def split_path(root: Path, split: str) -> Path:
    """The split's file, or why it is not probed: test never, a missing file not yet."""
    from heldout.errors import HeldoutError, ParamsError
    from stages.catalog import split_file

    if split == "test":
        raise HeldoutError(
            "heldout probe-recall: a probe on test tasks is a test access; the rule: only the "
            "test stage opens the test split, once per access, recorded in the ledger "
            "(docs/stages.md, 'test'). Probe train or val; test tasks are seen by "
            "`dvc repro test` alone.")
    if split not in ("train", "val"):
        raise ParamsError(f"heldout probe-recall: --split is train or val, got {split!r}")
    path = root / split_file(split)
    if not path.is_file():
        raise HeldoutError(
            f"heldout probe-recall: {split_file(split)} does not exist: run the split stage "
            "first (`dvc repro split`, or `heldout stage split`)")
    return path


def openai_settings(root: Path, name: str) -> OpenAISettings:
    """The checkpoint's settings, which must be an openai agent's."""
    from pydantic import ValidationError

    from heldout.agents.openai_settings import OpenAISettings
    from heldout.errors import ParamsError
    from stages.common import checkpoint_settings, read_params

    settings = dict(checkpoint_settings(read_params(root), name))
    kind = settings.pop("agent", None)
    if kind != "openai":
        raise ParamsError(
            f"heldout probe-recall: checkpoint {name} is agent: {kind}, not openai; the probe "
            "asks a served model to continue text, and only an openai checkpoint is one")
    try:
        return OpenAISettings.model_validate(settings)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise ParamsError(f"params.yaml: checkpoints.{name}.{where}: {problem['msg']}") from None


def request_settings(settings: OpenAISettings, prefix: float) -> dict[str, Any]:
    """What decides the answers, apart from the harness (the probe uses none of it)."""
    from heldout.contamination import recall

    return {
        "prefix_share": prefix, "model": settings.model, "base_url": settings.base_url,
        "endpoint": settings.endpoint, "temperature": 0, "top_p": 1, "seed": SEED,
        "max_tokens": "bytes of UTF-8 of the held-back text + 16",
        "instruction": recall.INSTRUCTION if settings.endpoint == "chat" else None,
        "system_prompt": settings.system_prompt, "min_words": recall.MIN_WORDS,
        "recalled": "the continuation starts with the held-back text, whitespace runs aside",
    }


def body(settings: OpenAISettings, piece: Cut) -> dict[str, Any]:
    """The request: a plain completion of the prefix, or (chat) the prefix with the
    instruction to continue it exactly."""
    from heldout.contamination.recall import INSTRUCTION, max_tokens_for

    request: dict[str, Any] = {"model": settings.model, "temperature": 0, "top_p": 1,
                               "seed": SEED, "max_tokens": max_tokens_for(piece.held_back)}
    if settings.endpoint == "completions":
        return request | {"prompt": piece.prefix}
    system = settings.system_prompt
    return request | {"messages": [
        *([{"role": "system", "content": system}] if system is not None else []),
        {"role": "user", "content": f"{INSTRUCTION}\n\n{piece.prefix}"}]}


def continuation(settings: OpenAISettings, piece: Cut, reply: Any) -> str:
    from heldout.contamination.recall import chat_continuation
    from heldout.errors import AgentError

    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"] if settings.endpoint == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError) as error:
        raise AgentError(f"not a {settings.endpoint} completion ({type(error).__name__}: "
                         f"{error})") from None
    if not isinstance(text, str):
        raise AgentError(f"the completion text is {type(text).__name__}, not a string")
    return chat_continuation(text, piece.prefix) if settings.endpoint == "chat" else text


def probe_all(settings: OpenAISettings, pieces: list[tuple[str, str, Cut]],
              in_flight: int) -> list[RecallRow]:
    """Every piece's row, in the pieces' order, `in_flight` requests at once on the process's
    event loop, with a progress bar on a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from heldout.agents.openai_http import Transport
    from heldout.aio import run_blocking

    console = Console(stderr=True)
    bar = Progress(TextColumn("[bold]probe-recall[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("recalled {task.fields[recalled]}"), console=console,
                   disable=not console.is_terminal, transient=True)
    transport = Transport(settings)
    with bar:
        task = bar.add_task("probe", total=len(pieces), recalled=0)
        counted = [0]

        def done(row: RecallRow) -> None:
            counted[0] += row.recalled
            bar.update(task, advance=1, recalled=counted[0])

        try:
            return run_blocking(_gather(transport, settings, pieces, in_flight, done))
        finally:
            transport.close()


async def _gather(transport: Transport, settings: OpenAISettings,
                  pieces: list[tuple[str, str, Cut]], in_flight: int, done: Any
                  ) -> list[RecallRow]:
    from heldout.contamination.recall import RecallRow, judged, max_tokens_for
    from heldout.errors import AgentError

    slots = asyncio.Semaphore(in_flight)

    async def one(task_id: str, kind: Any, piece: Cut) -> RecallRow:
        request = body(settings, piece)
        async with slots:
            try:
                reply = await transport.post(request)
                row = judged(task_id, kind, piece, request["max_tokens"],
                             continuation(settings, piece, reply))
            except AgentError as error:
                row = RecallRow(task_id, kind, len(piece.prefix), len(piece.held_back),
                                max_tokens_for(piece.held_back), error=str(error))
        done(row)
        return row

    return list(await asyncio.gather(*(one(*piece) for piece in pieces)))


def show(checkpoint: str, split: str, summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table("text", "probed", "recalled", "share", "95% CI (Clopper-Pearson)",
                  "mean prefix match", "failed",
                  title=f"{checkpoint} on {split}: tasks completed verbatim from their start")
    for kind, found in summary.items():
        share = "-" if found.share is None else f"{found.share:.3f}"
        interval = "-" if found.interval is None else \
            f"[{found.interval[0]:.3f}, {found.interval[1]:.3f}]"
        mean = "-" if found.mean_prefix_share is None else f"{found.mean_prefix_share:.3f}"
        table.add_row(kind, str(found.probed), str(found.recalled), share, interval, mean,
                      str(found.failed))
    stdout.print(table)
    for kind, found in summary.items():
        stdout.print(f"{kind} recalled ({found.recalled}): "
                     f"{', '.join(found.recalled_ids) or 'none'}", **SAY)


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
