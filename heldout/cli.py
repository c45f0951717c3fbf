"""The `heldout` command. Errors a user can cause print as one message and exit 2.

Imports stay inside the commands: `heldout --help` must not pay for prefect or mlflow.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from heldout.errors import HeldoutError, StageError

app = typer.Typer(
    help="heldout: is checkpoint B really better than checkpoint A? Split, decontaminate, "
    "roll out, score, select, test once, report.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
tasks_app = typer.Typer(help="Inspect and validate task files.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
stderr = Console(stderr=True)
stdout = Console()


def available_stages() -> list[str]:
    import flows

    return sorted(module.name for module in pkgutil.iter_modules(flows.__path__))


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help="The stage to run, as dvc.yaml calls it.")],
    checkpoint: Annotated[
        str | None, typer.Option(help="The checkpoint, for stages run once per checkpoint.")
    ] = None,
) -> None:
    """Run one pipeline stage as a Prefect flow (what dvc.yaml calls)."""
    from heldout.environment import apply_defaults, find_project_root

    apply_defaults(find_project_root())
    if name not in available_stages():
        raise StageError(
            f"unknown stage '{name}'; the stages are: {', '.join(available_stages())}"
        )
    module = importlib.import_module(f"flows.{name}")
    flow = getattr(module, f"{name}_flow")
    if checkpoint is None:
        flow()
    else:
        flow(checkpoint=checkpoint)


@tasks_app.command("validate")
def tasks_validate(
    source: Annotated[str, typer.Argument(help="A JSONL task file, or 'humaneval'.")],
) -> None:
    """Check every line of a task file; print one OK line, or every problem with its line."""
    from heldout.tasks import load_tasks, tasks_digest

    tasks = load_tasks(source if source == "humaneval" else Path(source))
    groups = len({t.group for t in tasks})
    stdout.print(
        f"OK: {len(tasks)} tasks in {groups} groups in {source} "
        f"(digest {tasks_digest(tasks)[:12]})",
        highlight=False,
        soft_wrap=True,
    )


def main() -> None:
    try:
        app()
    except HeldoutError as error:
        stderr.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(2)
