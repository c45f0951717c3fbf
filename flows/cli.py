"""The `heldout` command: the outermost layer, above flows, stages and the core. Errors a
user can cause print as one message and exit 2.

Imports stay inside the commands: `heldout --help` must not pay for prefect or mlflow.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from flows.warm import WARM_ENV
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
    """A stage is a module of `stages/` with a flow module of the same name in `flows/`."""
    import flows
    import stages

    def modules(package: object) -> set[str]:
        return {module.name for module in pkgutil.iter_modules(package.__path__)}

    return sorted(modules(flows) & modules(stages))


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
    from prefect import tags

    from flows import PIPELINE_RUN_ENV

    pipeline_run = os.environ.get(PIPELINE_RUN_ENV)
    with tags(*([f"pipeline:{pipeline_run}"] if pipeline_run else [])):
        if checkpoint is None:
            flow()
        else:
            flow(checkpoint=checkpoint)


@app.command()
def pipeline(
    targets: Annotated[
        list[str] | None, typer.Argument(help="Stages to bring up to date (default: all).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Run the stages even if DVC finds them up to date.")
    ] = False,
) -> None:
    """`dvc repro` as one Prefect flow: DVC decides what is stale; every stage reports to one
    Prefect API (PREFECT_API_URL, else a private server for this run); MLflow gets a summary."""
    from heldout.environment import apply_defaults, find_project_root

    root = find_project_root()
    apply_defaults(root)
    from flows.pipeline import pipeline_flow
    from flows.server import prefect_api

    with prefect_api():
        summary = pipeline_flow(targets=targets or None, force=force, root=str(root))
    counts = summary["counts"]
    stdout.print(
        f"pipeline: {counts['ran']} stages ran, {counts['up_to_date']} up to date, in "
        f"{summary['wall_s']:.1f} s; dvc.lock {str(summary['dvc_lock_sha256'])[:12]}",
        highlight=False,
    )


@app.command()
def serve() -> None:
    """Serve the nightly deployment of the pipeline flow (cron: params.orchestration) until
    stopped. Needs a Prefect server: PREFECT_API_URL."""
    from heldout.environment import apply_defaults, find_project_root

    root = find_project_root()
    apply_defaults(root)
    from flows.deploy import serve_nightly

    serve_nightly(root)


@tasks_app.command("validate")
def tasks_validate(
    source: Annotated[str, typer.Argument(help="A JSONL task file, or 'humaneval'.")],
) -> None:
    """Check every line of a task file; print one OK line, or every problem with its line."""
    from heldout.tasks.record import tasks_digest
    from heldout.tasks.sources import load_tasks

    tasks = load_tasks(source if source == "humaneval" else Path(source))
    groups = len({t.group for t in tasks})
    stdout.print(
        f"OK: {len(tasks)} tasks in {groups} groups in {source} "
        f"(digest {tasks_digest(tasks)[:12]})",
        highlight=False,
        soft_wrap=True,
    )


@app.command()
def compare(
    base: Annotated[Path, typer.Argument(metavar="A.parquet", help="The base's rollouts.")],
    candidate: Annotated[
        Path, typer.Argument(metavar="B.parquet", help="The candidate's rollouts.")
    ],
    out: Annotated[
        Path, typer.Option(help="Folder for report.md, report.html, report.json, figures/.")
    ],
    sample: Annotated[
        int, typer.Option(help="Sample index of the episode the exact McNemar test uses.")
    ] = 0,
    allow_harness_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-harness-mismatch",
            help="Compare rollouts made under different harnesses; the headline says so.",
        ),
    ] = False,
    base_name: Annotated[
        str | None, typer.Option(help="A's label (default: its checkpoint column).")
    ] = None,
    candidate_name: Annotated[
        str | None, typer.Option(help="B's label (default: its checkpoint column).")
    ] = None,
    rerun: Annotated[
        list[Path] | None,
        typer.Option(help="Another run of A under new seeds on the same tasks (repeat: A and "
                          "2 reruns make the 3 runs a noise floor needs)."),
    ] = None,
) -> None:
    """The paired report of B against A from any two rollout files, no pipeline needed."""
    from heldout.report import build_report, headline_markdown, read_rollouts, write_report
    from heldout.report.inputs import rerun_scores

    base_table = read_rollouts(base)
    report = build_report(
        base_table,
        read_rollouts(candidate),
        rerun_scores=rerun_scores(base_table, [read_rollouts(path) for path in rerun or []]),
        base_name=base_name,
        candidate_name=candidate_name,
        sample=sample,
        allow_harness_mismatch=allow_harness_mismatch,
    )
    written = write_report(report, out)
    stdout.print(headline_markdown(report), markup=False, highlight=False, soft_wrap=True)
    stdout.print(
        f"wrote {', '.join(str(path.relative_to(out)) for path in written)} in {out}",
        markup=False, highlight=False, soft_wrap=True,
    )


@app.command()
def audit() -> None:
    """Check the test-access ledger (chain, MACs under the test key, the git anchor) and
    cross-check it against MLflow, deleted runs included; list every access. Exits 1 on any
    problem."""
    from rich.table import Table

    from heldout.custody.audit import audit_project
    from heldout.environment import apply_defaults, find_project_root
    from stages.catalog import LEDGER
    from stages.common import read_params, section
    from stages.tracking import TrackingConfig, runs_touching_test_split

    root = find_project_root()
    apply_defaults(root)
    config = section(read_params(root), "mlflow", TrackingConfig)
    result = audit_project(root, runs_touching_test_split(root, config))
    table = Table(title=f"test-set accesses ({LEDGER})")
    for column in ("seq", "time", "user", "outcome", "access_id", "test_version", "candidate",
                   "base", "harness", "reason"):
        table.add_column(column)
    for e in result.accesses:
        table.add_row(*(str(e.get(name) or "") for name in ("seq", "time", "user", "outcome",
                                                             "access_id", "test_version",
                                                             "candidate", "base")),
                      str(e.get("harness") or "")[:12], str(e.get("reason") or "")[:60])
    # Piped output keeps whole rows: the table is for reading, not for a terminal's width.
    Console(width=None if stdout.is_terminal else 200).print(table)
    for version, models in sorted(result.models_per_test_version.items()):
        stdout.print(f"{version}: {models} models evaluated on it", highlight=False)
    say = {"highlight": False, "soft_wrap": True, "markup": False}
    stdout.print(result.key_status, **say)
    if result.anchor is not None:
        stdout.print(result.anchor.summary(), **say)
    for note in result.notes:
        stdout.print(f"note: {note}", **say)
    if result.chain_break:
        stderr.print(f"ledger broken at line {result.chain_break.line} of {LEDGER}: "
                     f"{result.chain_break.reason}", **say)
    for problem in result.problems:
        stderr.print(f"problem: {problem}", **say)
    if not result.ok:
        raise typer.Exit(1)
    stdout.print(f"audit OK: {result.lines} ledger lines, chain and MACs whole, ledger and "
                 "MLflow agree", highlight=False)


@app.command()
def abort(
    access_id: Annotated[str, typer.Argument(help="The open access, as `heldout audit` names it.")],
    reason: Annotated[str, typer.Option(help="Why the access ends without a result (recorded).")],
) -> None:
    """Close a test access that was opened and never closed (a killed stage) without a result:
    appends an "aborted" ledger line under the test key. The access still counts as one look."""
    from heldout.custody.anchor import stage_ledger
    from heldout.custody.audit import abort_access
    from heldout.custody.keys import load_keys
    from heldout.environment import apply_defaults, find_project_root
    from stages.catalog import LEDGER

    root = find_project_root()
    apply_defaults(root)
    entry = abort_access(root / LEDGER, access_id, reason, load_keys().current)
    say = {"highlight": False, "soft_wrap": True, "markup": False}
    stdout.print(f"aborted access {access_id}: ledger line {entry['seq']} of {LEDGER}, "
                 f"candidate {entry.get('candidate')} vs {entry.get('base')} on "
                 f"{entry.get('test_version')}, MLflow run {entry.get('mlflow_run_id')}, "
                 f"MAC'd under test key {entry['key_id']}; reason: {entry['reason']}", **say)
    stdout.print(stage_ledger(root), **say)


@app.command()
def key() -> None:
    """Show the test key this shell holds: its id and public half (for params.custody.public_key:
    whoever re-deals the split can then seal it without being able to read it). Never the secret."""
    from heldout.custody.keys import load_keys

    ring = load_keys()
    for number, held in enumerate(ring.keys):
        role = "current" if number == 0 else "older (verifies ledger lines only)"
        stdout.print(f"test key {held.key_id} ({role}, from {ring.source}): public key "
                     f"{held.public.hex()}", highlight=False, soft_wrap=True, markup=False)


def main() -> None:
    if sys.argv[1:2] == ["stage"] and os.environ.get(WARM_ENV):
        # Under the pipeline: become a fork of its warm starter rather than start cold.
        from flows.warm import forward

        code = forward(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    try:
        app()
    except HeldoutError as error:
        stderr.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
